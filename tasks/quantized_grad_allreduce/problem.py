"""Gradient all-reduce through blockwise int8 quantization.

Rank r holds a flat gradient (M*N,) in bf16 and a block size. It quantizes its gradient in blocks
of block_size elements (the tail block zero-padded): scale = max(|x|)/127 per block in fp32
(at least 1e-8/127), q = round_half_even(x / scale) clamped to [-127, 127], and dequantizes to
q*scale in fp32. It returns the mean over ranks of the dequantized gradients, in bf16, shape
(M*N,). The int8 codes must match the reference's (divide by the fp32 scale, round half to even):
other roundings differ by a full quantization step.

Roofline per GPU, n = M*N elements, e bytes per element, b = block size, one phase:
- HBM: read the gradient once, write the result once: 2n*e.
- NVLink: each rank's contribution is exactly its int8 codes plus one fp32 scale per block,
  P = n + 4*ceil(n/b) bytes. Two algorithms: all-gather the codes, (W-1)*P bytes; or
  reduce-scatter the codes ((W-1)/W * P) and all-gather the reduced bf16 result ((W-1)/W * n*e).
  The roofline takes the smaller.
- FLOPs: about 5 per element to quantize (abs-max, divide, round, multiply back) plus W-1 adds
  and a divide to average: (5 + W) * n on CUDA cores.
"""

from tasks.spec import Phase, Problem, Shape, Tolerance, dtype_bytes


def roofline(dims, world_size, dtype):
    n = dims["M"] * dims["N"]
    e, w, b = dtype_bytes(dtype), world_size, dims["block"]
    payload = n + 4 * -(-n // b)  # int8 codes + one fp32 scale per (zero-padded) block
    comm = min((w - 1) * payload, (w - 1) / w * (payload + n * e))
    return [Phase("quantize_allreduce", flops=(5 + w) * n, hbm_bytes=2 * n * e, comm_bytes=comm, unit="fp32")]


PROBLEM = Problem(
    id="quantized_grad_allreduce",
    pkb_id=44,
    title="Blockwise int8-quantized gradient all-reduce",
    level=2,
    parallelism="DP",
    origin="DeepSpeed ZeRO++ (quantized gradients)",
    description=(
        "Every rank holds a flat bf16 gradient. Quantize it to int8 in blocks (one fp32 scale per "
        "block, round half to even), dequantize, and return the mean over ranks of the dequantized "
        "gradients in bf16. Communication-compressed data parallelism: a kernel that moves the int8 "
        "codes instead of fp32 values sends about four times less, so it is NVLink-bound with room "
        "to beat a plain all-reduce."
    ),
    shapes=(
        Shape("small-ragged", {"M": 17, "N": 30, "block": 16}),
        Shape("default", {"M": 1024, "N": 1024, "block": 128}, default=True),
        Shape("large", {"M": 8192, "N": 8192, "block": 128}),
    ),
    roofline=roofline,
    tolerance=Tolerance(
        atol=1e-5,
        rtol=1e-2,
        reason="with the reference's int8 codes, only the fp32 sum order (1e-7 relative) and the final bf16 "
        "rounding (2^-8 relative) can differ; bf16 reference vs fp64 needs no atol at rtol 1e-2 (small and "
        "default shapes, W=2 and 4). Skipping quantization is off by up to half a step (about 1% of the "
        "block maximum) and fails",
    ),
)
