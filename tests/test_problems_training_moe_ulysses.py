"""Training, MoE and Ulysses problems: metadata, and every roofline checked against counts made
independently of its formula on small shapes.

To count, every rank's reference runs in this one process: ranks are threads, and the
torch.distributed collectives the references use are replaced by an in-process implementation
(`ThreadWorld`). FLOPs come from `FlopCounterMode` (matrix products) or from an explicit count of
the elementwise work over the actual tensors; HBM bytes are the bytes of the inputs read and the
outputs written, plus the intermediates the model names; NVLink bytes come from walking which
data must cross ranks: outputs of tagged inputs (every element holds its rank and index) or the
routing held in the inputs. Where inputs are random (MoE routing, split sizes) the roofline uses
expected values, and the counts are averaged over seeds and ranks.
"""

from __future__ import annotations

import copy
import math
import subprocess
import sys
import threading
import types
from dataclasses import dataclass

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

import tasks
from evaluator import checks
from tasks.spec import LEVELS, PARALLELISM, UNITS, InputContext

# id -> the public suite's numeric id
PROBLEMS = {
    "clip_grad_norm_no_ep": 21,
    "clip_grad_norm_ep": 22,
    "grad_acc_loss": 23,
    "load_balancing_loss_fn": 24,
    "importance_sampling_loss": 25,
    "moe_token_preprocess": 26,
    "moe_all2all_primitive": 27,
    "moe_pre_all2all": 28,
    "moe_post_all2all": 29,
    "fused_moe_fwd": 31,
    "ulysses_all_to_all_tensor_primitive": 33,
    "ulysses_all_gather_into_tensor_primitive": 34,
    "ulysses_gather_seq_scatter_heads": 36,
    "ulysses_gather_heads_scatter_seq": 37,
    "ulysses_gather_seq_scatter_heads_qkv": 38,
    "ddp": 40,
    "zero1_optimizer_shard": 41,
    "zero2_optimizer_shard_grad": 42,
    "fused_adam_grad_unshard_allgather": 43,
    "quantized_grad_allreduce": 44,
    "moe_ep_balanced": 49,
    "fp8_allgather_params": 53,
}
WORLDS = (2, 4)


# --------------------------------------------------------------------------- in-process ranks

_THREAD = threading.local()  # .rank: the global rank the current thread plays


class _Group:
    """A process group of threads: every collective is an exchange of per-rank payloads."""

    def __init__(self, ranks):
        self.ranks = list(ranks)
        self._barrier = threading.Barrier(len(self.ranks), timeout=60)
        self._slots: dict[int, object] = {}

    def size(self) -> int:
        return len(self.ranks)

    def index(self) -> int:
        return self.ranks.index(_THREAD.rank)

    def exchange(self, payload) -> list:
        self._slots[_THREAD.rank] = payload
        self._barrier.wait()
        everyone = [self._slots[r] for r in self.ranks]
        self._barrier.wait()  # nobody overwrites a slot before everyone has read it
        return everyone

    def abort(self) -> None:
        self._barrier.abort()


def _reduce(values: list[torch.Tensor], op) -> torch.Tensor:
    stacked = torch.stack([v.double() for v in values])
    if op == dist.ReduceOp.MIN:
        return stacked.min(dim=0).values
    if op == dist.ReduceOp.MAX:
        return stacked.max(dim=0).values
    return stacked.sum(dim=0)


def _nccl_ready(*tensors) -> None:
    # NCCL (gpu mode) rejects non-contiguous buffers that gloo (cpu mode) quietly accepts.
    for t in tensors:
        if not t.is_contiguous():
            raise ValueError(f"Tensors must be contiguous (NCCL): shape {tuple(t.shape)}, strides {t.stride()}")


