"""Collective and tensor-parallel problems of the suite: metadata, rooflines checked by brute force,
and every reference checked against an independent float64 simulation on a real gloo group.

The simulations below restate each problem's mathematics for all ranks at once, without
torch.distributed. They serve three purposes: (1) the references must agree with them within each
problem's tolerance (bit for bit where the tolerance is bitwise); (2) a Jacobian of a simulation tells
which input elements every output element depends on, from which NVLink and HBM lower bounds are
counted independently of the roofline formulas; (3) counting their arithmetic gives the FLOPs.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import tempfile
from collections.abc import Callable

import pytest
import torch
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

import tasks
from evaluator import checks
from tasks.spec import BITWISE, LEVELS, PARALLELISM, InputContext, Tolerance

COLLECTIVES = ("allreduce", "allgather", "broadcast", "reduce", "scatter", "gather", "reducescatter", "alltoall")
TP_AND_FUSED = (
    "layernorm_backward",
    "embedding_lookup",
    "allgather_gemm_AT",
    "allgather_gemm",
    "gemm_allreduce",
    "gemm_allgather",
    "combined_sharded_gemms",
    "gemm_reducescatter",
    "rope_allgather",
    "tp_rms_norm",
    "blocked_fp8_quantize",
    "blocked_fp8_dequantize",
    "reducescatter_fused_rmsnorm",
    "gemv_decode",
)
PROBLEM_IDS = COLLECTIVES + TP_AND_FUSED
PKB_IDS = {
    "allreduce": 1,
    "allgather": 2,
    "broadcast": 3,
    "reduce": 4,
    "scatter": 5,
    "gather": 6,
    "reducescatter": 7,
    "alltoall": 8,
    "layernorm_backward": 9,
    "embedding_lookup": 10,
    "allgather_gemm_AT": 11,
    "allgather_gemm": 12,
    "gemm_allreduce": 13,
    "gemm_allgather": 14,
    "combined_sharded_gemms": 15,
    "gemm_reducescatter": 16,
    "rope_allgather": 17,
    "tp_rms_norm": 18,
    "blocked_fp8_quantize": 19,
    "blocked_fp8_dequantize": 20,
    "reducescatter_fused_rmsnorm": 45,
    "gemv_decode": 46,
}
FP8 = torch.float8_e4m3fn
BF16 = torch.bfloat16
# Output dtypes of each problem, in output order (the references are checked against these).
OUTPUT_DTYPES: dict[str, tuple[torch.dtype, ...]] = {pid: (BF16,) for pid in PROBLEM_IDS}
OUTPUT_DTYPES.update(
    layernorm_backward=(BF16, BF16),
    rope_allgather=(BF16, BF16),
    blocked_fp8_quantize=(FP8, torch.float32),
    blocked_fp8_dequantize=(torch.float32,),
)


# ---------------------------------------------------------------------------------------------
# Simulations: sim(inputs of every rank, W) -> outputs of every rank (each a tuple), in float64.
# ---------------------------------------------------------------------------------------------

SIMS: dict[str, Callable] = {}


def sim(*problem_ids: str):
    def register(fn):
        for pid in problem_ids:
            SIMS[pid] = fn
        return fn

    return register


def total(tensors):
    out = tensors[0]
    for t in tensors[1:]:
        out = out + t
    return out


def fp8_round(z: torch.Tensor) -> torch.Tensor:
    """Round to float8_e4m3fn; under autograd the gradient passes straight through, so that the
    Jacobian still sees which inputs a quantized value comes from."""
    rounded = z.detach().to(FP8).to(z.dtype)
    return z + (rounded - z).detach() if z.requires_grad else rounded


@sim("allreduce")
def _(ins, w):
    s = total([x[0] for x in ins])
    return [(s,) for _ in range(w)]


@sim("allgather")
def _(ins, w):
    stacked = torch.stack([x[0] for x in ins])
    return [(stacked,) for _ in range(w)]


@sim("broadcast")
def _(ins, w):
    src = ins[0][1]
    return [(ins[src][0],) for _ in range(w)]


@sim("reduce")
def _(ins, w):
    dst = ins[0][1]
    s = total([x[0] for x in ins])
    return [(s if r == dst else ins[r][0],) for r in range(w)]


@sim("scatter")
def _(ins, w):
    src = ins[0][1]
    return [(ins[src][0][r],) for r in range(w)]


@sim("gather")
def _(ins, w):
    dst = ins[0][1]
    stacked = torch.stack([x[0] for x in ins])
    return [(stacked if r == dst else ins[r][0],) for r in range(w)]


@sim("reducescatter")
def _(ins, w):
    chunks = total([x[0] for x in ins]).chunk(w, dim=0)
    return [(chunks[r],) for r in range(w)]


@sim("alltoall")
def _(ins, w):
    return [(torch.stack([ins[j][0][r] for j in range(w)]),) for r in range(w)]


@sim("layernorm_backward")
def _(ins, w):
    d_gamma = total([(dy * x_hat).sum(dim=0) for x_hat, dy in ins])
    d_beta = total([dy.sum(dim=0) for _, dy in ins])
    return [(d_gamma, d_beta) for _ in range(w)]


@sim("embedding_lookup")
def _(ins, w):
    table = torch.cat([shard for _, shard in ins])
    rows = ins[0][1].shape[0]
    outs = []
    for indices, _ in ins:
        grouped = indices[torch.argsort(indices // rows, stable=True)]
        outs.append((table[grouped],))
    return outs


@sim("allgather_gemm", "allgather_gemm_AT")
def _(ins, w):
    a = torch.cat([a_local for a_local, _ in ins], dim=1)
    return [(a @ b,) for _, b in ins]


@sim("gemm_allreduce")
def _(ins, w):
    c = total([a @ b for a, b in ins])
    return [(c,) for _ in range(w)]


@sim("gemm_allgather")
def _(ins, w):
    c = torch.cat([a @ b for a, b in ins], dim=1)
    return [(c,) for _ in range(w)]


@sim("gemm_reducescatter")
def _(ins, w):
    chunks = total([a @ b for a, b in ins]).chunk(w, dim=0)
    return [(chunks[r],) for r in range(w)]


@sim("combined_sharded_gemms")
def _(ins, w):
    m_local = ins[0][0].shape[0] // w
    outs = []
    for r, (_, w1, w2) in enumerate(ins):
        x_rows = torch.cat([x[r * m_local : (r + 1) * m_local] for x, _, _ in ins], dim=1)
        outs.append((F.silu(x_rows @ w1) @ w2,))
    return outs


@sim("rope_allgather")
def _(ins, w):
    def rotate(x, cos, sin):
        half = x.shape[-1] // 2
        rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
        return x * cos.unsqueeze(2) + rotated * sin.unsqueeze(2)

    q = torch.cat([rotate(q, c, s) for q, _, c, s in ins], dim=1)
    k = torch.cat([rotate(k, c, s) for _, k, c, s in ins], dim=1)
    return [(q, k) for _ in range(w)]


def tp_rms_sum_squares(ins, w):
    """The only cross-rank quantity of tp_rms_norm: every row's sum of squares over all ranks."""
    s = total([(x * x).sum(dim=-1) for x, _, _ in ins])
    return [(s,) for _ in range(w)]


