"""Portable normal draws (tasks/portable_random.py): the inputs of bitwise problems, whose output
digests are compared across hardware, must be the same bits on every host CPU."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import torch

from evaluator.loading import load_problem
from tasks import portable_random
from tasks.spec import InputContext

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DRAW = """
import hashlib, torch
from tasks.spec import InputContext
ctx = InputContext(0, 1, {}, torch.bfloat16, torch.device("cpu"), torch.Generator().manual_seed(7),
                   torch.Generator().manual_seed(8), portable=True)
values = [ctx.randn(1000, 33, dtype=torch.float32), ctx.randn(5, shared=True, scale=0.5).float(),
          ctx.rand(300), ctx.randint(0, 1000, 300).to(torch.int32), ctx.randperm(300).to(torch.int32)]
print(hashlib.sha256(b"".join(v.view(torch.int32).numpy().tobytes() for v in values)).hexdigest())
"""


def _draw_digest(capability: str | None) -> str:
    env = dict(os.environ)
    env.pop("ATEN_CPU_CAPABILITY", None)
    if capability:
        env["ATEN_CPU_CAPABILITY"] = capability
    out = subprocess.run([sys.executable, "-c", DRAW], env=env, cwd=ROOT, capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_draws_are_the_same_bits_without_simd():
    """torch.randn, and PyTorch's own fp64 log and sqrt, give other values without SIMD than with
    AVX2 or AVX-512; the portable draws must not."""
    assert _draw_digest(None) == _draw_digest("default")


def test_log_and_sqrt_are_accurate_to_an_ulp_or_two():
    x = torch.cat([torch.rand(200_000) * 10 + 1e-30, torch.tensor([1.0, 0.5, 2.0**-60, 7.0, 3e38])])
    want_log = torch.tensor([math.log(v) for v in x.tolist()], dtype=torch.float64)
    want_sqrt = torch.tensor([math.sqrt(v) for v in x.tolist()], dtype=torch.float64)
    assert float(((portable_random.log(x) - want_log).abs() / want_log.abs().clamp_min(1.0)).max()) < 2.5e-7
    assert float(((portable_random.sqrt(x) - want_sqrt).abs() / want_sqrt).max()) < 2.5e-7


def test_normal_has_the_moments_and_few_ties():
    z = portable_random.normal((1_000_000,), torch.Generator().manual_seed(1))
    assert z.dtype == torch.float32 and z.shape == (1_000_000,)
    zd = z.double()
    assert abs(zd.mean().item()) < 0.005 and abs(zd.var().item() - 1.0) < 0.01
    assert abs(((zd - zd.mean()) ** 4).mean().item() / zd.var().item() ** 2 - 3.0) < 0.05  # kurtosis
    assert 4.0 < zd.abs().max().item() < 7.0
    assert z.unique().numel() > 0.99 * z.numel()
    assert portable_random.normal((3, 0, 2), torch.Generator()).shape == (3, 0, 2)


def test_only_portable_contexts_on_a_cpu_generator_change_randn():
    def ctx(portable: bool) -> InputContext:
        gens = torch.Generator().manual_seed(3), torch.Generator().manual_seed(4)
        return InputContext(0, 1, {}, torch.float32, torch.device("cpu"), *gens, portable=portable)

    plain = ctx(False).randn(64, 8)
    assert torch.equal(plain, torch.randn(64, 8, generator=torch.Generator().manual_seed(3)))
    portable = ctx(True).randn((64, 8), scale=2.0)
    want = portable_random.normal((64, 8), torch.Generator().manual_seed(3)) * 2.0
    assert torch.equal(portable, want)


def test_bitwise_problems_draw_portably():
    assert load_problem({"kind": "suite", "id": "repro_tp_row_linear"}).bitwise
    assert not load_problem({"kind": "suite", "id": "allreduce"}).bitwise
