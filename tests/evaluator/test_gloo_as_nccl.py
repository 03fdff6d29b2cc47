"""cpu and shared-gpu players get NCCL's behaviour where gloo's differs (evaluator/gloo_as_nccl.py):
checked on a real gloo group of three ranks, and through the judge with solutions written the way
the public suite's references are."""

from __future__ import annotations

import os
import tempfile

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from evaluator.launch import EvaluationRequest, evaluate

WORLD = 3
FAST = dict(warmup=1, iters=2, trials=2, timing_budget_s=0, shapes=["small"])


def _collectives(rank: int, store: str, out_dir: str) -> None:
    from evaluator import gloo_as_nccl

    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=WORLD)
    gloo_as_nccl.install()
    results = {}
    x = torch.arange(6.0).reshape(2, 3) + 10 * rank

    stacked = torch.empty(WORLD, 2, 3)
    dist.all_gather_into_tensor(stacked, x)
    results["stacked_all_gather"] = stacked
    flat = torch.empty(WORLD * 6)
    dist.all_gather_into_tensor(flat, x, async_op=True).wait()
    results["flat_all_gather"] = flat
    native = torch.empty(WORLD * 2, 3)
    dist.all_gather_into_tensor(native, x)
    results["native_all_gather"] = native

    out = torch.empty(2, 3)
    dist.reduce_scatter_tensor(out, torch.ones(WORLD, 2, 3) * (rank + 1))
    results["stacked_reduce_scatter"] = out

    uneven = [torch.empty(r + 1, 2) for r in range(WORLD)]
    dist.all_gather(uneven, torch.full((rank + 1, 2), float(rank)))
    results["uneven_all_gather"] = uneven

    # Rank r sends r + p + 1 rows to peer p.
    received = [torch.empty(p + rank + 1, 2) for p in range(WORLD)]
    dist.all_to_all(received, [torch.full((rank + p + 1, 2), float(10 * rank + p)) for p in range(WORLD)])
    results["uneven_all_to_all"] = received

    pair = dist.new_group([1, 2])
    if rank in (1, 2):
        sub = [torch.empty(r, 1) for r in (1, 2)]  # group ranks 0, 1 hold 1 and 2 rows
        dist.all_gather(sub, torch.full((rank, 1), float(rank)), group=pair)
        results["uneven_all_gather_in_group"] = sub

    buffer = torch.full((4,), float(rank + 1))
    dist.reduce(buffer, dst=1)
    results["reduce"] = buffer
    group_buffer = torch.full((4,), float(rank + 1))
    if rank in (1, 2):
        dist.reduce(group_buffer, group=pair, group_dst=1)
        results["reduce_in_group"] = group_buffer

    # Point-to-point as the GPU path runs it: every tensor treated as out of gloo's reach, so the
    # calls go through host copies (on CPU tensors here, where both paths can be checked).
    for through_host in (False, True):
        gloo_as_nccl._on_device = (lambda t: True) if through_host else (lambda t: False)
        right, left = (rank + 1) % WORLD, (rank - 1) % WORLD
        got = torch.empty(3)
        works = dist.batch_isend_irecv([dist.P2POp(dist.isend, torch.full((3,), float(rank)), right),
                                        dist.P2POp(dist.irecv, got, left)])
        for work in works:
            work.wait()
        blocking = torch.empty(2)
        if rank == 0:
            dist.send(torch.tensor([7.0, 8.0]), dst=1)
        elif rank == 1:
            dist.recv(blocking, src=0)
        same_shape = [torch.empty(2) for _ in range(WORLD)]
        dist.all_to_all(same_shape, [torch.full((2,), float(10 * rank + p)) for p in range(WORLD)])
        results[f"p2p_host_{through_host}"] = (got, blocking if rank == 1 else None, same_shape)
    gloo_as_nccl._on_device = lambda t: t.device.type != "cpu"

    try:
        dist.all_gather_into_tensor(torch.empty(WORLD * 6 + 1), x)
        results["wrong_size"] = "accepted"
    except (RuntimeError, ValueError):
        results["wrong_size"] = "refused"
    torch.save(results, os.path.join(out_dir, f"{rank}.pt"))
    dist.barrier()
    os._exit(0)