class ThreadWorld:
    """The subset of torch.distributed the references call, for ranks that are threads, with
    NCCL's rules on buffers."""

    def __init__(self, world_size: int):
        self.world = _Group(range(world_size))
        self._created: dict[tuple, _Group] = {}
        self._lock = threading.Lock()
        self._calls = threading.local()

    def _group(self, group) -> _Group:
        return group or self.world

    def get_world_size(self, group=None) -> int:
        return self._group(group).size()

    def get_rank(self, group=None) -> int:
        return self._group(group).index()

    def new_group(self, ranks=None, **_):
        # Every rank creates every group in the same order: its n-th call is everyone's n-th.
        n = getattr(self._calls, "n", 0)
        self._calls.n = n + 1
        ranks = tuple(ranks if ranks is not None else self.world.ranks)
        with self._lock:
            if (n, ranks) not in self._created:
                self._created[(n, ranks)] = _Group(ranks)
            return self._created[(n, ranks)]

    def all_reduce(self, tensor, op=dist.ReduceOp.SUM, group=None, async_op=False):
        _nccl_ready(tensor)
        tensor.copy_(_reduce(self._group(group).exchange(tensor.clone()), op))

    def all_gather_into_tensor(self, output, tensor, group=None, async_op=False):
        _nccl_ready(output, tensor)
        parts = self._group(group).exchange(tensor.clone())
        output.view(-1).copy_(torch.cat([p.reshape(-1) for p in parts]))

    def all_to_all_single(
        self, output, tensor, output_split_sizes=None, input_split_sizes=None, group=None, async_op=False
    ):
        _nccl_ready(output, tensor)
        g = self._group(group)
        sizes = list(input_split_sizes) if input_split_sizes is not None else [tensor.size(0) // g.size()] * g.size()
        everyone = g.exchange(list(tensor.split(sizes)))
        output.copy_(torch.cat([blocks[g.index()] for blocks in everyone]))

    def broadcast(self, tensor, src, group=None, async_op=False):
        _nccl_ready(tensor)
        g = self._group(group)
        tensor.copy_(g.exchange(tensor.clone())[g.ranks.index(src)])

    def reduce_scatter_tensor(self, output, tensor, op=dist.ReduceOp.SUM, group=None, async_op=False):
        _nccl_ready(output, tensor)
        g = self._group(group)
        total = _reduce(g.exchange(tensor.clone()), op)
        output.copy_(total.view(g.size(), -1)[g.index()].view_as(output))

    def abort(self) -> None:
        for g in [self.world, *self._created.values()]:
            g.abort()

    def patches(self) -> dict:
        names = ("get_world_size", "get_rank", "new_group", "all_reduce", "all_gather_into_tensor")
        names += ("all_to_all_single", "broadcast", "reduce_scatter_tensor")
        found = {name: getattr(self, name) for name in names}
        found["is_initialized"] = lambda: True
        found["is_available"] = lambda: True
        found["group"] = types.SimpleNamespace(WORLD=self.world)
        return found


class _PerRankDict(dict):
    """A dict that every rank thread sees separately, as if each had its own process."""

    def _key(self, key):
        return (_THREAD.rank, key)

    def __contains__(self, key):
        return super().__contains__(self._key(key))

    def __getitem__(self, key):
        return super().__getitem__(self._key(key))

    def __setitem__(self, key, value):
        super().__setitem__(self._key(key), value)


def make_ctx(problem_id: str, rank: int, world_size: int, dims, seed: int) -> InputContext:
    problem = tasks.get(problem_id)
    return InputContext(
        rank=rank,
        world_size=world_size,
        dims=dict(dims),
        dtype=getattr(torch, problem.dtype),
        device=torch.device("cpu"),
        rng=torch.Generator().manual_seed(1000 * seed + rank),
        shared_rng=torch.Generator().manual_seed(1000 * seed + 999),
    )


def _clone(x):
    if isinstance(x, torch.Tensor):
        return x.clone()
    if isinstance(x, torch.nn.Module):
        return copy.deepcopy(x)
    if isinstance(x, (list, tuple)):
        return type(x)(_clone(v) for v in x)
    return x


@dataclass
class Rank:
    inputs: tuple
    outputs: tuple
    flops: int


def run_ranks(problem_id: str, dims, world_size: int, seed: int = 0, prepare=None) -> list[Rank]:
    """Every rank's make_inputs and reference solution, ranks as threads. `prepare(rank, inputs)`
    may replace the inputs passed to the solution (tagging); FLOPs are counted per rank."""
    ref = tasks.load_reference(problem_id)
    world = ThreadWorld(world_size)
    results: list[Rank | None] = [None] * world_size
    errors: list[BaseException] = []

    def body(rank: int) -> None:
        _THREAD.rank = rank
        try:
            inputs = ref.make_inputs(make_ctx(problem_id, rank, world_size, dims, seed))
            args = prepare(rank, inputs) if prepare else _clone(inputs)
            with FlopCounterMode(display=False) as counter:
                out = ref.solution(*args)
            results[rank] = Rank(inputs, out if isinstance(out, tuple) else (out,), counter.get_total_flops())
        except BaseException as exc:  # noqa: BLE001 - re-raised in the main thread
            errors.append(exc)
            world.abort()

    saved = {name: getattr(dist, name) for name in world.patches()}
    for name, value in world.patches().items():
        setattr(dist, name, value)
    # A reference caches its process groups per process; here every rank shares one process.
    group_cache = getattr(ref, "_GROUPS", None)
    if group_cache is not None:
        ref._GROUPS = _PerRankDict()
    try:
        threads = [threading.Thread(target=body, args=(r,)) for r in range(world_size)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        for name, value in saved.items():
            setattr(dist, name, value)
        if group_cache is not None:
            ref._GROUPS = group_cache
    if errors:
        raise errors[0]
    return results  # type: ignore[return-value]


# --------------------------------------------------------------------------- counting helpers

TAG_BASE = float(2**32)


def tags(rank: int, like: torch.Tensor) -> torch.Tensor:
    """float64 tensor shaped like `like` whose elements name their rank and flat index exactly."""
    index = torch.arange(1, like.numel() + 1, dtype=torch.float64).view(like.shape)
    return index + rank * TAG_BASE


def tag_source(values: torch.Tensor) -> torch.Tensor:
    """Rank each tagged element came from; -1 for untagged (zero padding)."""
    src = torch.div(values, TAG_BASE, rounding_mode="floor").long()
    return torch.where(values == 0, torch.full_like(src, -1), src)


def tag_prepare(*positions: int):
    def prepare(rank, inputs):
        args = list(_clone(inputs))
        for i in positions:
            args[i] = tags(rank, args[i])
        return tuple(args)

    return prepare


def sent_elements(ranks: list[Rank], output_index: int = 0) -> list[int]:
    """Elements of each rank's tagged data found in other ranks' outputs."""
    w = len(ranks)
    sent = [0] * w
    for r, ran in enumerate(ranks):
        src = tag_source(ran.outputs[output_index].reshape(-1))
        for s in range(w):
            if s != r:
                sent[s] += int((src == s).sum())
    return sent


def nbytes(x, elem_bytes: int | None = None) -> int:
    """Bytes of every tensor in x (lists, tuples and module parameters included). With elem_bytes,
    floating-point tensors count at that element size (tagged runs hold float64)."""
    if isinstance(x, torch.Tensor):
        if elem_bytes is not None and x.is_floating_point():
            return x.numel() * elem_bytes
        return x.numel() * x.element_size()
    if isinstance(x, torch.nn.Module):
        return sum(nbytes(p, elem_bytes) for p in x.parameters())
    if isinstance(x, (list, tuple)):
        return sum(nbytes(v, elem_bytes) for v in x)
    return 0


def totals(problem_id: str, dims, world_size: int) -> tuple[float, float, float]:
    phases = tasks.get(problem_id).phases(dims, world_size)
    return (sum(p.flops for p in phases), sum(p.hbm_bytes for p in phases), sum(p.comm_bytes for p in phases))


def assert_matches(problem_id: str, dims, world_size: int, flops, hbm, comm, rel: float = 1e-9) -> None:
    want = totals(problem_id, dims, world_size)
    got = (flops, hbm, comm)
    for name, g, w in zip(("flops", "hbm_bytes", "comm_bytes"), got, want):
        assert g == pytest.approx(w, rel=rel, abs=1e-9), (
            f"{problem_id} W={world_size} {name}: counted {g}, roofline {w}"
        )


def first_dims(problem_id: str) -> dict:
    return dict(tasks.get(problem_id).shapes[0].dims)


E = 2  # bytes per bf16 element, the dtype of every float input here


def allreduce_bytes(world_size: int, values: int, value_bytes: int) -> float:
    """Least NVLink bytes per GPU for an all-reduce: reduce-scatter then all-gather."""
    return 2 * (world_size - 1) / world_size * values * value_bytes


# --------------------------------------------------------------------------- metadata


def test_every_problem_is_registered_with_its_public_id():
    found = tasks.problems()
    for problem_id, pkb_id in PROBLEMS.items():
        assert problem_id in found, problem_id
        assert found[problem_id].pkb_id == pkb_id


@pytest.mark.parametrize("problem_id", sorted(PROBLEMS))
def test_metadata(problem_id):
    p = tasks.get(problem_id)
    assert p.level in LEVELS and p.parallelism in PARALLELISM
    assert p.origin and len(p.description) > 150 and p.title
    assert p.world_sizes == (2, 4, 8)
    assert len(p.shapes) >= 3 and p.default_shape in p.shapes
    tols = p.tolerance if isinstance(p.tolerance, tuple) else (p.tolerance,)
    for tol in tols:
        assert tol.reason and "placeholder" not in tol.reason
        assert tol.bitwise or (tol.atol >= 0 and 0 <= tol.rtol < 0.5)
    # The first shape is the CI shape: the smallest, and tiny (under 2 MB of HBM traffic at W=4).
    hbm = [sum(ph.hbm_bytes for ph in p.phases(shape.dims, 4)) for shape in p.shapes]
    assert hbm[0] == min(hbm) and hbm[0] < 2e6
    for shape in p.shapes:
        for w in p.world_sizes:
            phases = p.phases(shape.dims, w)
            assert phases and all(ph.unit in UNITS for ph in phases)
            assert sum(ph.hbm_bytes for ph in phases) > 0


def test_problem_modules_do_not_import_torch():
    code = (
        "import sys, importlib\n"
        f"for name in {sorted(PROBLEMS)!r}:\n"
        "    importlib.import_module(f'tasks.{name}.problem')\n"
        "assert 'torch' not in sys.modules, 'a problem.py imported torch'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=str(tasks.ROOT.parent))


# --------------------------------------------------------------------------- pure data movement

MOVEMENT = {
    # problem id: positions of the float inputs to tag
    "ulysses_all_to_all_tensor_primitive": (0,),
    "ulysses_all_gather_into_tensor_primitive": (0,),
    "ulysses_gather_seq_scatter_heads": (0,),
    "ulysses_gather_heads_scatter_seq": (0,),
    "ulysses_gather_seq_scatter_heads_qkv": (0,),
}


@pytest.mark.parametrize("world_size", WORLDS)
@pytest.mark.parametrize("problem_id", sorted(MOVEMENT))
def test_roofline_of_data_movement(problem_id, world_size):
    dims = first_dims(problem_id)
    plain = run_ranks(problem_id, dims, world_size)
    tagged = run_ranks(problem_id, dims, world_size, prepare=tag_prepare(*MOVEMENT[problem_id]))
    # Tagged and plain runs move the same elements.
    for a, b in zip(plain, tagged):
        assert a.outputs[0].shape == b.outputs[0].shape
    hbm = max(nbytes(r.inputs) + nbytes(r.outputs) for r in plain)
    comm = max(sent_elements(tagged)) * E
    assert_matches(problem_id, dims, world_size, 0, hbm, comm)


def test_gather_heads_scatter_seq_pads_the_last_slice():
    # T = 30 over 4 ranks: 8-row slices, the last ends in two zero rows that no rank sends.
    ranks = run_ranks("ulysses_gather_heads_scatter_seq", first_dims("ulysses_gather_heads_scatter_seq"), 4)
    last = ranks[3].outputs[0]
    assert last.shape[1] == 8 and bool((last[:, -2:] == 0).all()) and bool((last[:, :-2] != 0).any())


# --------------------------------------------------------------------------- MoE


@pytest.mark.parametrize("world_size", WORLDS)
def test_roofline_of_moe_token_preprocess(world_size):
    pid = "moe_token_preprocess"
    dims = first_dims(pid)
    ranks = run_ranks(pid, dims, world_size)
    local = dims["E"] // world_size
    counts = [r.inputs[0].sum(dim=(1, 2)) for r in ranks]  # tokens per expert on each rank
    for r, ran in enumerate(ranks):
        per_local = ran.outputs[2]
        for s in range(world_size):
            assert torch.equal(per_local[s], counts[s][r * local : (r + 1) * local])
    # Remote entries of the count table: rows of other ranks, 4-byte counts.
    comm = max(sum(ran.outputs[2][s].numel() for s in range(world_size) if s != r) * 4 for r, ran in enumerate(ranks))
    hbm = max(nbytes(ran.inputs) + nbytes(ran.outputs) for ran in ranks)
    flops = ranks[0].inputs[0].numel()
    assert_matches(pid, dims, world_size, flops, hbm, comm)


def _split_matrix(pid, dims, world_size, seed):
    ref = tasks.load_reference(pid)
    rows = [ref.make_inputs(make_ctx(pid, r, world_size, dims, seed)) for r in range(world_size)]
    return rows, torch.tensor([row[1] for row in rows])


@pytest.mark.parametrize("world_size", WORLDS)
def test_roofline_of_moe_all2all_primitive(world_size):
    pid = "moe_all2all_primitive"
    # One draw, tagged: the rows each rank sends away are the off-diagonal of its split row.
    dims = first_dims(pid)
    tagged = run_ranks(pid, dims, world_size, prepare=tag_prepare(0))
    splits = torch.tensor([r.inputs[1] for r in tagged])
    assert sent_elements(tagged) == [int(splits[s].sum() - splits[s, s]) * dims["H"] for s in range(world_size)]
    # Expected values over many draws of the random splits.
    dims = {"T": 4096, "H": 3}
    comm, hbm, draws = 0.0, 0.0, 12
    for seed in range(draws):
        rows, splits = _split_matrix(pid, dims, world_size, seed)
        for r, row in enumerate(rows):
            comm += (int(splits[r].sum()) - int(splits[r, r])) * dims["H"] * E
            hbm += nbytes(row[0]) + int(splits[:, r].sum()) * dims["H"] * E
    n = draws * world_size
    assert_matches(pid, dims, world_size, 0, hbm / n, comm / n, rel=0.03)


def _ranks_of_experts(choices: torch.Tensor, experts: int, world_size: int) -> list[set]:
    local = experts // world_size
    return [{int(e) // local for e in row} for row in choices]


def _routing_walk(choices_per_rank: list[torch.Tensor], experts: int, world_size: int):
    """(remote (token, rank) pairs, remote routed copies, pairs served) per rank."""
    remote_pairs, remote_routes = [0] * world_size, [0] * world_size
    served = [0] * world_size
    local = experts // world_size
    for s, choices in enumerate(choices_per_rank):
        for row in choices.tolist():
            ranks = {e // local for e in row}
            for q in ranks:
                served[q] += 1
            remote_pairs[s] += len(ranks - {s})
            remote_routes[s] += sum(1 for e in row if e // local != s)
    return remote_pairs, remote_routes, served


def _mask_choices(expert_mask: torch.Tensor) -> torch.Tensor:
    """(T, K) expert ids from a one-hot (E, K, T) mask."""
    return expert_mask.argmax(dim=0).T


@pytest.mark.parametrize("world_size", WORLDS)
def test_roofline_of_moe_pre_all2all(world_size):
    pid = "moe_pre_all2all"
    dims = first_dims(pid)
    # One draw, tagged hidden states: distinct remote tokens arriving equal the routing walk.
    tagged = run_ranks(pid, dims, world_size, prepare=tag_prepare(0))
    h = dims["H"]
    arrived = [set() for _ in range(world_size)]  # (source rank, token) pairs sent by each rank
    for r, ran in enumerate(tagged):
        first = ran.outputs[0][:, 0]
        for src, token in zip(tag_source(first).tolist(), ((first - 1) % TAG_BASE // h).long().tolist()):
            if src != r:
                arrived[src].add((token, r))
    pairs, _, _ = _routing_walk([_mask_choices(r.inputs[1]) for r in tagged], dims["E"], world_size)
    assert [len(a) for a in arrived] == pairs
    # Expected values over draws at a larger token count.
    dims = {"T": 2048, "H": 2, "E": 8, "K": 2}
    ref = tasks.load_reference(pid)
    comm = hbm = 0.0
    draws = 4
    for seed in range(draws):
        rows = [ref.make_inputs(make_ctx(pid, r, world_size, dims, seed)) for r in range(world_size)]
        pairs, _, _ = _routing_walk([_mask_choices(row[1]) for row in rows], dims["E"], world_size)
        for r, row in enumerate(rows):
            received = sum(other[4][r] for other in rows)  # rows every rank sends to r
            routed = int(row[1].sum())
            comm += pairs[r] * dims["H"] * E
            # hidden read + mask read + dispatched rows, routing map, permutation written
            hbm += nbytes(row[0]) + nbytes(row[1]) + received * dims["H"] * E + row[1].sum(1).numel() * 4 + routed * 8
    n = draws * world_size
    assert_matches(pid, dims, world_size, 0, hbm / n, comm / n, rel=0.03)


@pytest.mark.parametrize("world_size", WORLDS)
def test_roofline_of_moe_post_all2all(world_size):
    pid = "moe_post_all2all"
    dims = first_dims(pid)
    ranks = run_ranks(pid, dims, world_size)  # runs end to end; outputs are (T, H)
    assert all(r.outputs[0].shape == (dims["T"], dims["H"]) for r in ranks)
    dims = {"T": 2048, "H": 2, "E": 8, "K": 2}
    ref = tasks.load_reference(pid)
    flops = hbm = comm = 0.0
    draws = 4
    for seed in range(draws):
        rows = [ref.make_inputs(make_ctx(pid, r, world_size, dims, seed)) for r in range(world_size)]
        pairs, routes, _ = _routing_walk([row[2] for row in rows], dims["E"], world_size)
        for r, row in enumerate(rows):
            expert_outputs, weights, selected, routing_map, permutation = row[0], row[1], row[2], row[7], row[8]
            comm += pairs[r] * dims["H"] * E + routes[r] * (E + 4)
            hbm += nbytes([expert_outputs, weights, selected, routing_map, permutation]) + dims["T"] * dims["H"] * E
            flops += 2 * permutation.numel() * dims["H"]
    n = draws * world_size
    assert_matches(pid, dims, world_size, flops / n, hbm / n, comm / n, rel=0.03)


def _mlp_flops_per_token(gate_proj, up_proj, down_proj) -> int:
    x = torch.zeros(1, gate_proj.in_features, dtype=gate_proj.weight.dtype)
    with FlopCounterMode(display=False) as counter:
        down_proj(F.silu(gate_proj(x)) * up_proj(x))
    return counter.get_total_flops()


@pytest.mark.parametrize("world_size", WORLDS)
@pytest.mark.parametrize("problem_id", ["fused_moe_fwd", "moe_ep_balanced"])
def test_roofline_of_moe_forward(problem_id, world_size):
    small = first_dims(problem_id)
    ranks = run_ranks(problem_id, small, world_size)
    assert all(torch.isfinite(r.outputs[0].float()).all() for r in ranks)
    dims = {"T": 1024, "H": 64, "I": 16, "K": 2} | ({"E": 8} if problem_id == "fused_moe_fwd" else {})
    ref = tasks.load_reference(problem_id)
    flops = hbm = comm = 0.0
    draws = 3
    for seed in range(draws):
        rows = [ref.make_inputs(make_ctx(problem_id, r, world_size, dims, seed)) for r in range(world_size)]
        experts = rows[0][6]
        choices = []
        for row in rows:  # routing from fp32 logits (the inputs make it unambiguous)
            logits = F.linear(row[0].float(), row[1].float(), row[2].float())
            choices.append(logits.topk(dims["K"], dim=-1).indices)
        pairs, _, served = _routing_walk(choices, experts, world_size)
        local = experts // world_size
        for r, row in enumerate(rows):
            hidden, gate_weight, gate_bias, gate_proj, up_proj, down_proj = row[:6]
            with FlopCounterMode(display=False) as counter:
                F.linear(hidden, gate_weight, gate_bias)
            flops += counter.get_total_flops() + served[r] * _mlp_flops_per_token(gate_proj, up_proj, down_proj)
            # counts to each peer; dispatched rows with their weight, and result rows back
            comm += (world_size - 1) * local * 4 + pairs[r] * (2 * dims["H"] * E + E)
            route_reads = nbytes([hidden, gate_weight, gate_bias])
            expert_phase = nbytes(hidden) + nbytes([gate_proj, up_proj, down_proj]) + nbytes(hidden)  # output
            hbm += route_reads + expert_phase
    n = draws * world_size
    assert_matches(problem_id, dims, world_size, flops / n, hbm / n, comm / n, rel=0.03)


def test_moe_routing_is_unambiguous():
    # The planted router inputs leave a wide gap between the K-th and (K+1)-th logit.
    ref = tasks.load_reference("fused_moe_fwd")
    dims = {"T": 4096, "H": 64, "I": 16, "E": 8, "K": 2}
    row = ref.make_inputs(make_ctx("fused_moe_fwd", 0, 4, dims, 0))
    logits = F.linear(row[0].float(), row[1].float(), row[2].float()).sort(dim=-1, descending=True).values
    assert float((logits[:, 1] - logits[:, 2]).min()) > 1.0


# --------------------------------------------------------------------------- Ulysses attention


@pytest.mark.parametrize("world_size", WORLDS)
def test_roofline_of_ulysses_sequence_attention(world_size):
    pid = "ulysses_sequence_attention"
    dims = first_dims(pid)
    ranks = run_ranks(pid, dims, world_size)
    b, s, nh, d = dims["B"], dims["S"], dims["NH"], dims["D"]
    heads_per_rank = nh // world_size
    # Walk every element that changes owner: q, k, v of heads owned elsewhere, then attention
    # outputs of tokens owned elsewhere.
    qkv_away = sum(b * s * 3 * d for head in range(nh) if head // heads_per_rank != 0)
    out_away = sum(b * heads_per_rank * d for token in range(world_size * s) if token // s != 0)
    comm = (qkv_away + out_away) * E
    x = b * s * nh * d
    hidden, w_qkv, w_o = ranks[0].inputs[:3]
    intermediates = (3 * x + 3 * x + x + x) * E  # q, k, v and attention output, written then read
    hbm = nbytes([hidden, w_qkv, w_o]) + nbytes(ranks[0].outputs) + intermediates
    assert len({r.flops for r in ranks}) == 1
    assert_matches(pid, dims, world_size, ranks[0].flops, hbm, comm)


def test_ulysses_sequence_attention_matches_single_device_attention():
    # All ranks' outputs together equal plain multi-head attention over the whole sequence.
    pid = "ulysses_sequence_attention"
    dims = first_dims(pid)
    ranks = run_ranks(pid, dims, 4)
    hidden = torch.cat([r.inputs[0] for r in ranks], dim=1).double()
    w_qkv, w_o = ranks[0].inputs[1].double(), ranks[0].inputs[2].double()
    b, length, _ = hidden.shape
    q, k, v = F.linear(hidden, w_qkv).view(b, length, 3, dims["NH"], dims["D"]).unbind(2)
    attn = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
    expected = F.linear(attn.transpose(1, 2).reshape(b, length, -1), w_o)
    got = torch.cat([r.outputs[0] for r in ranks], dim=1).double()
    tol = tasks.get(pid).tolerance_for(0, 4)
    assert bool(((got - expected).abs() <= checks.allowed_error(expected, tol)).all())


# --------------------------------------------------------------------------- training and optimizers


@pytest.mark.parametrize("world_size", WORLDS)
@pytest.mark.parametrize("problem_id", ["clip_grad_norm_no_ep", "clip_grad_norm_ep"])
def test_roofline_of_clip_grad_norm(problem_id, world_size):
    dims = first_dims(problem_id)
    ranks = run_ranks(problem_id, dims, world_size)
    grads = [t for t in ranks[0].inputs if isinstance(t, list) for t in t]
    n = sum(g.numel() for g in grads)
    flops = 2 * n + n  # square and add for the norm, one multiply to scale
    hbm = 2 * nbytes(grads) + nbytes(grads) + nbytes(ranks[0].outputs)  # read twice, write once
    comm = allreduce_bytes(world_size, 1, 4)  # one fp32 partial sum covers every group
    assert_matches(problem_id, dims, world_size, flops, hbm, comm)
    # Clipping happened: the norm exceeds max_norm on every rank.
    max_norm = ranks[0].inputs[1] if problem_id == "clip_grad_norm_no_ep" else ranks[0].inputs[2]
    assert all(float(r.outputs[0]) > max_norm for r in ranks)


@pytest.mark.parametrize("world_size", WORLDS)
def test_roofline_of_grad_acc_loss(world_size):
    pid = "grad_acc_loss"
    dims = first_dims(pid)
    ranks = run_ranks(pid, dims, world_size)
    hbm = max(nbytes(r.inputs) + nbytes(r.outputs) for r in ranks)
    assert_matches(pid, dims, world_size, 6, hbm, allreduce_bytes(world_size, 1, E))
    assert all(torch.isfinite(torch.stack(r.outputs).float()).all() for r in ranks)


def test_grad_acc_loss_inputs_cover_empty_ranks():
    pid = "grad_acc_loss"
    empty = 0
    for seed in range(8):
        rows = [tasks.load_reference(pid).make_inputs(make_ctx(pid, r, 4, first_dims(pid), seed)) for r in range(4)]
        counts = [int(row[1]) for row in rows]
        assert sum(counts) == int(rows[0][2]) and sum(counts) > 0
        empty += sum(1 for row in rows if int(row[1]) == 0 and torch.isnan(row[0]))
    assert empty > 0


@pytest.mark.parametrize("world_size", WORLDS)
def test_roofline_of_load_balancing_loss(world_size):
    pid = "load_balancing_loss_fn"
    dims = first_dims(pid)
    ranks = run_ranks(pid, dims, world_size)
    logits, _, top_k, mask = ranks[0].inputs
    # per logit: max, subtract, exp, sum, divide (softmax), probability mean, expert count,
    # top-k compares; then the one average
    flops = (7 + top_k) * logits.numel() + 1
    hbm = nbytes([logits, mask]) + nbytes(ranks[0].outputs)
    assert_matches(pid, dims, world_size, flops, hbm, allreduce_bytes(world_size, 1, 4))


@pytest.mark.parametrize("world_size", WORLDS)
def test_roofline_of_importance_sampling_loss(world_size):
    pid = "importance_sampling_loss"
    dims = first_dims(pid)
    ranks = run_ranks(pid, dims, world_size)
    r0 = ranks[0]
    hbm = nbytes(r0.inputs) + nbytes(r0.outputs)  # per-token outputs, loss and metrics
    # seven global scalars: valid count, pg sum, ratio sum, k3 sum, entropy sum, min, max
    comm = allreduce_bytes(world_size, 7, 4)
    assert_matches(pid, dims, world_size, r0.flops + 7, hbm, comm)


def _mlp_param_count(inputs) -> int:
    return sum(t.numel() for t in inputs[2:6])


@pytest.mark.parametrize("world_size", WORLDS)
def test_roofline_of_ddp(world_size):
    pid = "ddp"
    dims = first_dims(pid)
    ranks = run_ranks(pid, dims, world_size)
    r0 = ranks[0]
    p = _mlp_param_count(r0.inputs)
    x, y = r0.inputs[:2]
    state = nbytes(r0.inputs[2:14])  # parameters and both moments
    outputs = nbytes(r0.outputs)
    # broadcast buffers, batch, parameter re-read, gradient write+read, state re-read, outputs
    hbm = state + nbytes([x, y]) + p * E + 2 * p * E + state + outputs
    comm = state + allreduce_bytes(world_size, p, E)  # rank 0 sends every state byte once
    assert_matches(pid, dims, world_size, r0.flops + 13 * p, hbm, comm)


@pytest.mark.parametrize("world_size", WORLDS)
@pytest.mark.parametrize("problem_id", ["zero1_optimizer_shard", "zero2_optimizer_shard_grad"])
def test_roofline_of_zero(problem_id, world_size):
    dims = first_dims(problem_id)
    ranks = run_ranks(problem_id, dims, world_size)
    r0 = ranks[0]
    p = _mlp_param_count(r0.inputs)
    part = r0.inputs[6].numel()
    assert part * world_size == p
    x, y = r0.inputs[:2]
    params_out, state_out = r0.outputs[:4], r0.outputs[4:]
    # broadcast, batch + parameters + gradient write, gradient read + slice of parameters and
    # state read, state slices and gathered parameters written
    hbm = p * E + nbytes([x, y]) + p * E + p * E + p * E + 3 * part * E + nbytes(state_out) + nbytes(params_out)
    comm = p * E + 2 * (world_size - 1) / world_size * p * E  # broadcast, reduce-scatter, all-gather
    assert_matches(problem_id, dims, world_size, r0.flops + 13 * part, hbm, comm)


def test_zero1_and_zero2_agree():
    dims = first_dims("zero1_optimizer_shard")
    one = run_ranks("zero1_optimizer_shard", dims, 4)
    two = run_ranks("zero2_optimizer_shard_grad", dims, 4)
    for a, b in zip(one, two):
        assert all(torch.equal(x, y) for x, y in zip(a.outputs, b.outputs))


@pytest.mark.parametrize("world_size", WORLDS)
def test_roofline_of_fused_adam_allgather(world_size):
    pid = "fused_adam_grad_unshard_allgather"
    dims = first_dims(pid)
    ranks = run_ranks(pid, dims, world_size)
    r0 = ranks[0]
    p = r0.inputs[0].numel()
    gathered = r0.outputs[0]
    assert gathered.numel() == world_size * p
    hbm = nbytes(r0.inputs[:4]) + nbytes(gathered)
    comm = (gathered.numel() - p) * E  # every other rank's slice arrives from that rank
    assert_matches(pid, dims, world_size, 12 * p, hbm, comm)


@pytest.mark.parametrize("world_size", WORLDS)
def test_roofline_of_quantized_grad_allreduce(world_size):
    pid = "quantized_grad_allreduce"
    dims = first_dims(pid)
    ranks = run_ranks(pid, dims, world_size)
    grad, block = ranks[0].inputs
    n = grad.numel()
    payload = n + 4 * math.ceil(n / block)  # int8 codes + one fp32 scale per block
    comm = min((world_size - 1) * payload, (world_size - 1) / world_size * (payload + n * E))
    hbm = nbytes(grad) + nbytes(ranks[0].outputs)
    assert_matches(pid, dims, world_size, (5 + world_size) * n, hbm, comm)


@pytest.mark.parametrize("world_size", WORLDS)
def test_roofline_of_fp8_allgather(world_size):
    pid = "fp8_allgather_params"
    dims = first_dims(pid)
    ranks = run_ranks(pid, dims, world_size)
    shard, history = ranks[0].inputs
    p = shard.numel()
    comm = (world_size - 1) * (p * torch.finfo(torch.float8_e4m3fn).bits // 8 + 4)  # codes + fp32 scale
    hbm = nbytes([shard, history]) + nbytes(ranks[0].outputs)
    assert_matches(pid, dims, world_size, 3 * p, hbm, comm)
    # Each rank's slice of the gathered vector is exactly representable as fp8 codes times its scale.
    for r, ran in enumerate(ranks):
        scale = ran.outputs[1].max().float() / 448.0
        codes = ranks[0].outputs[0][r * p : (r + 1) * p].float() / scale
        assert torch.allclose(codes.to(torch.float8_e4m3fn).float(), codes, rtol=1e-2, atol=1e-3)