@sim("tp_rms_norm")
def _(ins, w):
    (sum_squares,) = tp_rms_sum_squares(ins, w)[0]
    n_global = ins[0][0].shape[-1] * w
    scale = torch.rsqrt(sum_squares / n_global + ins[0][2])
    return [(weight * (x * scale[:, None]),) for x, weight, _ in ins]


@sim("blocked_fp8_quantize")
def _(ins, w):
    ys, ss = [], []
    for x, block in ins:
        blocks = x.reshape(-1, block)
        s = blocks.abs().amax(dim=1) / 448.0
        # y is differentiated at a fixed scale: otherwise the block's largest value, always +-448,
        # would have a zero derivative and look independent of its input.
        ys.append(fp8_round(blocks / s.detach()[:, None]).reshape(x.shape))
        ss.append(s.reshape(x.shape[0], -1))
    y, s = torch.cat(ys), torch.cat(ss)
    return [(y, s) for _ in range(w)]


@sim("blocked_fp8_dequantize")
def _(ins, w):
    xs = [(y.reshape(-1, block) * s.reshape(-1, 1)).reshape(y.shape) for y, s, block in ins]
    return [(torch.stack([xs[j][r] for j in range(w)]),) for r in range(w)]


@sim("reducescatter_fused_rmsnorm")
def _(ins, w):
    gamma, eps = ins[0][1], ins[0][2]
    mean = total([x for x, _, _ in ins]) / w
    outs = []
    for chunk in mean.chunk(w):
        x = chunk.reshape(-1, gamma.numel())
        rms = torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + eps)
        outs.append((x * rms * gamma,))
    return outs


