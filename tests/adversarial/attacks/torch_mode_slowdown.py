"""Slow the reference down through a torch mode installed globally when this file is imported: every
torch call (or aten op) whose Python caller is a module named `tasks.*` sleeps SLEEP_S first.

Problem: gemv_decode (a handful of torch calls per reference call); the solution itself is honest
and its own calls are never slowed.

VARIANT "function_mode": a `torch.overrides.TorchFunctionMode`, entered and never left.
VARIANT "dispatch_mode": a `torch.utils._python_dispatch.TorchDispatchMode`, entered and never left.

The judge must report a speedup within 1.5x of the honest one (the reference against itself).
"""

import sys
import time

import torch
import torch.distributed as dist
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

VARIANT = "function_mode"
SLEEP_S = 0.002
DEPTH = 12  # caller frames inspected


def _from_tasks() -> bool:
    frame = sys._getframe(2)
    for _ in range(DEPTH):
        if frame is None:
            return False
        if frame.f_globals.get("__name__", "").startswith("tasks."):
            return True
        frame = frame.f_back
    return False


class _SlowFunctions(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        if _from_tasks():
            time.sleep(SLEEP_S)
        return func(*args, **(kwargs or {}))


class _SlowOps(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if _from_tasks():
            time.sleep(SLEEP_S)
        return func(*args, **(kwargs or {}))


if VARIANT == "function_mode":
    _mode = _SlowFunctions()
elif VARIANT == "dispatch_mode":
    _mode = _SlowOps()
else:
    raise ValueError(f"unknown variant {VARIANT!r}")
_mode.__enter__()


@torch.no_grad()
def solution(hidden_states, weight_shard, bias_shard):
    local_logits = torch.matmul(hidden_states, weight_shard.t()) + bias_shard
    parts = [torch.empty_like(local_logits) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, local_logits.contiguous())
    return torch.cat(parts, dim=1)


