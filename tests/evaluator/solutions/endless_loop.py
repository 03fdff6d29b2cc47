def solution(tensor):
    while True:
        pass
