import pytest

from submissions.validation import InvalidCode, validate_code


@pytest.mark.parametrize(
    "code",
    [
        "def solution(x):\n    return x\n",
        "async def solution(x):\n    return x\n",
        "import torch\nsolution = torch.add\n",
        "solution: object = print\n",
        "helper, solution = 1, lambda x: x\n",
        "# ünïcödé comment\ndef solution(x):\n    return x\n".encode(),
    ],
)
def test_accepts_a_top_level_solution(code):
    assert "solution" in validate_code(code)


@pytest.mark.parametrize(
    ("code", "message"),
    [
        (b"\xff\xfe def solution(): pass", "not UTF-8"),
        (b"def solution():\n    return 1\n\x00\x01", "binary"),
        ("def solution(:\n", "syntax error on line 1"),
        ("def helper():\n    def solution():\n        pass\n", "does not define a top-level `solution`"),
        ("class Solution:\n    pass\n", "does not define a top-level `solution`"),
        ("solution.attr = 1\n", "does not define a top-level `solution`"),
        ("solution: int\n", "does not define a top-level `solution`"),
        ("   \n", "empty"),
    ],
)
def test_rejects_with_a_clear_reason(code, message):
    with pytest.raises(InvalidCode, match=message):
        validate_code(code)


def test_size_cap_counts_utf8_bytes(settings):
    settings.PKB_MAX_CODE_BYTES = 100
    body = "def solution():\n    return 1\n"
    validate_code(body + "#" * (100 - len(body)))
    with pytest.raises(InvalidCode, match="101 bytes; the limit is 100 bytes"):
        validate_code(body + "é" + "#" * (99 - len(body)))
