"""End-to-end greedy decoding of a Llama-3.1-8B-shaped model with random bf16 weights made in
code (nothing downloaded), three ways:

- bf16: the usual inference path (bf16 activations, cuBLAS bf16 GEMMs on tensor cores, SDPA);
- layercast: bf16 weights cast to fp32 on every call, fp32 activations, RoPE and KV cache;
- ours: reproducible linear layers (tasks.reproducible), fp32 activations, reproducible
  attention/softmax/RMSNorm/SiLU (tasks.reproducible.ops), bf16 KV cache;
- ours_static: the same, its linear layers told that their weights are static (frozen: nothing in
  a step writes them), so each decode GEMV starts copying its weight before the kernel ahead ends.

Every layer has the exact Llama-3.1-8B shapes (D 4096, 32 heads, 8 KV heads, MLP 14336, vocab
128256); the number of layers is an argument (default 8 of 32, to fit memory-light, short runs).
The prompt is stepped through token by token (the decode path), then G tokens are generated.

Reported: ms per generated token at batch 1, 4 and 16 (wall time of eager decoding, host
launch overhead included, and GPU time of one step replayed from a CUDA graph); whether token streams and per-step logit
hashes (SHA-256 of each sequence's fp32 logits) are identical across two runs of the same batch and
across batch compositions (sequence i decoded in a batch of 16, of 4, and alone).

    python bench/repro_decode.py [--layers 8] [--prompt 8] [--gen 16] [--json PATH]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tasks.reproducible import ops  # noqa: E402
from tasks.reproducible.gemm import reproducible_bmm, reproducible_matmul  # noqa: E402

VOCAB, DIM, HEADS, KV_HEADS, FFN = 128256, 4096, 32, 8, 14336
HEAD_DIM = DIM // HEADS
EPS, THETA = 1e-5, 500000.0


class Weights:
    def __init__(self, layers: int, seed: int = 0):
        g = torch.Generator(device="cuda").manual_seed(seed)

        def w(*shape, scale):
            return (torch.randn(*shape, generator=g, device="cuda") * scale).to(torch.bfloat16)

        self.embed = w(VOCAB, DIM, scale=1.0)
        self.layers = []
        for _ in range(layers):
            self.layers.append(
                {
                    "g1": w(DIM, scale=0.1) + 1,
                    "g2": w(DIM, scale=0.1) + 1,
                    "wqkv": w((HEADS + 2 * KV_HEADS) * HEAD_DIM, DIM, scale=DIM**-0.5),
                    "wo": w(DIM, DIM, scale=DIM**-0.5),
                    "wgu": w(2 * FFN, DIM, scale=DIM**-0.5),
                    "wd": w(DIM, FFN, scale=FFN**-0.5),
                }
            )
        self.gf = w(DIM, scale=0.1) + 1
        self.lm_head = w(VOCAB, DIM, scale=DIM**-0.5)


def rope_tables(max_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    inv = THETA ** (-torch.arange(0, HEAD_DIM, 2, dtype=torch.float64) / HEAD_DIM)
    ang = torch.arange(max_len, dtype=torch.float64)[:, None] * inv[None, :]
    return ang.cos().float().cuda(), ang.sin().float().cuda()


def rope_ref(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


class TorchEngine:
    """bf16 (tensor cores) or LayerCast-style (fp32 compute on per-call casts of bf16 weights)."""

    def __init__(self, w: Weights, max_len: int, fp32: bool):
        self.w, self.max_len, self.fp32 = w, max_len, fp32
        self.act = torch.float32 if fp32 else torch.bfloat16
        self.cos, self.sin = rope_tables(max_len)

    def reset(self, batch: int) -> None:
        shape = (len(self.w.layers), batch, KV_HEADS, self.max_len, HEAD_DIM)
        self.k = torch.zeros(shape, dtype=self.act, device="cuda")
        self.v = torch.zeros(shape, dtype=self.act, device="cuda")

    def linear(self, x, weight):
        return F.linear(x, weight.float()) if self.fp32 else F.linear(x, weight)

    def norm(self, h, g):
        hf = h.float()
        y = hf * torch.rsqrt(hf.pow(2).mean(-1, keepdim=True) + EPS)
        return (y * g.float()).to(self.act)

    def step(self, tokens: torch.Tensor, pos: int) -> torch.Tensor:
        # cuDNN attention builds a plan per new KV length (milliseconds per decode step): use
        # the flash, memory-efficient or math kernels as an inference engine would.
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]):
            return self._step(tokens, pos)

    def _step(self, tokens: torch.Tensor, pos: int) -> torch.Tensor:
        b = tokens.shape[0]
        h = self.w.embed[tokens].to(self.act)
        cos, sin = self.cos[pos], self.sin[pos]
        for i, lw in enumerate(self.w.layers):
            qkv = self.linear(self.norm(h, lw["g1"]), lw["wqkv"])
            q = qkv[:, : HEADS * HEAD_DIM].view(b, HEADS, HEAD_DIM)
            k = qkv[:, HEADS * HEAD_DIM : (HEADS + KV_HEADS) * HEAD_DIM].view(b, KV_HEADS, HEAD_DIM)
            v = qkv[:, (HEADS + KV_HEADS) * HEAD_DIM :].view(b, KV_HEADS, HEAD_DIM)
            q = rope_ref(q.float(), cos, sin).to(self.act)
            self.k[i, :, :, pos] = rope_ref(k.float(), cos, sin).to(self.act)
            self.v[i, :, :, pos] = v
            attn = F.scaled_dot_product_attention(
                q[:, :, None, :], self.k[i, :, :, : pos + 1], self.v[i, :, :, : pos + 1], enable_gqa=True
            )
            h = h + self.linear(attn.reshape(b, DIM), lw["wo"])
            gu = self.linear(self.norm(h, lw["g2"]), lw["wgu"])
            h = h + self.linear(F.silu(gu[:, :FFN]) * gu[:, FFN:], lw["wd"])
        return self.linear(self.norm(h, self.w.gf), self.w.lm_head).float()


class ReproducibleEngine:
    """Every reduction in a fixed order; the same bits for a sequence in any batch, on any GPU."""

    def __init__(self, w: Weights, max_len: int, static_weights: bool = False):
        self.w, self.max_len, self.static = w, max_len, static_weights
        self.cos, self.sin = rope_tables(max_len)
        self.scale = float(torch.tensor(1.0 / math.sqrt(HEAD_DIM), dtype=torch.float32))

    def reset(self, batch: int) -> None:
        n = len(self.w.layers)
        self.k = torch.zeros(n, batch, KV_HEADS, self.max_len, HEAD_DIM, dtype=torch.bfloat16, device="cuda")
        self.vt = torch.zeros(n, batch, KV_HEADS, HEAD_DIM, self.max_len, dtype=torch.bfloat16, device="cuda")

    def linear(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return reproducible_matmul(x, weight, static_weight=self.static)

    def step(self, tokens: torch.Tensor, pos: int) -> torch.Tensor:
        b = tokens.shape[0]
        group = HEADS // KV_HEADS
        h = self.w.embed[tokens].float()
        cos, sin = self.cos[pos], self.sin[pos]
        for i, lw in enumerate(self.w.layers):
            qkv = self.linear(ops.rms_norm(h, lw["g1"], EPS), lw["wqkv"])
            q = ops.rope(qkv[:, : HEADS * HEAD_DIM].view(b, HEADS, HEAD_DIM), cos, sin)
            k = ops.rope(qkv[:, HEADS * HEAD_DIM : (HEADS + KV_HEADS) * HEAD_DIM].view(b, KV_HEADS, HEAD_DIM), cos, sin)
            v = qkv[:, (HEADS + KV_HEADS) * HEAD_DIM :].view(b, KV_HEADS, HEAD_DIM)
            self.k[i, :, :, pos] = k.to(torch.bfloat16)
            self.vt[i, :, :, :, pos] = v.to(torch.bfloat16)
            keys = self.k[i, :, :, : pos + 1].reshape(b * KV_HEADS, pos + 1, HEAD_DIM)
            values_t = self.vt[i, :, :, :, : pos + 1].reshape(b * KV_HEADS, HEAD_DIM, pos + 1)
            scores = reproducible_bmm(q.reshape(b * KV_HEADS, group, HEAD_DIM), keys) * self.scale
            probs = ops.softmax(scores.reshape(b * HEADS, pos + 1)).reshape(b * KV_HEADS, group, pos + 1)
            attn = reproducible_bmm(probs, values_t).reshape(b, DIM)
            h = h + self.linear(attn, lw["wo"])
            gu = self.linear(ops.rms_norm(h, lw["g2"], EPS), lw["wgu"])
            h = h + self.linear(ops.silu(gu[:, :FFN]) * gu[:, FFN:], lw["wd"])
        return self.linear(ops.rms_norm(h, self.w.gf, EPS), self.w.lm_head)


def decode(engine, prompts: torch.Tensor, gen: int) -> tuple[torch.Tensor, list[list[str]], float]:
    """Greedy decoding. Returns generated tokens [B, gen], per-sequence per-step logit hashes,
    and ms per generated step."""
    b, p = prompts.shape
    engine.reset(b)
    hashes: list[list[str]] = [[] for _ in range(b)]
    logits = None
    for pos in range(p):
        logits = engine.step(prompts[:, pos], pos)
    out = []
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    step_logits = []
    for j in range(gen):
        tok = logits.argmax(dim=-1)
        out.append(tok)
        step_logits.append(logits)
        logits = engine.step(tok, p + j)
    torch.cuda.synchronize()
    ms = (time.perf_counter() - t0) * 1e3 / gen
    for lg in step_logits:
        host = lg.cpu()
        for r in range(b):
            hashes[r].append(hashlib.sha256(host[r].numpy().tobytes()).hexdigest())
    return torch.stack(out, 1).cpu(), hashes, ms


def graph_ms_per_step(engine, prompts: torch.Tensor, pos: int, replays: int = 7) -> float:
    """GPU time of one decode step at position `pos` (context pos + 1): the step captured in a CUDA
    graph and replayed, so host launch overhead is excluded for every engine alike."""
    engine.reset(prompts.shape[0])
    tokens = prompts[:, 0]
    engine.step(tokens, pos)  # compiles and allocates outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        engine.step(tokens, pos)
    graph.replay()
    times = []
    for _ in range(replays):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    del graph
    return sorted(times)[replays // 2]


def compare(ref_tokens, ref_hashes, tokens, hashes, rows) -> dict:
    differing = sum(ref_hashes[r][j] != hashes[i][j] for i, r in enumerate(rows) for j in range(len(hashes[i])))
    total = sum(len(hashes[i]) for i in range(len(rows)))
    same_tokens = all(torch.equal(ref_tokens[r], tokens[i]) for i, r in enumerate(rows))
    first = None
    for i, r in enumerate(rows):
        for j in range(len(hashes[i])):
            if ref_hashes[r][j] != hashes[i][j]:
                first = j if first is None else min(first, j)
                break
    return {
        "tokens_identical": same_tokens,
        "logit_hashes_differing": differing,
        "logit_hashes": total,
        "first_diff_step": first,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--prompt", type=int, default=8)
    parser.add_argument("--gen", type=int, default=16)
    parser.add_argument("--json")
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    # Cache capacity rounded up to 8 so every cache row is 16-byte aligned (the GEMV streams rows).
    max_len = (args.prompt + args.gen + 1 + 7) // 8 * 8
    t0 = time.time()
    weights = Weights(args.layers)
    print(
        f"{args.layers} layers of Llama-3.1-8B shape, random bf16 weights made in {time.time() - t0:.1f}s", flush=True
    )
    prompts = torch.randint(0, VOCAB, (16, args.prompt), generator=torch.Generator().manual_seed(1)).cuda()
    engines = {
        "bf16": TorchEngine(weights, max_len, fp32=False),
        "layercast": TorchEngine(weights, max_len, fp32=True),
        "ours": ReproducibleEngine(weights, max_len),
        "ours_static": ReproducibleEngine(weights, max_len, static_weights=True),
    }
    results = {"layers": args.layers, "prompt": args.prompt, "gen": args.gen, "engines": {}}
    streams = {}
    for name, engine in engines.items():
        decode(engine, prompts[:1, :2], 1)  # warm-up: compiles kernels
        tok16, h16, ms16 = decode(engine, prompts, args.gen)
        tok16b, h16b, _ = decode(engine, prompts, args.gen)
        tok4, h4, ms4 = decode(engine, prompts[:4], args.gen)
        tok1, h1, ms1 = decode(engine, prompts[:1], args.gen)
        pos = args.prompt + args.gen - 1
        gpu = {str(b): graph_ms_per_step(engine, prompts[:b], pos) for b in (1, 4, 16)}
        r = {
            "ms_per_token": {"1": ms1, "4": ms4, "16": ms16},
            "gpu_ms_per_token": gpu,
            "repeat_batch16": compare(tok16, h16, tok16b, h16b, list(range(16))),
            "batch4_vs_batch16": compare(tok16, h16, tok4, h4, [0, 1, 2, 3]),
            "batch1_vs_batch16": compare(tok16, h16, tok1, h1, [0]),
        }
        results["engines"][name] = r
        streams[name] = (tok16, h16)
        print(
            f"{name:9s} ms/token: b1 {ms1:7.2f} b4 {ms4:7.2f} b16 {ms16:7.2f} | GPU ms/token (graph): "
            f"b1 {gpu['1']:6.2f} b4 {gpu['4']:6.2f} b16 {gpu['16']:6.2f} | "
            + " | ".join(
                f"{k}: tokens {'same' if v['tokens_identical'] else 'DIFFER'}, "
                f"{v['logit_hashes_differing']}/{v['logit_hashes']} logit hashes differ"
                for k, v in r.items()
                if not k.endswith("ms_per_token")
            ),
            flush=True,
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    ok = all(
        results["engines"][name][k]["logit_hashes_differing"] == 0
        for name in ("ours", "ours_static")
        for k in ("repeat_batch16", "batch4_vs_batch16", "batch1_vs_batch16")
    )
    static_same = compare(*streams["ours"], *streams["ours_static"], list(range(16)))
    results["ours_vs_ours_static"] = static_same
    ok = ok and static_same["logit_hashes_differing"] == 0
    print("ours bitwise reproducible across runs and batch compositions, with and without static weights:", ok)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
