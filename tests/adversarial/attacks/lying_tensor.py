"""Outputs that are computed only when someone looks at them: the call returns an unwritten tensor
at once (so timed calls look free) and the all-gather runs the first time the output is touched
from outside this file.

Problem: allgather (bitwise, no input modified).

VARIANT "subclass": a `torch.Tensor` subclass whose `__torch_function__` computes on first use.
VARIANT "lazy_mode": a plain `torch.Tensor`, and a `TorchFunctionMode` entered globally at import
that computes any pending output the first time a torch function receives it.

Both ranks touch their outputs in the same order (the checks), so the late collectives match.

The judge must report it not `correct`, or, if the work happens inside its timing, a speedup
within 1.5x of the reference's.
"""

import sys
import weakref

import torch
import torch.distributed as dist
from torch.overrides import TorchFunctionMode

VARIANT = "subclass"

_pending = {}  # id(output) -> (weak reference to the output, the input's copy)


def _compute_into(out, inp):
    with torch._C.DisableTorchFunction():
        dist.all_gather_into_tensor(out.view(-1), inp.contiguous().view(-1))


def _from_here() -> bool:
    frame = sys._getframe(2)
    for _ in range(4):
        if frame is None:
            return False
        if frame.f_globals is globals():
            return True
        frame = frame.f_back
    return False


def _materialize(values) -> None:
    for value in values:
        if isinstance(value, (list, tuple)):
            _materialize(value)
            continue
        if not isinstance(value, torch.Tensor):
            continue
        entry = _pending.get(id(value))
        if entry is not None and entry[0]() is value:
            del _pending[id(value)]
            _compute_into(value, entry[1])


class _Lazy(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if not _from_here():
            _materialize(list(args) + list(kwargs.values()))
        return super().__torch_function__(func, types, args, kwargs)


class _LazyMode(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if _pending and not _from_here():
            _materialize(list(args) + list(kwargs.values()))
        return func(*args, **kwargs)


if VARIANT == "lazy_mode":
    _LazyMode().__enter__()
elif VARIANT != "subclass":
    raise ValueError(f"unknown variant {VARIANT!r}")


def solution(tensor):
    with torch._C.DisableTorchFunction():
        out = torch.empty((dist.get_world_size(),) + tuple(tensor.shape), dtype=tensor.dtype, device=tensor.device)
        inp = tensor.clone()
        if VARIANT == "subclass":
            out = out.as_subclass(_Lazy)
    _pending[id(out)] = (weakref.ref(out), inp)
    return out