@sim("gemv_decode")
def _(ins, w):
    logits = torch.cat([h @ weight.t() + bias for h, weight, bias in ins], dim=1)
    return [(logits,) for _ in range(w)]


# Exchanged intermediates cheaper to move than any output or input (see the value bound below).
INTERMEDIATES = {"tp_rms_norm": (tp_rms_sum_squares, 4)}


# ---------------------------------------------------------------------------------------------
# Inputs without a process group.
# ---------------------------------------------------------------------------------------------


def rank_inputs(pid: str, dims: dict, world: int, seed: int = 0) -> list[tuple]:
    module = tasks.load_reference(pid)
    problem = tasks.get(pid)
    made = []
    for rank in range(world):
        rng = torch.Generator().manual_seed(1000 * seed + rank)
        shared = torch.Generator().manual_seed(1000 * seed + 999)
        ctx = InputContext(rank, world, dims, getattr(torch, problem.dtype), torch.device("cpu"), rng, shared)
        made.append(tuple(module.make_inputs(ctx)))
    return made


def as_float64(ins: list[tuple]) -> list[tuple]:
    return [tuple(t.double() if isinstance(t, torch.Tensor) and t.is_floating_point() else t for t in x) for x in ins]


# ---------------------------------------------------------------------------------------------
# Counting: FLOPs of a simulation, and NVLink / HBM lower bounds from its Jacobian.
# ---------------------------------------------------------------------------------------------

ELEMENTWISE = {"add", "sub", "mul", "div", "pow", "rsqrt", "sqrt", "abs", "silu", "exp", "reciprocal"}
REDUCTIONS = {"sum", "mean", "amax"}


class ArithmeticCounter(TorchDispatchMode):
    """One FLOP per element of every arithmetic op; a reduction costs (inputs - outputs)
    operations. Sign flips, copies, casts and indexing are free. Matrix products are left to
    FlopCounterMode."""

    def __init__(self):
        super().__init__()
        self.flops = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = func.overloadpacket.__name__.rstrip("_")
        if name in ELEMENTWISE:
            self.flops += out.numel()
        elif name in REDUCTIONS:
            self.flops += args[0].numel() - out.numel() + (out.numel() if name == "mean" else 0)
        return out


def count_flops_per_gpu(pid: str, ins: list[tuple], world: int) -> float:
    with FlopCounterMode(display=False) as matmuls, ArithmeticCounter() as arithmetic:
        SIMS[pid](as_float64(ins), world)
    return (matmuls.get_total_flops() + arithmetic.flops) / world


