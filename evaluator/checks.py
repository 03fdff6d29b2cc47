"""Output checks inside a rank: exact types, shapes, dtypes, tolerances or bitwise equality,
non-finite values, all-zero outputs, untouched inputs; clones and digests of nested inputs."""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Callable
from typing import Any

import torch

from tasks.spec import Tolerance


def clone_tree(value: Any) -> Any:
    """Deep copy of tensors and modules inside tuples/lists/dicts; other objects (scalars,
    process groups) shared."""
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, torch.nn.Module):
        return copy.deepcopy(value)
    if isinstance(value, tuple):
        return tuple(clone_tree(v) for v in value)
    if isinstance(value, list):
        return [clone_tree(v) for v in value]
    if isinstance(value, dict):
        return {k: clone_tree(v) for k, v in value.items()}
    return value


def to_device(value: Any, device: torch.device) -> Any:
    if isinstance(value, (torch.Tensor, torch.nn.Module)):
        return value.to(device)
    if isinstance(value, (tuple, list)):
        return type(value)(to_device(v, device) for v in value)
    if isinstance(value, dict):
        return {k: to_device(v, device) for k, v in value.items()}
    return value


def reuse_storage(old: Any, fresh: Any) -> Any:
    """`fresh`, with each tensor that matches one of `old` in shape and dtype written into that
    old tensor (same address) instead. Non-tensor leaves come from `fresh`."""
    if isinstance(fresh, torch.Tensor):
        if isinstance(old, torch.Tensor) and old.shape == fresh.shape and old.dtype == fresh.dtype:
            return old.copy_(fresh)
        return fresh
    if isinstance(fresh, (tuple, list)) and isinstance(old, (tuple, list)) and len(old) == len(fresh):
        return type(fresh)(reuse_storage(o, f) for o, f in zip(old, fresh))
    if isinstance(fresh, dict) and isinstance(old, dict) and old.keys() == fresh.keys():
        return {k: reuse_storage(old[k], fresh[k]) for k in fresh}
    return fresh


def tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor) and value.layout == torch.sparse_coo:
        return [value._indices(), value._values()]  # compared part by part, as stored
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, torch.nn.Module):
        return [*value.parameters(), *value.buffers()]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in tensors(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in tensors(v)]
    return []


def nbytes(value: Any) -> int:
    return sum(t.numel() * t.element_size() for t in tensors(value))


def raw_bytes(t: torch.Tensor) -> torch.Tensor:
    return t.detach().contiguous().reshape(-1).view(torch.uint8)


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(raw_bytes(a), raw_bytes(b))


def digest(value: Any) -> str:
    """SHA-256 over every output tensor's dtype, shape and raw bytes, in output order."""
    h = hashlib.sha256()
    for t in tensors(value):
        h.update(f"{t.dtype}:{tuple(t.shape)};".encode())
        h.update(raw_bytes(t).cpu().numpy().tobytes())
    return h.hexdigest()


def allowed_error(expected: torch.Tensor, tol: Tolerance, rms: float | None = None) -> torch.Tensor:
    """Per element, the largest |got - expected| that `tol` admits (float64; 0 where `expected` is
    not finite, which must then be matched exactly). `tol` must be resolved for a world size.
    `rms`: the whole output's root mean square, where `expected` is one chunk of it (atol in rms)."""
    if tol.atol_by_world_size:
        raise ValueError("tolerance not resolved for a world size: use Tolerance.at(world_size)")
    e = expected.detach().double()
    finite = torch.isfinite(e)
    atol = tol.atol
    if tol.atol_unit == "rms":
        if rms is None:
            values = e[finite]
            rms = float(values.square().mean().sqrt()) if values.numel() else 0.0
        atol *= rms
    return (atol + tol.rtol * e.abs()).where(finite, torch.zeros_like(e))


# Elements compared at once in float64: a whole large output at once (and the error, excess and
# allowance beside it) took the judge out of GPU memory on a 1.6-billion-element output.
COMPARE_CHUNK = 1 << 24


