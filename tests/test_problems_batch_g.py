"""Problems 55 and 56 of the public suite: metadata, each roofline against a hand calculation at
the default shape, and each reference against a whole-problem float64 computation (no
torch.distributed, no sharding) on a real gloo group."""

from __future__ import annotations

import multiprocessing
import os
import tempfile

import pytest
import torch
import torch.multiprocessing as mp

import tasks
from evaluator import checks
from evaluator.roofline import profile, roofline
from tasks.spec import LEVELS, PARALLELISM, InputContext, Tolerance

PKB_IDS = {"ring_attention_tp": 55, "ring_attention_pp": 56}
PROBLEM_IDS = tuple(PKB_IDS)


@pytest.mark.parametrize("pid", PROBLEM_IDS)
def test_metadata(pid):
    p = tasks.get(pid)
    assert p.pkb_id == PKB_IDS[pid]
    assert p.level in LEVELS and p.parallelism in PARALLELISM and p.origin
    assert len(p.description) > 150
    assert {2, 4} <= set(p.world_sizes)
    assert [s.name for s in p.shapes][0] == "small" and p.shapes[0] != p.default_shape
    assert isinstance(p.tolerance, Tolerance) and "measured" in p.tolerance.reason
    for shape in p.shapes:
        for world in p.world_sizes:
            phases = p.phases(shape.dims, world)
            assert phases and all(ph.flops + ph.hbm_bytes + ph.comm_bytes > 0 for ph in phases)


def phases(pid: str, shape: str, world: int = 4) -> list[tuple[float, float, float]]:
    p = tasks.get(pid)
    return [(ph.flops, ph.hbm_bytes, ph.comm_bytes) for ph in p.phases(p.shape(shape).dims, world)]


def bound(pid: str, shape: str, world: int = 4) -> str:
    p = tasks.get(pid)
    return roofline(p.phases(p.shape(shape).dims, world), profile("h100")).bound


def test_roofline_of_ring_attention_tp():
    # T=8192, NH=16, D=64, W=4: TP=2, CP=2, S=4096, H=1024, 8 heads per rank.
    # Xh = 4096*1024 = 4,194,304; Xa = 4096*8*64 = 2,097,152.
    # QKV: 2*4096*1024*1536 FLOPs; HBM (Xh + 1536*1024 + 3Xa)*2.
    # Ring: the last CP rank attends one full block and half the diagonal: 2*8*4096^2*64*3 FLOPs;
    # HBM (2 + 2*2)*Xa*2; it forwards one key/value block, 2*Xa*2.
    # Output projection 2*4096*512*1024 FLOPs; HBM (Xa + 1024*512 + Xh)*2; all-reduce 2*(1/2)*Xh*2.
    assert phases("ring_attention_tp", "default") == [
        (12_884_901_888, 24_117_248, 0),
        (51_539_607_552, 25_165_824, 8_388_608),
        (4_294_967_296, 13_631_488, 8_388_608),
    ]
    assert bound("ring_attention_tp", "default") == "compute" and bound("ring_attention_tp", "default", 8) == "compute"
    # One rank: no forwarded block, no all-reduce.
    assert all(ph[2] == 0 for ph in phases("ring_attention_tp", "default", 1))


def test_roofline_of_ring_attention_pp():
    # T=8192, NH=16, D=64, W=4: PP=2 stages of CP=2, S=4096, H=1024, all 16 heads per rank.
    # Xh = Xa = 4096*1024 = 4,194,304. Per stage: QKV 2*4096*1024*3072 FLOPs, HBM (Xh + 3072*1024 +
    # 3Xa)*2; ring 2*16*4096^2*64*3 FLOPs, HBM 6Xa*2, NVLink 2Xa*2; output 2*4096*1024*1024 FLOPs,
    # HBM (Xa + 1024^2 + Xh)*2. Between the stages one send of Xh*2.
    stage = [(25_769_803_776, 39_845_888, 0), (103_079_215_104, 50_331_648, 16_777_216),
             (8_589_934_592, 18_874_368, 0)]
    assert phases("ring_attention_pp", "default") == stage + [(0, 0, 8_388_608)] + stage
    assert bound("ring_attention_pp", "default") == "compute" and bound("ring_attention_pp", "default", 8) == "compute"