class Dependencies:
    """Which input elements each output element depends on (non-zero Jacobian entries).

    Inputs identical on every rank (replicated weights) are held everywhere and never need to
    move; integer inputs (indices) are read whole and steer the computation."""

    def __init__(
        self,
        pid: str,
        ins: list[tuple],
        world: int,
        simulate: Callable | None = None,
        out_bytes: tuple[int, ...] | None = None,
    ):
        self.world = world
        simulate = simulate or SIMS[pid]
        self.in_rank, self.in_bytes, self.in_replicated = [], [], []
        self.int_bytes = [0] * world
        leaves, layout = [], []
        for r, x in enumerate(ins):
            for i, t in enumerate(x):
                if not isinstance(t, torch.Tensor):
                    layout.append((r, i, None))
                    continue
                if not t.is_floating_point():
                    self.int_bytes[r] += t.numel() * t.element_size()
                    layout.append((r, i, None))
                    continue
                replicated = world > 1 and all(
                    torch.equal(t.view(torch.uint8), ins[q][i].view(torch.uint8)) for q in range(world)
                )
                self.in_rank += [r] * t.numel()
                self.in_bytes += [t.element_size()] * t.numel()
                self.in_replicated += [replicated] * t.numel()
                layout.append((r, i, (sum(leaf.numel() for leaf in leaves), t.shape)))
                leaves.append(t.double().reshape(-1))
        flat = torch.cat(leaves)

        def rebuild(vector):
            rebuilt = [list(x) for x in ins]
            for r, i, slot in layout:
                if slot is not None:
                    start, shape = slot
                    rebuilt[r][i] = vector[start : start + math.prod(shape)].reshape(shape)
            return [tuple(x) for x in rebuilt]

        def outputs(vector):
            per_rank = simulate(rebuild(vector), world)
            return torch.cat([o.reshape(-1) for outs in per_rank for o in outs])

        probe = simulate(rebuild(flat), world)
        sizes = out_bytes or tuple(dtype.itemsize for dtype in OUTPUT_DTYPES[pid])
        self.out_rank, self.out_slot, self.out_bytes = [], [], []
        for r, outs in enumerate(probe):
            for j, o in enumerate(outs):
                size = sizes[j]
                self.out_rank += [r] * o.numel()
                self.out_slot += [(j, p) for p in range(o.numel())]
                self.out_bytes += [size] * o.numel()
        jac = torch.autograd.functional.jacobian(outputs, flat, vectorize=True)
        self.deps = [frozenset(row.nonzero().flatten().tolist()) for row in jac]

    def moving(self, deps) -> frozenset:
        return frozenset(d for d in deps if not self.in_replicated[d])

    def input_bound(self) -> float:
        """Every rank fetches each remote input element its outputs need, once."""
        needed = [set() for _ in range(self.world)]
        for o, deps in enumerate(self.deps):
            r = self.out_rank[o]
            needed[r] |= {d for d in self.moving(deps) if self.in_rank[d] != r}
        recv = [sum(self.in_bytes[d] for d in n) for n in needed]
        leaving = [set() for _ in range(self.world)]
        for n in needed:
            for d in n:
                leaving[self.in_rank[d]].add(d)
        sent = [sum(self.in_bytes[d] for d in s) for s in leaving]
        return max(sum(recv) / self.world, max(recv), max(sent))

    def value_bound(self) -> float:
        """Every output value is computed from data where it lies and moved, partially combined on
        the way where it is a sum. A value needed on the ranks R from inputs held on the ranks S
        costs at least |S| + |R| - 2 transfers when S and R share a rank (|S| + |R| - 1 otherwise):
        every rank of S but the one that completes the value sends before it exists, every rank of
        R but that one receives after. A rank of R receives unless the value needs only its own
        data; a rank of S sends unless only it needs the value."""
        values: dict[tuple, list] = {}
        for o, deps in enumerate(self.deps):
            key = (self.out_slot[o], self.moving(deps))
            values.setdefault(key, [set(), self.out_bytes[o]])[0].add(self.out_rank[o])
        transfers = 0.0
        recv, sent = [0.0] * self.world, [0.0] * self.world
        for (_, deps), (holders, size) in values.items():
            sources = {self.in_rank[d] for d in deps}
            if not sources or (len(holders) == 1 and sources == holders):
                continue  # computed where it is needed from data held there
            transfers += size * (len(sources) + len(holders) - (2 if sources & holders else 1))
            for r in holders:
                if sources - {r}:
                    recv[r] += size
            for s in sources:
                if holders - {s}:
                    sent[s] += size
        return max(transfers / self.world, max(recv), max(sent))

    def hbm_bound(self) -> float:
        """Busiest rank: the input elements any output needs, integer inputs whole, every output."""
        read = [float(b) for b in self.int_bytes]
        for d in set().union(*self.deps):
            read[self.in_rank[d]] += self.in_bytes[d]
        written = [0.0] * self.world
        for o, size in enumerate(self.out_bytes):
            written[self.out_rank[o]] += size
        return max(r + w for r, w in zip(read, written))


# Small shapes for the brute force (the Jacobian is outputs x inputs), obeying each problem's
# divisibility rules at world sizes 2 and 4.
ROOF_DIMS = {
    "allreduce": {"M": 4, "N": 8},
    "allgather": {"M": 4, "N": 8},
    "broadcast": {"M": 4, "N": 8},
    "reduce": {"M": 4, "N": 8},
    "scatter": {"M": 4, "N": 8},
    "gather": {"M": 4, "N": 8},
    "reducescatter": {"M": 4, "N": 8},
    "alltoall": {"M": 4, "N": 8},
    "layernorm_backward": {"B": 16, "H": 8},
    "allgather_gemm_AT": {"M": 8, "N": 16, "K": 8},
    "allgather_gemm": {"M": 8, "N": 16, "K": 8},
    "gemm_allreduce": {"M": 8, "N": 8, "K": 16},
    "gemm_allgather": {"M": 8, "N": 16, "K": 8},
    "combined_sharded_gemms": {"M": 16, "H": 8, "F": 16},
    "gemm_reducescatter": {"M": 8, "N": 8, "K": 64},
    "rope_allgather": {"B": 1, "S": 3, "H": 2, "D": 8},
    "tp_rms_norm": {"M": 2, "N": 128},
    "blocked_fp8_quantize": {"M": 1, "N": 256},
    "blocked_fp8_dequantize": {"M": 1, "N": 128},
    "reducescatter_fused_rmsnorm": {"R": 2, "H": 32},
    "gemv_decode": {"T": 2, "H": 16, "V": 8},
}


