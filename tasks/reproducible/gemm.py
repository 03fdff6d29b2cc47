"""`reproducible_matmul`: fp32 x @ w.T (+ b) in the order of config.py, on any device.

CPU tensors go through the exact emulation (cpu_reference.py). CUDA tensors go through the
kernel the configuration table names for the shape: the CUDA GEMVs for decode and small batches
(the persistent one for up to four rows of x), the CUDA SGEMM for prefill, Triton tiles where a
weight's layout suits neither. Every path computes the same bits; the table only decides speed.

Forward only: no gradient is defined. Where autograd would record the call (an input requires
grad and grad mode is on), the result carries a backward that raises, instead of one that would
silently give no gradient to x and the weight.
"""

from __future__ import annotations

import torch

from tasks.reproducible import cuda_kernels, triton_gemm
from tasks.reproducible.config import DECODE_TILE, PREFILL_TILE, LaunchConfig, launch_config
from tasks.reproducible.cpu_reference import reproducible_bmm_cpu, reproducible_matmul_cpu
from tasks.reproducible.cuda_kernels import WEIGHT_DTYPES

INPUT_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def effective_config(
    m: int, weight: torch.Tensor, config: LaunchConfig | None = None, x_dtype: torch.dtype = torch.float32
) -> LaunchConfig:
    """The launch reproducible_matmul makes for M rows of x of `x_dtype` on this CUDA weight:
    `config` or the table's, unless its kernel cannot take the problem (x too large for the
    persistent GEMV's shared memory, a weight layout the CUDA kernels cannot stream, a GPU older
    than the kernel)."""
    n, k = weight.shape
    cfg = config or launch_config(m, n, k)
    if cfg.kernel == "gemv_persistent" and not cuda_kernels.gemv_persistent_fits(m, n, k, x_dtype=x_dtype):
        cfg = LaunchConfig("gemv")
    if cfg.kernel in ("gemv", "gemv_persistent") and not _gemv_ok(weight, m):
        cfg = DECODE_TILE
    if cfg.kernel == "sgemm" and (k % 8 or not cuda_kernels.gemv_supports(weight)):
        cfg = PREFILL_TILE
    if cfg.kernel != "tile" and not cuda_kernels.kernels_run_on(weight.device.index):
        cfg = DECODE_TILE if m <= 64 else PREFILL_TILE
    return cfg


class _ForwardOnly(torch.autograd.Function):
    """Records a reproducible product in the autograd graph with a backward that says why there
    is none."""

    @staticmethod
    def forward(ctx, fn, *inputs):
        return fn(*inputs)

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError(
            "the reproducible matmul is forward-only (its fixed-order kernels define no gradient): run it under "
            "torch.no_grad() or torch.inference_mode(), or train with nn.Linear"
        )


def _records_grad(*tensors: torch.Tensor | None) -> bool:
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


def reproducible_matmul(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    *,
    config: LaunchConfig | None = None,
    static_weight: bool = False,
) -> torch.Tensor:
    """fp32 [..., N] for x [..., K] (fp32/bf16/fp16) and weight [N, K] (bf16/fp16).

    `config` overrides the table's launch (tests use it to show the launch does not matter).
    `static_weight`: the caller vouches that the weight is not written by the GPU work queued just
    before this call (frozen inference weights), so a decode GEMV may start reading it before that
    work ends (sm_90 and newer; the same bits either way).
    """
    if _records_grad(x, weight, bias):
        return _ForwardOnly.apply(
            lambda *a: reproducible_matmul(*a, config=config, static_weight=static_weight), x, weight, bias
        )
    if weight.dim() != 2:
        raise ValueError(f"weight must be 2-D [N, K], got shape {tuple(weight.shape)}")
    if weight.dtype not in WEIGHT_DTYPES:
        raise TypeError(
            f"weight must be bfloat16 or float16 (loaded as 16-bit, upcast in registers), got {weight.dtype}"
        )
    if x.dtype not in INPUT_DTYPES:
        raise TypeError(f"x must be float32, bfloat16 or float16, got {x.dtype}")
    n, k = weight.shape
    if x.shape[-1] != k:
        raise ValueError(f"x has {x.shape[-1]} features, weight expects {k}")
    if bias is not None and bias.shape != (n,):
        raise ValueError(f"bias must have shape ({n},), got {tuple(bias.shape)}")
    device = x.device
    if device != weight.device or (bias is not None and bias.device != device):
        raise ValueError("x, weight and bias must be on one device")
    lead = x.shape[:-1]
    if device.type not in ("cpu", "cuda"):
        raise ValueError(f"unsupported device {device}")
    if device.type == "cpu" or k == 0:  # K = 0: +0.0 (+ bias), a few CPU adds give every device's bits
        return reproducible_matmul_cpu(x, weight, bias).to(device)
    x2 = x.reshape(-1, k)
    m = x2.shape[0]
    if m == 0:
        return torch.empty(*lead, n, dtype=torch.float32, device=device)
    if device.index != torch.cuda.current_device():
        with torch.cuda.device(device):
            return reproducible_matmul(x, weight, bias, config=config, static_weight=static_weight)
    cfg = effective_config(m, weight, config, x2.dtype)
    if cfg.kernel == "gemv_persistent":
        out = cuda_kernels.gemv_persistent(x2, weight, bias, static_weight=static_weight)
    elif cfg.kernel == "gemv":
        out = cuda_kernels.gemv(x2, weight, bias)
    elif cfg.kernel == "sgemm":
        out = cuda_kernels.sgemm(x2, weight, bias, split=cfg.split_parallel)
    else:
        out, _ = triton_gemm.tile_matmul(x2, weight, bias, cfg)
    return out if x.dim() == 2 else out.reshape(*lead, n)


def reproducible_bmm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """fp32 [B, M, N]: for each b, reproducible_matmul(x[b], weight[b]). One emulation for the
    whole batch on the CPU; one kernel launch per entry on the GPU (same bits either way)."""
    if _records_grad(x, weight):
        return _ForwardOnly.apply(reproducible_bmm, x, weight)
    if x.dim() != 3 or weight.dim() != 3 or x.shape[0] != weight.shape[0]:
        raise ValueError(f"need x [B, M, K] and weight [B, N, K], got {tuple(x.shape)} and {tuple(weight.shape)}")
    if weight.dtype not in WEIGHT_DTYPES:
        raise TypeError(f"weight must be bfloat16 or float16, got {weight.dtype}")
    if x.device.type == "cpu" or x.shape[2] == 0:  # K = 0 as in reproducible_matmul
        return reproducible_bmm_cpu(x, weight).to(x.device)
    with torch.cuda.device(x.device):
        if x.shape[1] <= 16 and cuda_kernels.gemv_supports(weight) and cuda_kernels.kernels_run_on(x.device.index):
            return cuda_kernels.gemv_batched(x, weight)
        return torch.stack([reproducible_matmul(x[b], weight[b]) for b in range(x.shape[0])])


def _gemv_ok(weight: torch.Tensor, m: int) -> bool:
    return m <= 64 and cuda_kernels.gemv_supports(weight)
