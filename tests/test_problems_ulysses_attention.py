"""Public problem 39 and its corrected variant: `ulysses_attention_e2e`, the public contract (per
token, a softmax over each group of NH/W heads), and `ulysses_sequence_attention` (attention over
the sequence, as DeepSpeed-Ulysses does). Metadata, the public contract's roofline against a hand
calculation at its default shape (W = 4, bf16 = 2 bytes), the draws, and both references on a real
gloo group (W = 2, and W = 1 on one-rank groups) against the whole problem computed without
torch.distributed in float64."""

from __future__ import annotations

import math
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
from tasks.spec import RTOL_LIMIT, InputContext, Tolerance

E2E, SEQ = "ulysses_attention_e2e", "ulysses_sequence_attention"
PROBLEM_IDS = (E2E, SEQ)
WORLD = 2
SEEDS = range(3)


# ---------------------------------------------------------------------------------------------
# Metadata.
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("pid", PROBLEM_IDS)
def test_metadata(pid):
    p = tasks.get(pid)
    assert p.level == 5 and p.parallelism == "SP" and p.origin and len(p.description) > 150
    assert "bound" in p.description and "39" in p.description and len(p.shapes) >= 3
    tol = p.tolerance
    assert isinstance(tol, Tolerance) and not tol.relaxation and tol.rtol <= RTOL_LIMIT[p.dtype]
    hbm = [sum(ph.hbm_bytes for ph in p.phases(s.dims, 4)) for s in p.shapes]
    assert hbm[0] == min(hbm) and p.shapes[0].name == "small" and p.shapes[0] != p.default_shape
    for shape in p.shapes:
        for world in p.world_sizes:
            assert shape.dims["NH"] % world == 0
            assert all(ph.flops + ph.hbm_bytes > 0 for ph in p.phases(shape.dims, world))


def test_public_contract_metadata():
    p = tasks.get(E2E)
    assert p.pkb_id == 39 and {1, 2, 4} <= set(p.world_sizes)
    assert "measured" in p.tolerance.reason.lower()
    assert "no communication" in p.description.lower() and SEQ in p.description
    # Nothing crosses ranks at any shape and world size.
    assert all(ph.comm_bytes == 0 for s in p.shapes for w in p.world_sizes for ph in p.phases(s.dims, w))


def test_corrected_variant_has_no_public_id():
    p = tasks.get(SEQ)
    assert p.pkb_id is None and "corrected variant" in p.description and E2E in p.description
    assert all(t.pkb_id != 39 or t.id == E2E for t in tasks.problems().values())


# ---------------------------------------------------------------------------------------------
# The public contract's roofline against a hand calculation (default shape, W = 4).
# ---------------------------------------------------------------------------------------------


def phases(pid: str, world: int = 4, shape: str = "default") -> list[tuple[float, float, float]]:
    p = tasks.get(pid)
    return [(ph.flops, ph.hbm_bytes, ph.comm_bytes) for ph in p.phases(p.shape(shape).dims, world)]


def bound(pid: str, world: int = 4, shape: str = "default") -> str:
    p = tasks.get(pid)
    return roofline(p.phases(p.shape(shape).dims, world), profile("h100")).bound.value


