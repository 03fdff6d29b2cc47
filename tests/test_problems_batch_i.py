"""Problems 74, 75 and 77 of the public suite: metadata, each roofline against a hand calculation at
one shape, the draws, and every reference on a real gloo group (W = 2, and W = 4 for the TP x CP
grid of problem 74) against the whole problem computed without torch.distributed in float64."""

from __future__ import annotations

import multiprocessing
import os
import tempfile

import pytest
import torch
import torch.multiprocessing as mp
import torch.nn.functional as F

import tasks
from evaluator import checks
from evaluator.roofline import profile, roofline
from tasks.fla_kimi_delta_attention_cp_tp.problem import grid
from tasks.spec import LEVELS, PARALLELISM, RTOL_LIMIT, InputContext, Tolerance

KDA, GDN, CSO = "fla_kimi_delta_attention_cp_tp", "fla_gated_deltanet_cp", "magi1_cso_async_attention"
PKB_IDS = {KDA: 74, GDN: 75, CSO: 77}
PROBLEM_IDS = tuple(PKB_IDS)
WORLD = 2
SEEDS = range(3)


# ---------------------------------------------------------------------------------------------
# Metadata.
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("pid", PROBLEM_IDS)
def test_metadata(pid):
    p = tasks.get(pid)
    assert p.pkb_id == PKB_IDS[pid]
    assert p.level in LEVELS and p.parallelism in PARALLELISM and p.origin
    assert len(p.description) > 150 and "bound" in p.description
    assert {1, 2, 4} <= set(p.world_sizes) and len(p.shapes) >= 3
    tols = p.tolerance if isinstance(p.tolerance, tuple) else (p.tolerance,)
    assert all(t.bitwise or "measured" in t.reason.lower() for t in tols)
    assert all(t.relaxation or t.rtol <= RTOL_LIMIT[p.dtype] for t in tols)
    hbm = [sum(ph.hbm_bytes for ph in p.phases(s.dims, 4)) for s in p.shapes]
    assert hbm[0] == min(hbm) and p.shapes[0].name == "small" and p.shapes[0] != p.default_shape
    for shape in p.shapes:
        for world in p.world_sizes:
            assert all(ph.flops + ph.hbm_bytes + ph.comm_bytes > 0 for ph in p.phases(shape.dims, world))


# ---------------------------------------------------------------------------------------------
# Rooflines against hand calculations (W = 4, bf16 = 2 bytes).
# ---------------------------------------------------------------------------------------------


def phases(pid: str, shape: str, world: int = 4) -> list[tuple[float, float, float]]:
    p = tasks.get(pid)
    return [(ph.flops, ph.hbm_bytes, ph.comm_bytes) for ph in p.phases(p.shape(shape).dims, world)]


def bound(pid: str, shape: str, world: int = 4) -> str:
    p = tasks.get(pid)
    return roofline(p.phases(p.shape(shape).dims, world), profile("h100")).bound.value


def test_roofline_of_kimi_delta_attention():
    # B=1, S=2048, H=16, K=V=128, W=4: TP=2, CP=2, C=64; n = 16*2048 = 32768 (token, head) pairs;
    # one rank's (M, h) in fp32: 16*128*(128+128)*4 = 2,097,152 bytes; S_0: 16*128*128*4 = 1,048,576.
    # 1. pre-pass: n*(2*64*(2*128+128) + 4*128*256) = 32768*180224 FLOPs;
    #    HBM k, v, g, beta: n*(2*128+128+1)*2 = 25,231,360, plus (M, h) written.
    # 2. all-gather: one other CP rank's pair, 2,097,152 bytes; fold 16*2*128^3 FLOPs;
    #    HBM both pairs read, S_0 written: 2*2,097,152 + 1,048,576.
    # 3. main pass: n*(2*64*(3*128+2*128) + 6*128*128) = 32768*180224 FLOPs; HBM q, k, v, g, beta
    #    n*513*2 = 33,619,968, S_0 and the output n*128*2 = 8,388,608; TP all-reduce 2*(1/2)*8,388,608.
    assert phases(KDA, "default") == [
        (5_905_580_032, 25_231_360 + 2_097_152, 0),
        (67_108_864, 4_194_304 + 1_048_576, 2_097_152),
        (5_905_580_032, 33_619_968 + 1_048_576 + 8_388_608, 8_388_608),
    ]
    assert bound(KDA, "default") == "nvlink" and bound(KDA, "default", 2) == "hbm"
    # W=2: no TP, nothing to all-reduce; W=1: the main pass alone, from a zero state.
    assert phases(KDA, "default", 2)[2][2] == 0
    assert phases(KDA, "default", 1) == [(5_905_580_032, 33_619_968 + 8_388_608, 0)]


