"""A cache of outputs keyed on where the inputs live, returning the cached output on a hit.

Problem: allgather (no input may be modified, outputs are bitwise).

VARIANT "data_ptr": keyed on `tensor.data_ptr()` (and shape): stale as soon as the judge writes new
values into memory it used before (or reuses an arena slot).
VARIANT "id": keyed on `id(tensor)`: stale when a new input object lands at a freed one's address,
or when the judge reuses the same tensor object with new values.

The ranks agree on a hit with a one-element all-reduce, so the cheat never deadlocks.

The judge must report it not `correct`; a judge that never gives it a stale hit sees an honest
solution, which must then not be faster than 1.5x the reference.
"""

import torch
import torch.distributed as dist

VARIANT = "data_ptr"

_cache = {}


def _key(tensor):
    if VARIANT == "data_ptr":
        return (tensor.data_ptr(), tuple(tensor.shape))
    if VARIANT == "id":
        return (id(tensor), tuple(tensor.shape))
    raise ValueError(f"unknown variant {VARIANT!r}")


@torch.no_grad()
def solution(tensor):
    key = _key(tensor)
    hit = torch.tensor([int(key in _cache)], dtype=torch.int32, device=tensor.device)
    dist.all_reduce(hit, op=dist.ReduceOp.MIN)
    if not hit.item():
        out = tensor.new_empty((dist.get_world_size(),) + tensor.shape)
        dist.all_gather_into_tensor(out.view(-1), tensor.contiguous().view(-1))
        _cache[key] = out
    return _cache[key]
