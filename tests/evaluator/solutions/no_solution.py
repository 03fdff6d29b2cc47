def not_the_solution(tensor):
    return tensor