def test_roofline_of_public_contract():
    # B = 4, S = 2048, NH = 16, D = 64: H = 1024, X = 4 * 2048 * 1024 = 8,388,608 elements; W = 4
    # leaves groups of G = 4 heads.
    # qkv projection: 2 * X * 3H FLOPs; hidden states and w_qkv read, q, k, v written.
    # head groups: per token 4 groups of 4 x 4 scores of 64-long products, and as many for v:
    #   4 * 2 * 2 * 4 * 4 * 64 = 16,384 = 4 * G * H FLOPs per token; q, k, v read, output written.
    # output projection: 2 * X * H FLOPs; attention output and w_o read, result written.
    assert phases(E2E) == [
        (51_539_607_552, (8_388_608 * 4 + 3 * 1024 * 1024) * 2, 0),
        (8192 * 16_384, 4 * 8_388_608 * 2, 0),
        (17_179_869_184, (2 * 8_388_608 + 1024 * 1024) * 2, 0),
    ]
    assert phases(E2E)[1][0] == 134_217_728
    # On an H100: 52.1 us of tensor-core time, 20.0 us of HBM, 17.4 us of tensor-core time.
    assert bound(E2E) == "compute" and bound(E2E, shape="large") == "compute"
    assert bound(E2E, shape="small") == "hbm"
    times = roofline(tasks.get(E2E).phases(tasks.get(E2E).default_shape.dims, 4), profile("h100")).phases
    assert [p.bound.value for p in times] == ["compute", "hbm", "compute"]
    assert [round(p.time_s * 1e6, 1) for p in times] == [52.1, 20.0, 17.4]
    # One rank: one group of all 16 heads, four times the head-group FLOPs; nothing else changes.
    one = phases(E2E, 1)
    assert one[1][0] == 4 * phases(E2E)[1][0] and one[0] == phases(E2E)[0] and one[2] == phases(E2E)[2]


# ---------------------------------------------------------------------------------------------
# The draws.
# ---------------------------------------------------------------------------------------------


def rank_inputs(pid: str, world: int, seed: int = 0, shape: str = "small") -> list[tuple]:
    problem, module = tasks.get(pid), tasks.load_reference(pid)
    dims = dict(problem.shape(shape).dims)
    made = []
    for rank in range(world):
        rng = torch.Generator().manual_seed(1000 * seed + rank)
        shared = torch.Generator().manual_seed(1000 * seed + 999)
        ctx = InputContext(rank, world, dims, getattr(torch, problem.dtype), torch.device("cpu"), rng, shared)
        made.append(tuple(module.make_inputs(ctx)))
    return made


def same(a: tuple, b: tuple) -> bool:
    return all(torch.equal(x, y) if isinstance(x, torch.Tensor) else x == y for x, y in zip(a, b))


@pytest.mark.parametrize("pid", PROBLEM_IDS)
def test_draws_are_reproducible_and_random(pid):
    first, again, other = rank_inputs(pid, WORLD, 0), rank_inputs(pid, WORLD, 0), rank_inputs(pid, WORLD, 1)
    assert all(same(a, b) for a, b in zip(first, again))
    assert not same(first[0], other[0])
    nh = tasks.get(pid).shapes[0].dims["NH"]
    for rank in first:
        assert rank[3:] == (None, nh, False)  # the public call: group None, num_heads, causal False
        for t in rank[:3]:
            assert t.dtype == torch.bfloat16 and float(t.float().std()) > 0
    # Every rank its own tokens, one model.
    assert not torch.equal(first[0][0], first[1][0])
    assert torch.equal(first[0][1], first[1][1]) and torch.equal(first[0][2], first[1][2])


@pytest.mark.parametrize("world", [1, 2, 4, 8])
def test_public_contract_outputs_are_of_unit_size(world):
    """The v rows grow with the head group (sqrt(NH/W)), so outputs stay of unit size at every W."""
    for shape in ("small", "pkb"):
        ins = rank_inputs(E2E, world, 0, shape)
        nh, h = ins[0][4], ins[0][1].shape[1]
        v_rows = ins[0][1][2 * h :].double()
        assert float(v_rows.std()) == pytest.approx(math.sqrt(nh / world / h), rel=0.05)
        for rank in ins[: min(world, 2)]:
            rms = float(head_group_attention64(*rank[:3], nh, world).pow(2).mean().sqrt())
            assert 0.8 < rms < 1.3, (shape, rms)


# ---------------------------------------------------------------------------------------------
# Whole-problem computations in float64.
# ---------------------------------------------------------------------------------------------