def phase_totals(pid: str, dims: dict, world: int) -> tuple[float, float, float]:
    phases = tasks.get(pid).phases(dims, world)
    return (sum(p.flops for p in phases), sum(p.hbm_bytes for p in phases), sum(p.comm_bytes for p in phases))


def _close(a: float, b: float, rel: float) -> bool:
    return abs(a - b) <= rel * max(abs(a), abs(b)) + 1e-9


@pytest.mark.parametrize("world", [2, 4])
@pytest.mark.parametrize("pid", [p for p in PROBLEM_IDS if p != "embedding_lookup"])
def test_roofline_matches_brute_force(pid, world):
    dims = ROOF_DIMS[pid]
    ins = rank_inputs(pid, dims, world)
    flops, hbm, comm = phase_totals(pid, dims, world)

    counted = count_flops_per_gpu(pid, ins, world)
    # Formulas leave out per-row scalar work and similar lower-order terms: a few percent.
    assert _close(flops, counted, 0.05), f"FLOPs: formula {flops}, counted {counted}"

    deps = Dependencies(pid, ins, world)
    assert _close(hbm, deps.hbm_bound(), 1e-6), f"HBM bytes: formula {hbm}, counted {deps.hbm_bound()}"
    bounds = [deps.input_bound(), deps.value_bound()]
    if pid in INTERMEDIATES:
        exchanged, size = INTERMEDIATES[pid]
        inner = Dependencies(pid, ins, world, simulate=exchanged, out_bytes=(size,))
        bounds.append(inner.value_bound())
    assert _close(comm, min(bounds), 1e-6), f"NVLink bytes: formula {comm}, counted {min(bounds)} of {bounds}"


