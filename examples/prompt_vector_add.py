"""Worked example shown in every task prompt: a peer GPU's vector added through symmetric memory
(two ranks). The platform reads this file as text; it is never imported by the web process."""

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch.utils.cpp_extension import load_inline

CUDA_SOURCE = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void add_peer_kernel(const float* mine, const float* peer, float* out, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) out[i] = mine[i] + peer[i];  // peer[] lives in the other GPU's memory (UVA over NVLink)
}

void add_peer(torch::Tensor mine, int64_t peer_address, torch::Tensor out) {
    int64_t n = mine.numel();
    auto stream = at::cuda::getCurrentCUDAStream();
    add_peer_kernel<<<(n + 255) / 256, 256, 0, stream>>>(
        mine.data_ptr<float>(), reinterpret_cast<const float*>(peer_address), out.data_ptr<float>(), n);
}
"""

_extension = None  # compiled code may be kept across calls; results and inputs may not


def solution(x: torch.Tensor) -> torch.Tensor:
    global _extension
    if _extension is None:
        _extension = load_inline("add_peer", cpp_sources="void add_peer(torch::Tensor, int64_t, torch::Tensor);",
                                 cuda_sources=CUDA_SOURCE, functions=["add_peer"])
    buffer = symm_mem.empty(x.numel(), dtype=torch.float32, device=x.device)
    handle = symm_mem.rendezvous(buffer, dist.group.WORLD.group_name)
    buffer.copy_(x.reshape(-1))
    handle.barrier(channel=0)  # every rank's buffer is filled before anyone reads a peer's
    out = torch.empty_like(buffer)
    _extension.add_peer(buffer, handle.buffer_ptrs[1 - handle.rank], out)
    handle.barrier(channel=0)  # nobody frees or overwrites a buffer a peer may still read
    return out.view_as(x)
