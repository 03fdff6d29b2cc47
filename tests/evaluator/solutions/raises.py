def helper(tensor):
    raise RuntimeError("kernel launch failed: too many resources requested")


def solution(tensor):
    return helper(tensor)