@pytest.mark.parametrize("world", [2, 4, 8])
def test_embedding_roofline_matches_sampled_lookups(world):
    """Indices are random, so the roofline uses expectations: compare them with the average over
    many draws of distinct remote rows per rank and distinct served rows per shard."""
    dims = {"V": 64, "D": 4, "T": 48}
    v, t = dims["V"], dims["T"]
    remote, served = [], []
    for seed in range(200):
        draw = rank_inputs("embedding_lookup", dims, world, seed=seed)
        indices = [x[0] for x in draw]
        for r, idx in enumerate(indices):
            remote.append(len({i for i in idx.tolist() if i // v != r}))
        asked = torch.cat(indices).unique()
        for s in range(world):
            served.append(int(((asked // v) == s).sum()))
    row_bytes = dims["D"] * 2
    _, hbm, comm = phase_totals("embedding_lookup", dims, world)
    mean_remote = sum(remote) / len(remote)
    mean_served = sum(served) / len(served)
    assert _close(comm, mean_remote * row_bytes, 0.03)
    assert _close(hbm, t * 8 + mean_served * row_bytes + t * row_bytes, 0.03)
    assert phase_totals("embedding_lookup", dims, world)[0] == 0


# ---------------------------------------------------------------------------------------------
# References against the simulations, on a real gloo group.
# ---------------------------------------------------------------------------------------------


def _run_references(rank: int, world: int, store: str, out_dir: str) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    for pid in PROBLEM_IDS:
        problem = tasks.get(pid)
        dims = dict(problem.shapes[0].dims)
        ins = rank_inputs(pid, dims, world)[rank]
        kept = tuple(t.clone() if isinstance(t, torch.Tensor) else t for t in ins)
        out = tasks.load_reference(pid).solution(*ins)
        torch.save({"inputs": kept, "output": out}, os.path.join(out_dir, f"{pid}.{rank}.pt"))
    dist.barrier()
    os._exit(0)  # every file is written; skip the slow interpreter and gloo teardown


def _within(got: torch.Tensor, expected: torch.Tensor, tol: Tolerance) -> bool:
    """The evaluator's rule: |got - expected| <= the tolerance's allowed error, or equal bits."""
    if tol.bitwise:
        return torch.equal(got.view(torch.uint8), expected.to(got.dtype).view(torch.uint8))
    diff = (got.double() - expected.double()).abs()
    return bool((diff <= checks.allowed_error(expected, tol)).all())


@pytest.fixture(scope="module", params=[2, 4])
def reference_runs(request):
    world = request.param
    with tempfile.TemporaryDirectory() as out_dir:
        # Ranks fork from a server that has imported torch once, instead of importing it each.
        multiprocessing.get_context("forkserver").set_forkserver_preload(["torch", "torch.distributed", "tasks"])
        mp.start_processes(
            _run_references,
            args=(world, os.path.join(out_dir, "store"), out_dir),
            nprocs=world,
            start_method="forkserver",
        )
        runs = {}
        for pid in PROBLEM_IDS:
            saved = [torch.load(os.path.join(out_dir, f"{pid}.{r}.pt"), weights_only=False) for r in range(world)]
            runs[pid] = ([s["inputs"] for s in saved], [s["output"] for s in saved])
        yield world, runs


@pytest.mark.parametrize("pid", PROBLEM_IDS)
def test_reference_matches_float64_simulation(pid, reference_runs):
    world, runs = reference_runs
    ins, outs = runs[pid]
    problem = tasks.get(pid)
    exact = SIMS[pid](as_float64(ins), world)
    for rank in range(world):
        got = outs[rank] if isinstance(outs[rank], tuple) else (outs[rank],)
        assert tuple(o.dtype for o in got) == OUTPUT_DTYPES[pid]
        for j, (g, e) in enumerate(zip(got, exact[rank], strict=True)):
            assert g.shape == e.shape, f"rank {rank} output {j}: shape {tuple(g.shape)} != {tuple(e.shape)}"
            assert _within(g, e, problem.tolerance_for(j, world)), f"rank {rank} output {j} outside the tolerance"


def test_dropping_one_rank_is_outside_the_tolerance(reference_runs):
    """A solution that leaves out one rank's contribution to a reduction must be judged wrong."""
    world, runs = reference_runs
    for pid in (
        "reduce",
        "reducescatter",
        "gemm_allreduce",
        "gemm_reducescatter",
        "layernorm_backward",
        "reducescatter_fused_rmsnorm",
        "tp_rms_norm",
    ):
        ins, outs = runs[pid]
        last = [
            tuple(torch.zeros_like(t) if isinstance(t, torch.Tensor) and t.is_floating_point() else t for t in x)
            for x in as_float64(ins[-1:])
        ]
        if pid == "tp_rms_norm":
            last = [(last[0][0], as_float64(ins[-1:])[0][1], last[0][2])]  # zero activations, keep weights
        wrong = SIMS[pid](as_float64(ins[:-1]) + last, world)
        rank = ins[0][1] if pid == "reduce" else 0
        reference = outs[rank] if torch.is_tensor(outs[rank]) else outs[rank][0]
        assert not _within(wrong[rank][0], reference, tasks.get(pid).tolerance_for(0, world)), pid


# ---------------------------------------------------------------------------------------------
# Metadata.
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("pid", PROBLEM_IDS)
def test_metadata(pid):
    problem = tasks.get(pid)
    assert problem.pkb_id == PKB_IDS[pid]
    assert problem.level in LEVELS and problem.parallelism in PARALLELISM
    assert problem.level == 1 if pid in COLLECTIVES else problem.level >= 2
    assert problem.origin and len(problem.description) > 150
    assert {2, 4, 8} <= set(problem.world_sizes)
    assert problem.shapes[0] != problem.default_shape
    if isinstance(problem.tolerance, Tolerance):
        tolerances = (problem.tolerance,)
    else:
        tolerances = problem.tolerance
        assert len(tolerances) == len(OUTPUT_DTYPES[pid])
    for tol in tolerances:
        assert tol.bitwise or "measured" in tol.reason.lower(), "a tolerance needs its measurement"
        assert tol.bitwise == (tol == BITWISE)
    for shape in problem.shapes:
        for world in problem.world_sizes:
            phases = problem.phases(shape.dims, world)
            assert phases and all(p.flops + p.hbm_bytes + p.comm_bytes > 0 for p in phases)


@pytest.mark.parametrize("pid", PROBLEM_IDS)
def test_first_shape_is_the_smallest(pid):
    problem = tasks.get(pid)
    sizes = [sum(phase_totals(pid, s.dims, 4)[1:]) for s in problem.shapes]
    assert sizes[0] == min(sizes) and sizes[0] < 4 << 20
