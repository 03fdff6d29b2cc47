import math

import torch

from tasks.reproducible.allreduce import deterministic_all_reduce
from tasks.reproducible.cpu_reference import canonicalize_nan
from tasks.reproducible.gemm import reproducible_bmm, reproducible_matmul
from tasks.reproducible.ops import rms_norm, rope, silu, softmax

EPS = 1e-5
ROPE_THETA = 500000.0


def make_inputs(ctx):
    d = ctx.dims
    b, dim, t, w = d["B"], d["D"], d["T"], ctx.world_size
    dh = dim // d["H"]
    nq, nkv, f = d["H"] // w, d["KVH"] // w, d["F"] // w
    h = ctx.randn(b, dim, dtype=torch.float32, shared=True)
    # Positions T..; the angles are computed on the CPU in float64 so every device gets the same bits.
    pos = torch.arange(t, t + b, dtype=torch.float64)
    inv_freq = ROPE_THETA ** (-torch.arange(0, dh, 2, dtype=torch.float64) / dh)
    angles = pos[:, None] * inv_freq[None, :]
    cos = angles.cos().float().to(ctx.device)
    sin = angles.sin().float().to(ctx.device)
    g1 = ctx.randn(dim, shared=True, scale=0.1) + 1.0
    g2 = ctx.randn(dim, shared=True, scale=0.1) + 1.0
    wqkv = ctx.randn((nq + 2 * nkv) * dh, dim, scale=dim**-0.5)
    wo = ctx.randn(dim, nq * dh, scale=(d["H"] * dh) ** -0.5)
    wgu = ctx.randn(2 * f, dim, scale=dim**-0.5)
    wd = ctx.randn(dim, f, scale=d["F"] ** -0.5)
    k_cache = ctx.randn(b, nkv, t, dh)
    v_cache_t = ctx.randn(b, nkv, dh, t)
    return (h, cos, sin, g1.to(torch.bfloat16), g2.to(torch.bfloat16), wqkv, wo, wgu, wd, k_cache, v_cache_t)


@torch.no_grad()
def solution(h, cos, sin, g1, g2, wqkv, wo, wgu, wd, k_cache, v_cache_t):
    bsz, dim = h.shape
    nkv, _, dh = k_cache.shape[1:]
    nq = wo.shape[1] // dh
    group = nq // nkv
    f = wd.shape[1]

    x = rms_norm(h, g1, EPS)
    qkv = reproducible_matmul(x, wqkv)
    q = qkv[:, : nq * dh].reshape(bsz, nq, dh)
    k = qkv[:, nq * dh : (nq + nkv) * dh].reshape(bsz, nkv, dh)
    v = qkv[:, (nq + nkv) * dh :].reshape(bsz, nkv, dh)
    q = rope(q, cos[:, None, :], sin[:, None, :])
    k = rope(k, cos[:, None, :], sin[:, None, :]).to(torch.bfloat16)
    v = v.to(torch.bfloat16)
    scale = float(torch.tensor(1.0 / math.sqrt(dh), dtype=torch.float32))

    # Attention for every (sequence, kv head) at once; each query group attends to the cache
    # plus the new position T.
    keys = torch.cat([k_cache, k[:, :, None, :]], dim=2).reshape(bsz * nkv, -1, dh)  # [B*KV, T+1, Dh]
    values_t = torch.cat([v_cache_t, v[:, :, :, None]], dim=3).reshape(bsz * nkv, dh, -1)  # [B*KV, Dh, T+1]
    queries = q.reshape(bsz * nkv, group, dh)
    scores = reproducible_bmm(queries, keys) * scale  # [B*KV, G, T+1]
    probs = softmax(scores.reshape(bsz * nq, -1)).reshape(bsz * nkv, group, -1)
    attn = reproducible_bmm(probs, values_t)  # [B*KV, G, Dh]

    h1 = h + deterministic_all_reduce(reproducible_matmul(attn.reshape(bsz, nq * dh), wo))
    x2 = rms_norm(h1, g2, EPS)
    gu = reproducible_matmul(x2, wgu)
    act = silu(gu[:, :f]) * gu[:, f:]
    out = h1 + deterministic_all_reduce(reproducible_matmul(act, wd))
    return canonicalize_nan(out)