def test_roofline_of_gated_deltanet():
    # B=1, S=1024, H=8, K=256, V=512, W=4: 8 heads (a multiple of 4), C=64.
    # X_in = 1024*8*(2*256+512+2)*2 = 16,809,984; X_out = 1024*8*512*2 = 8,388,608.
    # 1. all-to-all in: NVLink 3/4*X_in, HBM 2*X_in.
    # 2. recurrence: 1024*8*(2*64*(3*256+2*512) + 6*256*512) = 8192*1,015,808 FLOPs; HBM X_in + X_out.
    # 3. all-to-all out: NVLink 3/4*X_out, HBM 2*X_out.
    assert phases(GDN, "default") == [
        (0, 33_619_968, 12_607_488),
        (8_321_499_136, 25_198_592, 0),
        (0, 16_777_216, 6_291_456),
    ]
    assert bound(GDN, "default") == "nvlink"
    # The public size rounds its 6 heads up to a multiple of W: 6 at W=2, 8 at W=4.
    assert phases(GDN, "pkb", 2)[1][1] == 64 * 6 * (1026 + 512) * 2
    assert phases(GDN, "pkb", 4)[1][1] == 64 * 8 * (1026 + 512) * 2


def test_roofline_of_cso_attention():
    # R=4, CHUNK=12150, HQ=24, HKV=8, D=128, W=4: spb = ceil(12150/4) = 3038, T = 4*3038 = 12152.
    # Q = 12152*24*128*2 = 74,661,888; KV = 12152*8*256*2 = 49,774,592; the windows one rank
    # attends: 4*12150*(8/4)*256*2 = 49,766,400.
    # 1. key/value all-to-all: NVLink 3/4*KV, HBM 2*KV.
    # 2. per range: 4*(4*3038)*12150*(24/4)*128 FLOPs per range, 4 ranges; HBM 6*Q + windows;
    #    NVLink 2*3/4*Q.
    assert phases(CSO, "pkb") == [
        (0, 99_549_184, 37_330_944),
        (4 * 4 * 12152 * 12150 * 6 * 128, 6 * 74_661_888 + 49_766_400, 111_992_832),
    ]
    assert bound(CSO, "pkb") == "compute"
    # W=1: no all-to-all; the queries and output once, every key/value head.
    assert phases(CSO, "pkb", 1) == [
        (4 * 4 * 12150 * 12150 * 24 * 128, 2 * 12150 * 4 * 24 * 128 * 2 + 49_766_400 * 4, 0)
    ]


# ---------------------------------------------------------------------------------------------
# The draws.
# ---------------------------------------------------------------------------------------------


def rank_input(pid: str, world: int, rank: int, seed: int = 0, shape: str = "small") -> tuple:
    problem, module = tasks.get(pid), tasks.load_reference(pid)
    rng = torch.Generator().manual_seed(1000 * seed + rank)
    shared = torch.Generator().manual_seed(1000 * seed + 999)
    ctx = InputContext(
        rank, world, dict(problem.shape(shape).dims), getattr(torch, problem.dtype), torch.device("cpu"), rng, shared
    )
    return tuple(module.make_inputs(ctx))


def rank_inputs(pid: str, world: int, seed: int = 0, shape: str = "small") -> list[tuple]:
    """Every rank's inputs, drawn outside torch.distributed (process groups None)."""
    return [rank_input(pid, world, rank, seed, shape) for rank in range(world)]


def _same(a: tuple, b: tuple) -> bool:
    return all(torch.equal(x, y) if isinstance(x, torch.Tensor) else x == y for x, y in zip(a, b))


@pytest.mark.parametrize("pid", PROBLEM_IDS)
def test_draws_are_reproducible_and_differ_by_rank_and_seed(pid):
    ins = rank_inputs(pid, 4)
    assert all(_same(a, b) for a, b in zip(ins, rank_inputs(pid, 4)))
    assert not torch.equal(ins[0][0], ins[1][0]) and not torch.equal(ins[0][0], rank_inputs(pid, 4, seed=1)[0][0])


