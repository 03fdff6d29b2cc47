"""A solution timed against its problem's reference without the judge: plain processes, one per
rank, with no sandbox, no protocol and no null batches. What the known-ratio rulers
(evaluator/calibration.py) really read on this host, so that the judge's reading of them can be
held against it (tests/evaluator/test_known_ratios.py, bench/ruler_check.py): where both read the
same, the ruler is off, not the judge. It runs the source it is given as it is, unsandboxed: the
project's own rulers only, never a submission.

Batches of K calls on K fresh input sets, started after a barrier, the two sides alternating which
goes first; a batch's time runs from the last rank's start to the last rank's end, as the judge's
does; the speedup is the median of paired ratios with the judge's interval (timing_stats). On the
CPU each process computes on one thread and keeps freed memory, as the judge's players do."""

from __future__ import annotations

import json
import math
import os
import socket
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from unittest import mock

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import tasks
from evaluator import timing_stats
from evaluator.judge import BATCH_TARGET_S, MAX_BATCH, draw_inputs
from evaluator.loading import load_problem, load_solution
from evaluator.sandbox import KEEP_FREED_MEMORY, NO_MULTICAST


@dataclass(frozen=True)
class Reading:
    """Per call: the reference / solution ratio, each side's median us, the median over pairs
    of what the solution adds (which a slow spell of the host moves less than the difference of
    two medians), and how far the pairs' ratios scatter (timing_stats.pair_spread)."""

    ratio: timing_stats.Ratio
    reference_us: float
    solution_us: float
    added_us: float
    pair_spread: float


def time_batch(fn, sets: list[tuple], device: torch.device) -> float:
    """Microseconds per call over the batch for the problem: from the moment the last rank started
    it (after a barrier) until the last rank's last call ended."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    dist.barrier()
    t0 = time.perf_counter_ns()
    for s in sets:
        fn(*s)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    stamps: list = [None] * dist.get_world_size()
    dist.all_gather_object(stamps, (t0, time.perf_counter_ns()))
    return (max(end for _, end in stamps) - max(start for start, _ in stamps)) / len(sets) / 1e3


def time_pairs(problem_id: str, shape: str, solution_fn, device: torch.device, pairs: int,
               calls: int = 0) -> Reading:
    """On every rank of the current process group: `pairs` pairs of batches of `calls` calls
    (0: sized as the judge sizes them on a GPU, so that the faster side's batch lasts about
    judge.BATCH_TARGET_S: pairs as long as the judge's meet as many of a host's speed changes)."""
    problem = load_problem({"kind": "suite", "id": problem_id})
    dims = dict(tasks.get(problem_id).shape(shape).dims)
    counter = iter(range(1, 1 << 30))
    rank, world = dist.get_rank(), dist.get_world_size()

    def fresh(k: int) -> list[tuple]:
        return [draw_inputs(problem, rank, world, dims, next(counter), next(counter), device) for _ in range(k)]

    warm = fresh(5)
    for fn in (problem.reference, solution_fn):
        time_batch(fn, warm, device)
    fastest_us = min(time_batch(fn, warm, device) for fn in (problem.reference, solution_fn))
    k = calls or max(1, min(MAX_BATCH, math.ceil(BATCH_TARGET_S * 1e6 / max(fastest_us, 1e-3))))
    sizes: list = [None] * world
    dist.all_gather_object(sizes, k)
    k = min(sizes)  # every rank runs the same batches
    ref_us, sol_us = [], []
    for i in range(pairs):
        sets = fresh(k)
        sides = [(problem.reference, ref_us), (solution_fn, sol_us)]
        for fn, out in sides if i % 2 == 0 else sides[::-1]:
            out.append(time_batch(fn, sets, device))
    ratio = timing_stats.paired_ratio(ref_us, sol_us)
    if ratio is None:
        raise RuntimeError("the solution's batches took no measurable time")
    added = statistics.median(s - r for r, s in zip(ref_us, sol_us))
    return Reading(ratio, statistics.median(ref_us), statistics.median(sol_us), added,
                   timing_stats.pair_spread(ref_us, sol_us))


def _rank(rank: int, world: int, port: int, device_kind: str, problem: str, shape: str, source: str,
          pairs: int, calls: int, cpus: tuple[int, ...], folder: str) -> None:
    """One rank (torch.multiprocessing.spawn's entry); rank 0 writes the reading to `folder`."""
    if cpus:  # before any thread starts, so that every thread of the process stays there
        os.sched_setaffinity(0, {cpus[rank % len(cpus)]})
    if device_kind == "cuda":
        device = torch.device("cuda", rank)
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
        torch.set_num_threads(1)  # as the judge's players (OMP_NUM_THREADS=1)
    dist.init_process_group("nccl" if device_kind == "cuda" else "gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=world)
    try:
        path = Path(folder) / f"solution_{rank}.py"  # Triton compiles only functions whose file it can read
        path.write_text(source)
        fn = load_solution(path)
        reading = time_pairs(problem, shape, fn, device, pairs, calls)
        if rank == 0:
            (Path(folder) / "reading.json").write_text(json.dumps(asdict(reading)))
    finally:
        dist.destroy_process_group()


def plain_reading(problem: str, shape: str, source: str, world_size: int = 1, device: str = "cpu",
                  pairs: int = 30, calls: int = 0, cpus: tuple[int, ...] = ()) -> Reading:
    """The solution in `source` against the reference, in `world_size` fresh processes (on a GPU
    host, one GPU each); with `cpus`, rank r's process runs on CPU cpus[r % len(cpus)] only, as
    the judge's players of a rank share one CPU in gpu mode."""
    if device == "cuda" and world_size > torch.cuda.device_count():
        raise ValueError(f"{world_size} ranks need as many GPUs; this host has {torch.cuda.device_count()}")
    # The processes inherit these as they start (the C library reads its settings then).
    with mock.patch.dict(os.environ, {**NO_MULTICAST, **KEEP_FREED_MEMORY}), \
            tempfile.TemporaryDirectory(prefix="stopwatch-") as folder:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        mp.spawn(_rank, args=(world_size, port, device, problem, shape, source, pairs, calls, tuple(cpus), folder),
                 nprocs=world_size)
        found = json.loads((Path(folder) / "reading.json").read_text())
    return Reading(ratio=timing_stats.Ratio(**found.pop("ratio")), **found)