def _float64_chunks(got: torch.Tensor, exp: torch.Tensor):
    """(flat offset, got, expected) chunk by chunk, as flat float64 values to compare; a complex
    tensor as interleaved real and imaginary parts (a cast to float64 would keep the real parts)."""
    flat = []
    for t in (got, exp):
        t = t.detach()
        flat.append((torch.view_as_real(t.resolve_conj()) if t.is_complex() else t).reshape(-1))
    for start in range(0, flat[1].numel(), COMPARE_CHUNK):
        yield start, flat[0][start : start + COMPARE_CHUNK].double(), flat[1][start : start + COMPARE_CHUNK].double()


class Finding(str):
    """A mismatch as one line of text (what the checks return) that also carries the element it
    singled out, as the fields of results.Mismatch, for the result document."""

    mismatch: dict[str, Any] | None = None

    @classmethod
    def of(cls, text: str, mismatch: dict[str, Any] | None) -> Finding:
        finding = cls(text)
        finding.mismatch = mismatch
        return finding

    def prefixed(self, prefix: str) -> Finding:
        """The same finding, inside the output named `prefix`."""
        mismatch = self.mismatch and {**self.mismatch, "output": f"{prefix}: {self.mismatch['output']}"}
        return Finding.of(f"{prefix}: {self}", mismatch)


def _position(flat: int, shape: torch.Size) -> list[int]:
    index = []
    for size in reversed(shape):
        flat, i = divmod(flat, size)
        index.append(i)
    return index[::-1]


def _mismatch(where: str, exp: torch.Tensor, flat: int, got: Any, expected: Any, max_err: float | None,
              allowed: str | None, wrong: int | None) -> dict[str, Any]:
    def text(v: Any) -> str:
        return f"{v:.6g}" if isinstance(v, float) else repr(v)

    finite = max_err is not None and max_err == max_err and abs(max_err) != float("inf")
    return {"output": where, "index": _position(flat, exp.shape), "flat_index": flat, "got": text(got),
            "expected": text(expected), "max_abs_error": max_err if finite else None, "allowed": allowed,
            "wrong": wrong, "elements": exp.numel()}


def _differing(got: torch.Tensor, exp: torch.Tensor) -> int:
    """How many elements differ in at least one bit."""
    size = exp.element_size()
    return int((raw_bytes(got).reshape(-1, size) != raw_bytes(exp).reshape(-1, size)).any(dim=1).sum())


