"""The one validator for submitted code, shared by the form and the API. Nothing is stored or
queued unless it passes."""

from __future__ import annotations

import ast

from django.conf import settings


class InvalidCode(ValueError):
    """A reason a person can read, shown as is."""


def validate_code(raw: bytes | str) -> str:
    """Return the code as text if it is a UTF-8 Python file of at most PKB_MAX_CODE_BYTES that defines
    a top-level `solution`; raise InvalidCode otherwise."""
    limit = settings.PKB_MAX_CODE_BYTES
    data = raw.encode("utf-8", errors="surrogatepass") if isinstance(raw, str) else bytes(raw)
    if len(data) > limit:
        raise InvalidCode(f"the file is {len(data):,} bytes; the limit is {limit:,} bytes")
    if b"\x00" in data:
        raise InvalidCode("the file is binary (it contains NUL bytes); upload Python source text")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InvalidCode(f"the file is not UTF-8 text (invalid byte at offset {e.start})") from None
    if not text.strip():
        raise InvalidCode("the file is empty")
    try:
        tree = ast.parse(text, filename="solution.py")
    except SyntaxError as e:
        raise InvalidCode(f"syntax error on line {e.lineno}: {e.msg}") from None
    except ValueError as e:  # e.g. source the parser refuses outright
        raise InvalidCode(f"the file cannot be parsed: {e}") from None
    except (MemoryError, RecursionError):  # pathological nesting: "((((...", "-" * 100_000 + "1"
        raise InvalidCode(
            "the file is nested too deeply for Python's parser (brackets or operators thousands of levels deep)"
        ) from None
    if not defines_solution(tree):
        raise InvalidCode("the file does not define a top-level `solution` (a function or an assignment)")
    return text


def defines_solution(tree: ast.Module) -> bool:
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "solution":
            return True
        if isinstance(node, ast.Assign) and any(_binds_solution(t) for t in node.targets):
            return True
        if isinstance(node, ast.AnnAssign) and node.value is not None and _binds_solution(node.target):
            return True
    return False


def _binds_solution(target: ast.expr) -> bool:
    if isinstance(target, ast.Name):
        return target.id == "solution"
    if isinstance(target, (ast.Tuple, ast.List)):
        return any(_binds_solution(t) for t in target.elts)
    return False
