"""All-gather through PyTorch symmetric memory: each rank copies its shard into a symmetric buffer,
and one CUDA kernel pulls every peer's shard over NVLink (UVA pointers) with 16-byte loads.

A submission for the `allgather` problem. Runs in `gpu` mode (one rank per GPU) and in
`shared-gpu` mode (several ranks on one GPU, for correctness only).
"""

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from torch.utils.cpp_extension import load_inline

CUDA_SOURCE = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>

// out holds world * n16 16-byte words; shard r comes from peer r's symmetric buffer.
__global__ void pull_shards(const int64_t* __restrict__ peers, int world, long long n16, uint4* __restrict__ out) {
  const long long total = world * n16;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
       i += (long long)gridDim.x * blockDim.x) {
    const long long src_rank = i / n16;
    const long long offset = i % n16;
    const uint4* src = reinterpret_cast<const uint4*>(peers[src_rank]);
    out[i] = src[offset];
  }
}

void gather(torch::Tensor peers, int64_t world, int64_t n16, torch::Tensor out) {
  const int threads = 512;
  const long long total = world * n16;
  const int blocks = (int)std::min<long long>((total + threads - 1) / threads, 132LL * 8);
  auto stream = c10::cuda::getCurrentCUDAStream();
  pull_shards<<<blocks, threads, 0, stream>>>(
      peers.data_ptr<int64_t>(), (int)world, (long long)n16, reinterpret_cast<uint4*>(out.data_ptr()));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}
"""

CPP_SOURCE = "void gather(torch::Tensor peers, int64_t world, int64_t n16, torch::Tensor out);"

_major, _minor = torch.cuda.get_device_capability()
# Built when the module is imported, so the evaluator builds it once before the timed work.
_extension = load_inline(
    name="pkb_example_allgather_pull",
    cpp_sources=CPP_SOURCE,
    cuda_sources=CUDA_SOURCE,
    functions=["gather"],
    extra_cuda_cflags=["-O3", f"-gencode=arch=compute_{_major}{_minor},code=sm_{_major}{_minor}"],
)
_buffers: dict = {}


def _symmetric_buffer(nbytes: int, device: torch.device):
    """One symmetric buffer per size, allocated and rendezvoused once (a collective) and reused."""
    if nbytes not in _buffers:
        buf = symm_mem.empty(nbytes, dtype=torch.uint8, device=device)
        handle = symm_mem.rendezvous(buf, dist.group.WORLD.group_name)
        peers = torch.tensor(handle.buffer_ptrs, dtype=torch.int64, device=device)
        _buffers[nbytes] = (buf, handle, peers)
    return _buffers[nbytes]


@torch.no_grad()
def solution(tensor: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    shard = tensor.contiguous().view(-1).view(torch.uint8)
    nbytes = shard.numel()
    if nbytes % 16:
        raise ValueError("this kernel moves 16-byte words; shard size must be a multiple of 16 bytes")
    buf, handle, peers = _symmetric_buffer(nbytes, tensor.device)
    buf.copy_(shard)
    handle.barrier(channel=0)  # every shard is in place before anyone reads
    out = torch.empty((world,) + tuple(tensor.shape), dtype=tensor.dtype, device=tensor.device)
    _extension.gather(peers, world, nbytes // 16, out)
    handle.barrier(channel=0)  # nobody overwrites its buffer while a peer may still read it
    return out