@pytest.fixture(scope="module")
def gathered():
    with tempfile.TemporaryDirectory() as tmp:
        mp.start_processes(_collectives, args=(os.path.join(tmp, "store"), tmp), nprocs=WORLD, start_method="fork")
        yield [torch.load(os.path.join(tmp, f"{r}.pt")) for r in range(WORLD)]


def test_all_gather_into_tensor_takes_any_output_shape_of_the_right_size(gathered):
    expected = torch.stack([torch.arange(6.0).reshape(2, 3) + 10 * r for r in range(WORLD)])
    for results in gathered:
        assert torch.equal(results["stacked_all_gather"], expected)
        assert torch.equal(results["flat_all_gather"], expected.reshape(-1))
        assert torch.equal(results["native_all_gather"], expected.reshape(WORLD * 2, 3))
        assert results["wrong_size"] == "refused"


def test_reduce_scatter_tensor_takes_a_stacked_input(gathered):
    for results in gathered:
        assert torch.equal(results["stacked_reduce_scatter"], torch.full((2, 3), float(sum(range(1, WORLD + 1)))))


def test_all_gather_of_different_sizes_per_rank(gathered):
    for results in gathered:
        assert [t.tolist() for t in results["uneven_all_gather"]] == [[[float(r)] * 2] * (r + 1) for r in range(WORLD)]
    for rank in (1, 2):
        assert [t.tolist() for t in gathered[rank]["uneven_all_gather_in_group"]] == [[[1.0]], [[2.0], [2.0]]]


def test_all_to_all_of_different_sizes_per_peer(gathered):
    for rank, results in enumerate(gathered):
        got = results["uneven_all_to_all"]
        assert [t.tolist() for t in got] == [[[float(10 * p + rank)] * 2] * (p + rank + 1) for p in range(WORLD)]


def test_reduce_leaves_other_ranks_buffers_unchanged(gathered):
    assert gathered[1]["reduce"].tolist() == [6.0] * 4
    assert gathered[0]["reduce"].tolist() == [1.0] * 4 and gathered[2]["reduce"].tolist() == [3.0] * 4
    assert gathered[2]["reduce_in_group"].tolist() == [5.0] * 4  # group rank 1 is global rank 2
    assert gathered[1]["reduce_in_group"].tolist() == [2.0] * 4


@pytest.mark.parametrize("through_host", [False, True])
def test_point_to_point_and_all_to_all_through_host_copies(gathered, through_host):
    for rank, results in enumerate(gathered):
        got, blocking, same_shape = results[f"p2p_host_{through_host}"]
        assert got.tolist() == [float((rank - 1) % WORLD)] * 3
        if rank == 1:
            assert blocking.tolist() == [7.0, 8.0]
        assert [t.tolist() for t in same_shape] == [[float(10 * p + rank)] * 2 for p in range(WORLD)]


NCCL_STYLE = {
    # The public suite's all-gather: a stacked output, no view.
    "allgather": (
        "import torch.distributed as dist\n"
        "def solution(tensor):\n"
        "    out = tensor.new_empty((dist.get_world_size(),) + tensor.shape)\n"
        "    dist.all_gather_into_tensor(out, tensor.contiguous())\n"
        "    return out\n"
    ),
    # The public suite's reduce: returns its buffer on every rank, unchanged off the root.
    "reduce": (
        "import torch.distributed as dist\n"
        "def solution(tensor, dst=0):\n"
        "    out = tensor.clone()\n"
        "    dist.reduce(out, dst=dst)\n"
        "    return out\n"
    ),
}


@pytest.mark.parametrize("problem", sorted(NCCL_STYLE))
def test_solutions_written_for_nccl_are_judged_in_cpu_mode(problem):
    doc = evaluate(EvaluationRequest(problem=problem, solution_code=NCCL_STYLE[problem], world_size=2, mode="cpu", **FAST))
    assert doc["status"] == "correct", doc["reason"]