# ---------------------------------------------------------------------------------------------
# Whole-problem float64 computations.
# ---------------------------------------------------------------------------------------------


def rank_inputs(pid: str, world: int, seed: int = 0) -> list[tuple]:
    """Every rank's inputs, drawn as the judge draws them (groups left as None: no process group
    exists here; the simulations know the layout)."""
    problem, module = tasks.get(pid), tasks.load_reference(pid)
    dims = dict(problem.shapes[0].dims)
    made = []
    real_new_group = torch.distributed.new_group
    torch.distributed.new_group = lambda *a, **k: None
    saved_groups = dict(module._GROUPS)
    try:
        for rank in range(world):
            module._GROUPS.clear()
            rng = torch.Generator().manual_seed(1000 * seed + rank)
            shared = torch.Generator().manual_seed(1000 * seed + 999)
            ctx = InputContext(rank, world, dims, getattr(torch, problem.dtype), torch.device("cpu"), rng, shared)
            made.append(tuple(module.make_inputs(ctx)))
    finally:
        torch.distributed.new_group = real_new_group
        module._GROUPS.clear()
        module._GROUPS.update(saved_groups)
    return made


def layer64(x, w_qkv, w_o, heads: int) -> torch.Tensor:
    """w_o(causal softmax(q k^T / sqrt(D)) v) with (q, k, v) = x w_qkv^T, all in float64."""
    b, t, h = x.shape
    d = w_qkv.shape[0] // (3 * heads)
    q, k, v = (x.double() @ w_qkv.double().T).view(b, t, 3, heads, d).unbind(2)
    scores = torch.einsum("bqhd,bkhd->bhqk", q, k) * d**-0.5
    scores = scores.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
    context = torch.einsum("bhqk,bkhd->bqhd", scores.softmax(-1), v).reshape(b, t, heads * d)
    return context @ w_o.double().T


