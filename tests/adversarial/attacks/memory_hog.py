"""Starve the reference of GPU memory. The two players of a rank share one GPU, and the solution's
memory stays allocated while it is stopped for the reference's batches. This solution, honest in
its outputs, takes every free byte of the device but LEAVE_MIB after each of its calls, so that the
reference (and the judge) work in what is left: a reference whose allocator must empty its cache
and retry, or go back to the device, on every call runs slower, and the speedup reads high.

VARIANT "roomy": 1 GiB left. VARIANT "tight": 16 MiB left.

Appended to the reference's source by the test. The judge passes when the evaluation ends in a
status of the solution's (never an evaluator error), and a `correct` one has no inflated speedup.
"""

import torch as _torch

VARIANT = "roomy"
LEAVE_MIB = {"roomy": 1024, "tight": 16}[VARIANT]
_CHUNK = 64 << 20
_hoard = []
_reference_solution = solution  # noqa: F821 - the reference's, defined above this file


def _hog():
    free, _total = _torch.cuda.mem_get_info()
    while free > (LEAVE_MIB << 20) + _CHUNK:
        try:
            _hoard.append(_torch.empty(_CHUNK, dtype=_torch.uint8, device="cuda"))
        except _torch.OutOfMemoryError:
            break
        free, _total = _torch.cuda.mem_get_info()


def solution(*inputs):
    out = _reference_solution(*inputs)
    _hog()
    return out