def head_group_attention64(hidden, w_qkv, w_o, num_heads, world, causal=False, dtype=torch.float64):
    """Every token's heads attending to that token's heads: scores (B, S, NH, NH) between them,
    heads of other groups (and, under causal, later heads of the group) masked out, softmax over
    heads. In `dtype` throughout (bf16: the public reference's arithmetic)."""
    x = hidden.to(dtype)
    b, s, h = x.shape
    d = h // num_heads
    q, k, v = F.linear(x, w_qkv.to(dtype)).view(b, s, 3, num_heads, d).unbind(2)
    scores = torch.einsum("bsid,bsjd->bsij", q, k) * d**-0.5
    group = torch.arange(num_heads) // (num_heads // world)
    masked = group[:, None] != group[None, :]
    if causal and world * s > 1:
        masked |= torch.arange(num_heads)[None, :] > torch.arange(num_heads)[:, None]
    heads = torch.einsum("bsij,bsjd->bsid", scores.masked_fill(masked, float("-inf")).softmax(-1), v)
    return F.linear(heads.reshape(b, s, h), w_o.to(dtype))


def sequence_attention64(ins: list[tuple]) -> list[torch.Tensor]:
    """Plain multi-head attention over the whole sequence (the ranks' slices side by side), each
    rank's slice of the result."""
    hidden = torch.cat([i[0] for i in ins], dim=1).double()
    w_qkv, w_o, nh = ins[0][1].double(), ins[0][2].double(), ins[0][4]
    b, length, h = hidden.shape
    q, k, v = (t.transpose(1, 2) for t in F.linear(hidden, w_qkv).view(b, length, 3, nh, h // nh).unbind(2))
    out = F.linear(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, length, h), w_o)
    return list(out.chunk(len(ins), dim=1))


def _run_references(rank: int, world: int, store: str, out_dir: str, seeds) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    alone = [dist.new_group([r]) for r in range(world)][rank]  # every rank creates every group
    e2e, seq = tasks.load_reference(E2E), tasks.load_reference(SEQ)
    outs = {}
    for seed in seeds:
        outs[SEQ, WORLD, False, seed] = seq.solution(*rank_inputs(SEQ, world, seed)[rank])
        mine = list(rank_inputs(E2E, world, seed)[rank])
        single = list(rank_inputs(E2E, 1, seed)[0])
        single[3] = alone
        for causal in (False, True):
            mine[5] = single[5] = causal
            outs[E2E, WORLD, causal, seed] = e2e.solution(*mine)
            outs[E2E, 1, causal, seed] = e2e.solution(*single)
    # A one-token sequence on one rank: the public code leaves it unmasked under causal.
    single[0] = single[0][:, :1].contiguous()
    outs[E2E, 1, "one token"] = e2e.solution(*single)
    torch.save(outs, os.path.join(out_dir, f"{rank}.pt"))
    dist.barrier()
    os._exit(0)  # every file is written; skip the slow interpreter and gloo teardown


@pytest.fixture(scope="module")
def reference_runs():
    with tempfile.TemporaryDirectory() as out_dir:
        multiprocessing.get_context("forkserver").set_forkserver_preload(["torch", "torch.distributed", "tasks"])
        mp.start_processes(
            _run_references,
            args=(WORLD, os.path.join(out_dir, "store"), out_dir, list(SEEDS)),
            nprocs=WORLD,
            start_method="forkserver",
        )
        yield [torch.load(os.path.join(out_dir, f"{r}.pt"), weights_only=False) for r in range(WORLD)]


def within(got: torch.Tensor, expected: torch.Tensor, tol: Tolerance) -> bool:
    """The evaluator's rule: |got - expected| <= allowed, element by element, in float64."""
    g, e = got.double(), expected.double()
    return g.shape == e.shape and bool(((g - e).abs() <= checks.allowed_error(e, tol)).all())


def test_public_contract_reference_matches_head_group_attention(reference_runs):
    """W = 2 and W = 1, with and without the causal flag, against float64."""
    tol = tasks.get(E2E).tolerance_for(0, WORLD)
    for seed in SEEDS:
        for world in (1, WORLD):
            ins = rank_inputs(E2E, world, seed)
            for causal in (False, True):
                for rank in range(WORLD):
                    got = reference_runs[rank][E2E, world, causal, seed]
                    exact = head_group_attention64(*ins[rank % world][:3], ins[0][4], world, causal)
                    assert got.dtype == torch.bfloat16 and got.shape == ins[0][0].shape
                    assert within(got, exact, tol), (seed, world, causal, rank)


def test_sequence_reference_matches_sequence_attention(reference_runs):
    tol = tasks.get(SEQ).tolerance_for(0, WORLD)
    for seed in SEEDS:
        exact = sequence_attention64(rank_inputs(SEQ, WORLD, seed))
        for rank in range(WORLD):
            got = reference_runs[rank][SEQ, WORLD, False, seed]
            assert got.dtype == torch.bfloat16 and within(got, exact[rank], tol), (seed, rank)


def test_causal_flag_masks_later_heads():
    """Under causal, the first head of every group attends to itself alone: its output is its own
    v; without the flag it is not."""
    hidden, w_qkv, w_o, _, nh, _ = rank_inputs(E2E, WORLD, 0)[0]
    b, s, h = hidden.shape
    d, first_heads = h // nh, torch.arange(0, nh, nh // WORLD)
    v = F.linear(hidden.double(), w_qkv.double()[2 * h :]).view(b, s, nh, d)
    eye = torch.eye(h, dtype=torch.float64)
    for causal, expected in ((True, True), (False, False)):
        heads = head_group_attention64(hidden, w_qkv, eye, nh, WORLD, causal).view(b, s, nh, d)
        assert torch.allclose(heads[:, :, first_heads], v[:, :, first_heads]) is expected


def test_one_token_on_one_rank_is_left_unmasked(reference_runs):
    """The public code masks only when the gathered sequence is longer than one token."""
    hidden, w_qkv, w_o, _, nh, _ = rank_inputs(E2E, 1, SEEDS[-1])[0]
    one = hidden[:, :1]
    unmasked = head_group_attention64(one, w_qkv, w_o, nh, 1)
    assert torch.equal(head_group_attention64(one, w_qkv, w_o, nh, 1, causal=True), unmasked)
    assert not within(head_group_attention64(hidden, w_qkv, w_o, nh, 1, causal=True)[:, :1], unmasked,
                      tasks.get(E2E).tolerance_for(0, 1))
    for rank in range(WORLD):
        assert within(reference_runs[rank][E2E, 1, "one token"], unmasked, tasks.get(E2E).tolerance_for(0, 1))


# ---------------------------------------------------------------------------------------------
# The tolerance admits the public reference's bf16 arithmetic and rejects the wrong computations.
# ---------------------------------------------------------------------------------------------


def test_tolerance_admits_bf16_arithmetic_and_rejects_other_contracts(reference_runs):
    tol = tasks.get(E2E).tolerance_for(0, WORLD)
    for seed in SEEDS:
        ins = rank_inputs(E2E, WORLD, seed)
        nh = ins[0][4]
        sequence = sequence_attention64(ins)
        for rank in range(WORLD):
            reference = reference_runs[rank][E2E, WORLD, False, seed]
            public = head_group_attention64(*ins[rank][:3], nh, WORLD, dtype=torch.bfloat16)
            assert within(public, reference, tol) and not torch.equal(public, reference)
            # One group of all heads whatever W is, attention over the sequence, an fp8 output.
            assert not within(head_group_attention64(*ins[rank][:3], nh, 1), reference, tol)
            assert not within(sequence[rank], reference, tol)
            exact = head_group_attention64(*ins[rank][:3], nh, WORLD)
            assert not within(exact.to(torch.float8_e4m3fn).double(), reference, tol)
