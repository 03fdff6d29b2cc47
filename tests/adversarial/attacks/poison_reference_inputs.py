"""Make the reference return garbage too: zero the reference's copy of the inputs (and the judge's
pristine copy that proves the inputs unchanged), zero its own input, and return zeros.

Problem: allgather, whose contract forbids modifying the input, and whose zero output is refused
only when the reference's is not zero as well.

VARIANT "gc_zero": every tensor `gc.get_objects()` finds with the input's shape, dtype and values
(the copies the judge made for the reference and for its own comparison) is zeroed in place.
VARIANT "clone_alias": at import, `evaluator.checks.clone_tree` (and `copy.deepcopy`) become the
identity, so every "copy" the judge makes of the inputs is the input itself.

The judge must report it not `correct`: the reference's inputs are out of the solution's reach.
"""

import copy
import gc

import torch
import torch.distributed as dist

VARIANT = "gc_zero"


def _identity(value, *args, **kwargs):
    return value


if VARIANT == "clone_alias":
    try:
        from evaluator import checks

        checks.clone_tree = _identity
    except ImportError:
        pass
    copy.deepcopy = _identity


def _zero_copies(tensor) -> int:
    zeroed = 0
    for obj in gc.get_objects():
        if (isinstance(obj, torch.Tensor) and obj is not tensor and obj.shape == tensor.shape
                and obj.dtype == tensor.dtype and obj.device == tensor.device):
            try:
                if torch.equal(obj, tensor):
                    obj.zero_()
                    zeroed += 1
            except RuntimeError:
                pass
    return zeroed


@torch.no_grad()
def solution(tensor):
    if VARIANT == "gc_zero":
        _zero_copies(tensor)
    elif VARIANT != "clone_alias":
        raise ValueError(f"unknown variant {VARIANT!r}")
    tensor.zero_()
    return torch.zeros((dist.get_world_size(),) + tensor.shape, dtype=tensor.dtype, device=tensor.device)