def sim_tp(ins, world):
    tp = min(2, world)
    cp = world // tp
    x = torch.cat([ins[c * tp][0] for c in range(cp)], dim=1)
    hidden = x.shape[-1]
    w_qkv = torch.cat([ins[t][1].view(3, -1, hidden) for t in range(tp)], dim=1).reshape(-1, hidden)
    w_o = torch.cat([ins[t][2] for t in range(tp)], dim=1)
    chunks = layer64(x, w_qkv, w_o, ins[0][3]).chunk(cp, dim=1)
    return [(chunks[r // tp],) for r in range(world)]


def sim_pp(ins, world):
    pp = min(2, world)
    cp = world // pp
    x = torch.cat([ins[c][0] for c in range(cp)], dim=1).double()
    stages = []
    for p in range(pp):
        x = layer64(x, ins[p * cp][1], ins[p * cp][2], ins[0][3])
        stages.append(x.chunk(cp, dim=1))
    return [(stages[r // cp][r % cp],) for r in range(world)]


SIMS = {"ring_attention_tp": sim_tp, "ring_attention_pp": sim_pp}


def _run_references(rank: int, world: int, store: str, out_dir: str) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    for pid in PROBLEM_IDS:
        problem, module = tasks.get(pid), tasks.load_reference(pid)
        rng = torch.Generator().manual_seed(rank)
        shared = torch.Generator().manual_seed(999)
        ctx = InputContext(rank, world, dict(problem.shapes[0].dims), getattr(torch, problem.dtype),
                           torch.device("cpu"), rng, shared)
        out = module.solution(*module.make_inputs(ctx))
        torch.save({"output": out}, os.path.join(out_dir, f"{pid}.{rank}.pt"))
    dist.barrier()
    os._exit(0)  # every file is written; skip the slow interpreter and gloo teardown


@pytest.fixture(scope="module")
def reference_runs():
    world = 2
    with tempfile.TemporaryDirectory() as out_dir:
        multiprocessing.get_context("forkserver").set_forkserver_preload(["torch", "torch.distributed", "tasks"])
        mp.start_processes(
            _run_references, args=(world, os.path.join(out_dir, "store"), out_dir), nprocs=world,
            start_method="forkserver",
        )
        yield world, {
            pid: [torch.load(os.path.join(out_dir, f"{pid}.{r}.pt"), weights_only=False) for r in range(world)]
            for pid in PROBLEM_IDS
        }


def _within(got: torch.Tensor, expected: torch.Tensor, tol: Tolerance) -> bool:
    """The evaluator's rule."""
    got, expected = got.double(), expected.double()
    return bool(((got - expected).abs() <= checks.allowed_error(expected, tol)).all())


@pytest.mark.parametrize("pid", PROBLEM_IDS)
def test_reference_matches_float64_computation(pid, reference_runs):
    world, runs = reference_runs
    problem = tasks.get(pid)
    exact = SIMS[pid](rank_inputs(pid, world), world)
    for rank, saved in enumerate(runs[pid]):
        out = saved["output"]
        assert out.dtype == getattr(torch, problem.dtype) and out.shape == exact[rank][0].shape
        assert _within(out, exact[rank][0], problem.tolerance_for(0, world)), f"rank {rank} outside the tolerance"
        # Every output row is of order 1, wherever it sits in the sequence.
        rows = exact[rank][0].pow(2).mean(-1).sqrt()
        assert 0.3 < rows.min() and rows.max() < 3


FP8_GAP = pytest.mark.xfail(strict=False, reason=(
    "known gap, stated in the tolerance's reason: at the small shape the pipeline problem's fp8 "
    "probabilities can stay inside 0.04 rms (they need 0.029 on some draws); they fail at T=1024"))


@pytest.mark.parametrize("pid", ["ring_attention_tp", pytest.param("ring_attention_pp", marks=FP8_GAP)])
def test_fp8_probabilities_fail(pid, reference_runs):
    """Attention probabilities rounded to fp8 e4m3 before P V (the reference otherwise unchanged)
    leave the tolerance, measured on the float64 result of the same inputs."""
    world, _ = reference_runs
    problem = tasks.get(pid)
    ins = rank_inputs(pid, world)
    exact = SIMS[pid](ins, world)
    tol = problem.tolerance_for(0, world)
    # Whole-sequence attention with fp8 probabilities, each layer's output rounded to bf16.
    module = tasks.load_reference("ring_attention_tp")
    real = module._block_attention

    def fp8_block(q, k, v, scale, diagonal):
        qh, kh, vh = (t.transpose(1, 2).float() for t in (q, k, v))
        scores = torch.matmul(qh, kh.transpose(-2, -1)) * scale
        if diagonal:
            scores = scores.masked_fill(torch.ones(scores.shape[-2:], dtype=torch.bool).triu(1), float("-inf"))
        lse = torch.logsumexp(scores, dim=-1, keepdim=True)
        probs = torch.exp(scores - lse).to(torch.float8_e4m3fn).float()
        return torch.matmul(probs, vh), lse

    def layer(x, w_qkv, w_o, heads, block):
        b, t, _ = x.shape
        d = w_qkv.shape[0] // (3 * heads)
        q, k, v = torch.nn.functional.linear(x, w_qkv).view(b, t, 3, heads, d).unbind(2)
        out, _ = block(q, k, v, d**-0.5, True)
        return torch.nn.functional.linear(out.transpose(1, 2).reshape(b, t, -1).to(x.dtype), w_o)

    def whole(block):
        if pid == "ring_attention_tp":
            tp = min(2, world)
            x = torch.cat([ins[c * tp][0] for c in range(world // tp)], dim=1)
            hidden = x.shape[-1]
            w_qkv = torch.cat([ins[t][1].view(3, -1, hidden) for t in range(tp)], dim=1).reshape(-1, hidden)
            w_o = torch.cat([ins[t][2] for t in range(tp)], dim=1)
            return layer(x, w_qkv, w_o, ins[0][3], block), torch.cat([exact[c * tp][0] for c in range(world // tp)], dim=1)
        x = ins[0][0]
        for p in range(world):
            x = layer(x, ins[p][1], ins[p][2], ins[0][3], block)
        return x, exact[world - 1][0]

    assert _within(*whole(real), tol)
    assert not _within(*whole(fp8_block), tol)