def _compare_tensor(got: Any, exp: torch.Tensor, tol: Tolerance, where: str) -> tuple[str | None, float]:
    if type(got) is not torch.Tensor:  # noqa: E721 - subclasses (lazy or lying tensors) are refused
        what = getattr(got, "what", None) or f"{type(got).__module__}.{type(got).__qualname__}"
        return f"{where}: expected a torch.Tensor, got {what}", float("nan")
    if got.shape != exp.shape:
        return f"{where}: shape {tuple(got.shape)} != expected {tuple(exp.shape)}", float("nan")
    if got.dtype != exp.dtype:
        return f"{where}: dtype {got.dtype} != expected {exp.dtype}", float("nan")
    if got.device.type != exp.device.type:
        return f"{where}: on {got.device.type}, expected {exp.device.type}", float("nan")
    if got.numel() == 0:
        return None, 0.0
    is_float = exp.is_floating_point() or exp.is_complex()
    if is_float:
        scan = _scan_floats(got, exp)
        if scan["bad"]:
            idx, gv, ev = scan["first_bad"]
            return Finding.of(
                f"{where}: non-finite value {gv} at flat index {idx} where the reference is finite",
                _mismatch(where, exp, idx // 2 if exp.is_complex() else idx, gv, ev, None, tol.describe(), scan["bad"]),
            ), float("inf")
        if scan["got_all_zero"] and not scan["exp_all_zero"]:
            return f"{where}: output is all zeros, the reference is not", scan["exp_abs_max"]
    if tol.bitwise or not is_float:
        if same_bits(got, exp):
            return None, 0.0
        diff = (raw_bytes(got) != raw_bytes(exp)).nonzero()
        first = int(diff[0]) // exp.element_size()
        gv, ev = got.reshape(-1)[first].item(), exp.reshape(-1)[first].item()
        return Finding.of(
            f"{where}: not bitwise equal; {diff.numel()} bytes differ, first at flat index {first}: got {gv!r}, expected {ev!r}",
            _mismatch(where, exp, first, gv, ev, None, None if tol.bitwise else tol.describe(), _differing(got, exp)),
        ), float("nan")
    if scan["nonfinite_differs"]:
        # The reference itself is non-finite somewhere: the solution must match it there exactly.
        return f"{where}: differs from the reference at its non-finite positions", float("inf")
    max_err, wrong, worst = 0.0, 0, None  # worst: (excess, flat index, got, expected)
    for start, g, e in _float64_chunks(got, exp):
        err = (g - e).abs().where(torch.isfinite(e), torch.zeros_like(g))
        excess = err - allowed_error(e, tol, rms=scan["rms"])
        max_err = max(max_err, float(err.max()))
        over = int((excess > 0).sum())
        if over:
            wrong += over
            i = int(excess.argmax())
            if worst is None or float(excess[i]) > worst[0]:
                worst = (float(excess[i]), start + i, g[i].item(), e[i].item())
    if worst is not None:
        _, idx, gv, ev = worst
        # A complex output is compared as (..., 2) real and imaginary parts: its element is idx // 2.
        element = idx // 2 if exp.is_complex() else idx
        return Finding.of(
            f"{where}: mismatch at flat index {idx}: got {gv:.6g}, expected {ev:.6g} (max abs error {max_err:.3g}; "
            f"allowed {tol.describe()}; {wrong} of {scan['values']} elements out of tolerance)",
            _mismatch(where, exp, element, gv, ev, max_err, tol.describe(), wrong),
        ), max_err
    return None, max_err


def _scan_floats(got: torch.Tensor, exp: torch.Tensor) -> dict[str, Any]:
    """One pass over a float output, chunk by chunk: non-finite values where the reference is
    finite (how many, and the first), whether either side is all zeros, whether the solution
    matches the reference's own non-finite values exactly, and the root mean square of the
    reference's finite values (for tolerances in rms)."""
    scan = {"bad": 0, "first_bad": None, "got_all_zero": True, "exp_all_zero": True, "exp_abs_max": 0.0,
            "nonfinite_differs": False, "values": 0}
    squares, finite_count = 0.0, 0
    for start, g, e in _float64_chunks(got, exp):
        scan["values"] += e.numel()
        g_bad, e_bad = ~torch.isfinite(g), ~torch.isfinite(e)
        bad = g_bad & ~e_bad
        count = int(bad.sum())
        if count and scan["first_bad"] is None:
            i = int(bad.nonzero()[0])
            scan["first_bad"] = (start + i, g[i].item(), e[i].item())
        scan["bad"] += count
        scan["got_all_zero"] = scan["got_all_zero"] and bool((g == 0).all())
        scan["exp_all_zero"] = scan["exp_all_zero"] and bool((e == 0).all())
        scan["exp_abs_max"] = max(scan["exp_abs_max"], float(e.abs().max()))
        if bool(e_bad.any()):
            same = (g[e_bad] == e[e_bad]) | (torch.isnan(g[e_bad]) & torch.isnan(e[e_bad]))
            scan["nonfinite_differs"] = scan["nonfinite_differs"] or not bool(same.all())
        finite = e[~e_bad]
        squares += float(finite.square().sum())
        finite_count += finite.numel()
    scan["rms"] = (squares / finite_count) ** 0.5 if finite_count else 0.0
    return scan


def _kind(value: Any) -> str:
    return "an Opaque" if type(value).__name__ == "Opaque" else f"a {type(value).__name__}"


def compare_outputs(got: Any, expected: Any, tolerance_for: Callable[[int], Tolerance]) -> tuple[str | None, float]:
    """Returns (first mismatch described, or None; max abs error over float outputs). Containers
    must match exactly: a list is not a tuple, and a sequence of another length is wrong (never
    compared in part). Output i of a top-level sequence gets tolerance_for(i)."""
    if isinstance(expected, (tuple, list)):
        if type(got) is not type(expected) or len(got) != len(expected):
            count = f"{len(got)}" if isinstance(got, (tuple, list)) else "not a sequence"
            return (f"expected a {type(expected).__name__} of {len(expected)} outputs, got {_kind(got)} ({count})",
                    float("nan"))
        pairs = [(f"output {i}" if len(expected) > 1 else "output", i, g, e) for i, (g, e) in enumerate(zip(got, expected))]
    else:
        pairs = [("output", 0, got, expected)]
    worst = 0.0
    for where, i, g, e in pairs:
        message, err = _compare_leaf(g, e, tolerance_for(i), where)
        if message:
            return message, err
        worst = max(worst, err)
    return None, worst


def _prefixed(message: str, where: str) -> str:
    return message.prefixed(where) if isinstance(message, Finding) else f"{where}: {message}"


def _compare_leaf(got: Any, exp: Any, tol: Tolerance, where: str) -> tuple[str | None, float]:
    if isinstance(exp, torch.Tensor):
        return _compare_tensor(got, exp, tol, where)
    if isinstance(exp, (tuple, list)):
        message, err = compare_outputs(got, exp, lambda _j: tol)
        return (_prefixed(message, where) if message else None), err
    if isinstance(exp, dict):
        if type(got) is not dict or list(got) != list(exp):
            keys = list(got) if isinstance(got, dict) else _kind(got)
            return f"{where}: expected a dict with keys {list(exp)}, got {keys}", float("nan")
        worst = 0.0
        for key in exp:
            message, err = _compare_leaf(got[key], exp[key], tol, f"{where}[{key!r}]")
            if message:
                return message, err
            worst = max(worst, err)
        return None, worst
    if isinstance(exp, float) and not isinstance(exp, bool):
        allowed = float(allowed_error(torch.tensor(exp, dtype=torch.float64), tol))
        if type(got) not in (int, float) or not abs(got - exp) <= allowed:
            return f"{where}: got {got!r}, expected {exp!r}", float("nan")
        return None, abs(got - exp)
    if type(got) is not type(exp) or got != exp:
        return f"{where}: got {got!r}, expected {exp!r}", float("nan")
    return None, 0.0


def compare_inplace(solution_inputs: Any, reference_inputs: Any, mutated: tuple[int, ...], n_outputs: int,
                    tolerance_for: Callable[[int], Tolerance]) -> tuple[str | None, float]:
    """The inputs a problem modifies in place are results too: compare the solution's with the
    reference's. Their tolerances follow the outputs' (index n_outputs + j for the j-th)."""
    worst = 0.0
    for j, i in enumerate(mutated):
        got = [t for t in tensors(solution_inputs[i])]
        exp = [t for t in tensors(reference_inputs[i])]
        for k, (g, e) in enumerate(zip(got, exp)):
            message, err = _compare_tensor(g, e, tolerance_for(n_outputs + j), f"in-place input {i}" + (f"[{k}]" if len(exp) > 1 else ""))
            if message:
                return message, err
            worst = max(worst, err)
    return None, worst


def changed_inputs(before: Any, after: Any, allowed: tuple[int, ...]) -> str | None:
    """Name the first input the solution modified outside its in-place contract."""
    for i, (b, a) in enumerate(zip(before, after)):
        if i in allowed:
            continue
        for tb, ta in zip(tensors(b), tensors(a)):
            if not same_bits(tb, ta):
                return f"the solution modified input {i}, which the problem does not allow"
    return None


def element_count(value: Any) -> int:
    return sum(t.numel() for t in tensors(value))


def perturb_(value: Any) -> Any:
    """Change the first element of the first non-empty tensor output (used to prove the checks can fail)."""
    t = next((t for t in tensors(value) if t.numel()), None)
    if t is None:
        raise ValueError("the output has no tensor element to perturb")
    at = (0,) * t.dim()  # index in place, also for non-contiguous tensors
    if t.dtype == torch.bool:
        t[at] = ~t[at]
    elif t.is_floating_point():
        t[at] = t[at].float() + 1.0 + 2 * t.float().abs().max()
    else:
        t[at] += 1
    return value
