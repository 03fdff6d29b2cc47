"""Deterministic all-reduce for tensor-parallel layers: every rank computes
out = ((p_0 + p_1) + p_2) + ... + p_{W-1} in fp32, the ranks' partials added in rank order, so
every rank gets the same bits, and the same bits as any other run at that world size.

On CUDA the partials go through PyTorch symmetric memory in one kernel launch per call
(`repro_all_reduce` in kernels.cu): each rank copies its partial into its symmetric buffer, flags
every rank, waits for every rank's flag, then reads all buffers in rank order and adds them. Two
data halves used in turn stand in for a second barrier, and the call counter lives on the device,
so the call can be captured in a CUDA graph. Calls on one process group and size must follow each
other on one stream, as collectives do. Elsewhere (gloo, CPU) the partials are all-gathered and
added in rank order with fp32 tensor adds. Both give the same bits: fp32 addition is IEEE on both,
and NaNs are canonical in both.
"""

from __future__ import annotations

import threading

import torch
import torch.distributed as dist

from tasks.reproducible.cpu_reference import canonicalize_nan

_lock = threading.Lock()
_buffers: dict[tuple[str, int, int], tuple[torch.Tensor, object, int]] = {}


def deterministic_all_reduce(
    partial: torch.Tensor, group: dist.ProcessGroup | None = None, method: str = "auto"
) -> torch.Tensor:
    """Sum of every rank's fp32 `partial` in rank order, returned as a new tensor on every rank.

    method: "symm" (symmetric memory, CUDA), "gather" (all_gather, any backend) or "auto"
    (symm for CUDA tensors, gather otherwise).
    """
    if partial.dtype != torch.float32:
        raise TypeError(f"partials must be float32, got {partial.dtype}")
    if method == "auto":
        method = "symm" if partial.is_cuda else "gather"
    if method == "symm":
        return _symm_all_reduce(partial.contiguous(), group)
    if method == "gather":
        return _gather_all_reduce(partial.contiguous(), group)
    raise ValueError(f"unknown method {method!r}")


def _gather_all_reduce(partial: torch.Tensor, group) -> torch.Tensor:
    world = dist.get_world_size(group)
    parts = [torch.empty_like(partial) for _ in range(world)]
    dist.all_gather(parts, partial, group=group)
    out = parts[0].clone()
    for p in parts[1:]:
        out.add_(p)
    return canonicalize_nan(out)


def _symm_buffer(numel: int, device: torch.device, group) -> tuple[object, int]:
    """(rendezvous handle, floats per data half) of this group's buffer for `numel` values on
    `device`, made on first use: two data halves then the kernel's flags, all zeroed before any
    rank may flag it."""
    import torch.distributed._symmetric_memory as symm_mem

    from tasks.reproducible import cuda_kernels

    group = group or dist.group.WORLD
    key = (group.group_name, device.index or 0, numel)
    with _lock:
        if key not in _buffers:
            enable = getattr(symm_mem, "enable_symm_mem_for_group", None)
            if enable is not None:
                enable(group.group_name)
            half = -(-numel // 4) * 4
            size = 2 * half + cuda_kernels.all_reduce_flag_floats(dist.get_world_size(group))
            buf = symm_mem.empty(size, dtype=torch.float32, device=device)
            handle = symm_mem.rendezvous(buf, group.group_name)
            buf.zero_()
            handle.barrier(channel=0)  # on the stream: no rank flags a buffer before it is zeroed
            _buffers[key] = (buf, handle, half)
        return _buffers[key][1:]


def _symm_all_reduce(partial: torch.Tensor, group) -> torch.Tensor:
    from tasks.reproducible import cuda_kernels

    out = torch.empty_like(partial)
    if partial.numel() == 0:
        return out
    with torch.cuda.device(partial.device):
        handle, half = _symm_buffer(partial.numel(), partial.device, group)
        cuda_kernels.all_reduce(partial.reshape(-1), handle.buffer_ptrs_dev, handle.world_size, handle.rank, half,
                                out.reshape(-1))  # fmt: skip
    return out