def test_kda_gate_parameters_follow_the_heads():
    """At W=4 (TP=2, CP=2) ranks 0 and 2 hold one sequence of the same heads: same gate parameters;
    ranks 0 and 1 different heads: different ones. Each head has slow and fast channels."""
    ins = rank_inputs(KDA, 4)
    for j in (5, 6):
        assert torch.equal(ins[0][j], ins[2][j]) and torch.equal(ins[1][j], ins[3][j])
        assert not torch.equal(ins[0][j], ins[1][j])
    q, k, v, g, beta, a_log, dt_bias, *_ = ins[0]
    h, kd = q.shape[2], q.shape[3]
    assert a_log.shape == (h,) and dt_bias.shape == (h * kd,) and beta.shape == q.shape[:3]
    assert float(dt_bias.min()) < -7 and float(dt_bias.max()) > -3


def test_gdn_heads_and_decay_parameters():
    """H rounds up to a multiple of W; each rank holds its heads' slice of one draw."""
    for world, heads in ((2, 2), (4, 4)):
        ins = rank_inputs(GDN, world)
        assert ins[0][0].shape[2] == heads and ins[0][5].shape == (heads // world,)
        assert torch.cat([i[5] for i in ins]).unique().numel() == heads
    ins = rank_inputs(GDN, 2, shape="pkb")
    assert ins[0][0].shape == (1, 64, 6, 256) and ins[0][2].shape == (1, 64, 6, 512)
    beta = ins[0][4]
    assert float(beta.min()) > 0 and float(beta.max()) < 1


def test_cso_windows():
    """Windows of CHUNK keys inside the R*CHUNK key sequence, the same on every rank, at starts
    that vary from draw to draw (the public suite's own-range windows are one case)."""
    starts = set()
    for seed in range(8):
        ins = rank_inputs(CSO, 4, seed)
        query, key_value, k_ranges, ranges, chunk, group = ins[0]
        assert all(torch.equal(i[2], k_ranges) for i in ins) and group is None
        assert k_ranges.dtype == torch.int64 and k_ranges.shape == (ranges, 2)
        assert bool(((k_ranges[:, 1] - k_ranges[:, 0]) == chunk).all())
        assert int(k_ranges.min()) >= 0 and int(k_ranges.max()) <= ranges * chunk
        starts |= set(k_ranges[:, 0].tolist())
        spb = -(-chunk // 4)
        assert query.shape == (ranges * spb, 8, 16) and key_value.shape == (ranges * spb, 4, 32)
    assert len(starts) > 4


# ---------------------------------------------------------------------------------------------
# Whole-problem computations.
# ---------------------------------------------------------------------------------------------


def delta_rule(q, k, v, beta, decay, dtype, starts=(), operands=None):
    """The gated delta rule token by token, heads last: q, k (B, T, H, K), v (B, T, H, V), beta
    (B, T, H), decay (B, T, H, K or 1). The state restarts from zero at the tokens in `starts`;
    `operands` rounds the operands of every state product (the state itself stays in `dtype`)."""
    b, t, h, kd = k.shape

    def r(x):
        return x if operands is None else x.to(operands).to(dtype)

    state = torch.zeros(b, h, kd, v.shape[-1], dtype=dtype)
    out = torch.empty(b, t, h, v.shape[-1], dtype=dtype)
    for i in range(t):
        if i in starts:
            state = torch.zeros_like(state)
        state = decay[:, i].unsqueeze(-1) * state
        update = (v[:, i] - torch.einsum("bhk,bhkv->bhv", r(k[:, i]), r(state))) * beta[:, i, :, None]
        state = state + r(k[:, i]).unsqueeze(-1) * r(update).unsqueeze(-2)
        out[:, i] = torch.einsum("bhk,bhkv->bhv", r(q[:, i]), r(state))
    return out


def sim_kda(ins, world, dtype=torch.float64, wire=None, carry=True, operands=None):
    """Each TP position's sequence (its CP group's chunks in order) through KDA; each rank's chunk
    summed over its TP group. `wire` rounds the tokens; without `carry` every chunk starts from zero."""
    tp, cp = grid(world)
    s = ins[0][0].shape[1]
    part = [None] * world
    for t in range(tp):
        members = [c * tp + t for c in range(cp)]
        q, k, v, g, beta = (torch.cat([ins[r][j] for r in members], dim=1) for j in range(5))
        if wire is not None:
            q, k, v, g, beta = (x.to(wire).to(x.dtype) for x in (q, k, v, g, beta))
        a_log, dt_bias = (ins[members[0]][j].to(dtype) for j in (5, 6))
        h, kd = q.shape[2], q.shape[3]
        qn = F.normalize(q.to(dtype), dim=-1) * kd**-0.5
        kn = F.normalize(k.to(dtype), dim=-1)
        decay = torch.exp(-5.0 * torch.sigmoid(a_log.exp().view(h, 1) * (g.to(dtype) + dt_bias.view(h, kd))))
        starts = () if carry else tuple(range(0, cp * s, s))
        o = delta_rule(qn, kn, v.to(dtype), beta.to(dtype).sigmoid(), decay, dtype, starts, operands)
        for c, r in enumerate(members):
            part[r] = o[:, c * s : (c + 1) * s]
    return [(sum(part[(r // tp) * tp + j] for j in range(tp)),) for r in range(world)]


def sim_gdn(ins, world, dtype=torch.float64, wire=None, carry=True, operands=None):
    """The whole sequence (the ranks' tokens in order) through Gated DeltaNet; each rank's tokens."""
    q, k, v, gate, beta = (torch.cat([i[j] for i in ins], dim=1) for j in range(5))
    if wire is not None:
        q, k, v, gate, beta = (x.to(wire).to(x.dtype) for x in (q, k, v, gate, beta))
    a_log, dt_bias = (torch.cat([i[j] for i in ins]).to(dtype) for j in (5, 6))
    kd, s = q.shape[-1], ins[0][0].shape[1]
    qn = F.normalize(q.to(dtype), dim=-1, eps=1e-6) * kd**-0.5
    kn = F.normalize(k.to(dtype), dim=-1, eps=1e-6)
    decay = torch.exp(-a_log.exp() * F.softplus(gate.to(dtype) + dt_bias)).unsqueeze(-1)
    starts = () if carry else tuple(range(0, world * s, s))
    o = delta_rule(qn, kn, v.to(dtype), beta.to(dtype), decay, dtype, starts, operands)
    return [(o[:, r * s : (r + 1) * s],) for r in range(world)]


def sim_cso(ins, world, dtype=torch.float64, wire=None, probs=None):
    """Every range's W*spb queries (rank order) over its window of the key sequence (each range's
    first CHUNK keys, range after range). `probs` rounds the unnormalised probabilities before
    they weight the values (flash-attention order)."""
    _, _, k_ranges, ranges, clip, _ = ins[0]
    tokens, hq, d = ins[0][0].shape
    hkv, spb = ins[0][1].shape[1], tokens // ranges
    query, key_value = (torch.stack([i[j] for i in ins]) for j in (0, 1))
    if wire is not None:
        query, key_value = (x.to(wire).to(x.dtype) for x in (query, key_value))
    q = query.to(dtype).view(world, ranges, spb, hq, d).transpose(0, 1).reshape(ranges, world * spb, hq, d)
    kv = (
        key_value.to(dtype)
        .view(world, ranges, spb, hkv, 2 * d)
        .transpose(0, 1)
        .reshape(ranges, world * spb, hkv, 2 * d)
    )
    keys = kv[:, :clip].reshape(ranges * clip, hkv, 2 * d).repeat_interleave(hq // hkv, dim=1)
    out = torch.empty_like(q)
    for i, (start, end) in enumerate(k_ranges.tolist()):
        scores = torch.einsum("qhd,khd->hqk", q[i], keys[start:end, :, :d]) * d**-0.5
        p = (scores - scores.amax(-1, keepdim=True)).exp()
        total = p.sum(-1, keepdim=True)
        if probs is not None:
            p = p.to(probs).to(dtype)
        out[i] = torch.einsum("hqk,khd->qhd", p / total, keys[start:end, :, d:])
    out = out.view(ranges, world, spb, hq, d).transpose(0, 1)
    return [(out[r].reshape(ranges * spb, hq, d),) for r in range(world)]


SIMS = {KDA: sim_kda, GDN: sim_gdn, CSO: sim_cso}
RUNS = {2: PROBLEM_IDS, 4: (KDA,)}  # W=4 gives problem 74 its TP group


def _run_references(rank: int, world: int, store: str, out_dir: str, seeds) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    for pid in RUNS[world]:
        module = tasks.load_reference(pid)
        outs = [module.solution(*rank_input(pid, world, rank, seed)) for seed in seeds]
        torch.save(outs, os.path.join(out_dir, f"{pid}.{world}.{rank}.pt"))
    dist.barrier()
    os._exit(0)  # every file is written; skip the slow interpreter and gloo teardown


def run_references(out_dir: str, world: int) -> dict:
    multiprocessing.get_context("forkserver").set_forkserver_preload(["torch", "torch.distributed", "tasks"])
    mp.start_processes(
        _run_references,
        args=(world, os.path.join(out_dir, f"store{world}"), out_dir, list(SEEDS)),
        nprocs=world,
        start_method="forkserver",
    )
    return {
        pid: [torch.load(os.path.join(out_dir, f"{pid}.{world}.{r}.pt"), weights_only=False) for r in range(world)]
        for pid in RUNS[world]
    }


@pytest.fixture(scope="module")
def reference_runs():
    with tempfile.TemporaryDirectory() as out_dir:
        yield {world: run_references(out_dir, world) for world in RUNS}


def _within(got: torch.Tensor, expected: torch.Tensor, tol: Tolerance) -> bool:
    """The evaluator's rule: |got - expected| <= allowed, element by element, in float64."""
    g, e = got.double(), expected.double()
    return bool(((g - e).abs() <= checks.allowed_error(e, tol)).all())


@pytest.mark.parametrize("world, pid", [(w, pid) for w, pids in RUNS.items() for pid in pids])
def test_reference_matches_whole_problem_computation(world, pid, reference_runs):
    problem = tasks.get(pid)
    tol = problem.tolerance_for(0, world)
    for seed in SEEDS:
        exact = SIMS[pid](rank_inputs(pid, world, seed), world)
        for rank in range(world):
            got = reference_runs[world][pid][rank][seed]
            assert got.shape == exact[rank][0].shape and got.dtype == getattr(torch, problem.dtype), (seed, rank)
            assert _within(got, exact[rank][0], tol), f"seed {seed} rank {rank}"
            # Far inside the tolerance: fp32 throughout, one rounding to bf16 (a bf16 TP sum at W=4).
            assert _within(got, exact[rank][0], Tolerance(atol=0.02, rtol=2.0**-6, atol_unit="rms"))


@pytest.mark.parametrize("world", [2, 4])
@pytest.mark.parametrize("pid", [KDA, GDN])
def test_the_state_handed_across_ranks_matters_and_bf16_operands_pass(pid, world):
    """Starting each rank's chunk from a zero state fails, at the ranks after the first, as fp8
    tokens on the wire do; bf16 operands in the state products (fp32 state) pass."""
    tol = tasks.get(pid).tolerance_for(0, world)
    sim = SIMS[pid]
    ins = rank_inputs(pid, world)
    exact = sim(ins, world)
    alone = sim(ins, world, carry=False)
    tp, _ = grid(world) if pid == KDA else (1, world)
    assert all(_within(a[0], e[0], tol) for a, e in zip(alone[:tp], exact[:tp]))  # the first chunk
    assert not any(_within(a[0], e[0], tol) for a, e in zip(alone[tp:], exact[tp:]))
    fp8 = sim(ins, world, dtype=torch.float32, wire=torch.float8_e4m3fn)
    assert not all(_within(f[0].bfloat16(), e[0], tol) for f, e in zip(fp8, exact))
    bf16 = sim(ins, world, dtype=torch.float32, operands=torch.bfloat16)
    assert all(_within(b[0].bfloat16(), e[0], tol) for b, e in zip(bf16, exact))


@pytest.mark.parametrize("world", [2, 4])
def test_cso_tolerance_admits_flash_order_and_fails_fp8(world):
    tol = tasks.get(CSO).tolerance_for(0, world)
    for seed in range(2):
        ins = rank_inputs(CSO, world, seed)
        exact = sim_cso(ins, world)
        flash = sim_cso(ins, world, dtype=torch.float32, probs=torch.bfloat16)
        assert all(_within(f[0].bfloat16(), e[0], tol) for f, e in zip(flash, exact))
        for kw in ({"wire": torch.float8_e4m3fn}, {"probs": torch.float8_e4m3fn}):
            low = sim_cso(ins, world, dtype=torch.float32, **kw)
            assert not all(_within(x[0].bfloat16(), e[0], tol) for x, e in zip(low, exact)), kw
