"""A cache of outputs keyed on a cheap hash of the inputs' content: their shape and first few
elements. Stale whenever two inputs agree there and differ elsewhere.

Problem: allgather (no input may be modified, outputs are bitwise). The ranks agree on a hit with a
one-element all-reduce, so the cheat never deadlocks.

The judge must report it not `correct` when it ever presents such inputs; a judge that never does
sees an honest solution (every hit is then right), which must not be faster than 1.5x the reference.
"""

import torch
import torch.distributed as dist

PREFIX = 8  # elements hashed

_cache = {}


@torch.no_grad()
def solution(tensor):
    head = tensor.reshape(-1)[:PREFIX].float().tolist()
    key = (tuple(tensor.shape), tensor.dtype, tuple(head))
    hit = torch.tensor([int(key in _cache)], dtype=torch.int32, device=tensor.device)
    dist.all_reduce(hit, op=dist.ReduceOp.MIN)
    if not hit.item():
        out = tensor.new_empty((dist.get_world_size(),) + tensor.shape)
        dist.all_gather_into_tensor(out.view(-1), tensor.contiguous().view(-1))
        _cache[key] = out
    return _cache[key]
