"""Do two processes running identical code on one CPU time a few percent apart for as long as they
live, and does the order of the judge's batches favour one of them?

Without the judge: two fresh worker processes, both pinned to one CPU, run the same host-bound
call (small tensor operations; with --device cuda, tiny kernel launches and a synchronisation)
in alternating batches, like a reference and a solution. Each evaluation is a new pair of
processes; the per-evaluation speedup (process 0 / process 1, median of paired ratios, with the
judge's interval) shows offsets that hold for a process's life, and their spread across
evaluations shows whether an evaluation's interval covers them.

Schedules (--schedule), process 0 as the reference, "n" a null batch on process 0 (the judge runs
one on the reference's player in every pair):
  reference-warm  0 1 n | 1 0 n | ...  the judge's earlier order: process 0 follows its own null
                                       batch in half the pairs, process 1 always follows process 0
  symmetric       1 0 n | n 0 1 | ...  the judge's order (timed_pairs.pair_schedule): each process
                                       follows itself in half the pairs
  plain           0 1 | 1 0 | ...      no null batches

Start (--start): "spawn", each process a fresh interpreter that imports torch itself, at random
addresses (as the judge's players started before 2026-12-07); "fixed", the same at fixed
addresses (as they start now: evaluator/isolation_init.fix_layout); or "fork", both forked from
this process after it imported torch, before any CUDA call: the two then begin with one memory
layout, sharing its pages until they write them. Beside the spread across evaluations, the
correlation between each evaluation's first-half and second-half speedups: near 0 when the
pairs' noise is all there is, well above it when an offset lasts for the processes' life.

    python bench/process_offsets.py [--device cpu|cuda] [--cpu N] [--evals 8] [--pairs 60]
                                    [--calls 20] [--size 64] [--schedule reference-warm,symmetric,plain]
                                    [--hash-seeds own,same] [--start spawn,fixed,fork]
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing as mp
import os
import random
import statistics
import sys
import time
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from evaluator import timing_stats  # noqa: E402

SCHEDULES = {
    "reference-warm": ((0, 1, "n"), (1, 0, "n")),
    "symmetric": ((1, 0, "n"), ("n", 0, 1)),
    "plain": ((0, 1), (1, 0)),
}


def pin_every_thread(cpu: int) -> None:
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), {cpu})
        except ProcessLookupError:
            pass  # a thread that ended meanwhile


def worker(conn, cpu: int, device: str, size: int) -> None:
    # Loaded on any CPU, then every thread moved onto the shared one, as the judge does with its
    # players (evaluator/placement.py, settle): two CUDA start-ups queued on one CPU took most of
    # an evaluation here.
    import torch

    torch.set_num_threads(1)
    xs = [torch.randn(size, size, device=device) for _ in range(8)]

    def call() -> None:
        acc = xs[0]
        for i in range(40):
            acc = torch.tanh(acc @ xs[i % 8] * 0.01) + xs[(i + 3) % 8]
        if device == "cuda":
            torch.cuda.synchronize()

    def null() -> None:
        if device == "cuda":
            torch.cuda.synchronize()

    for _ in range(200):
        call()
    pin_every_thread(cpu)
    for _ in range(50):
        call()
    conn.send("ready")
    while (n := conn.recv()) is not None:
        fn = null if n < 0 else call
        t0 = time.perf_counter_ns()
        for _ in range(abs(n)):
            fn()
        conn.send(time.perf_counter_ns() - t0)


@contextlib.contextmanager
def hash_seed_set(seed: str | None):
    """PYTHONHASHSEED for the processes started within: `seed`, or none (a random one each)."""
    with mock.patch.dict(os.environ):  # restored as it was on leaving
        os.environ.pop("PYTHONHASHSEED", None)
        if seed is not None:
            os.environ["PYTHONHASHSEED"] = seed
        yield


@contextlib.contextmanager
def layout(fixed: bool):
    """Processes exec'd within start at fixed addresses when `fixed` (the persona is inherited and
    read at exec); this process's own layout never changes."""
    if not fixed:
        yield
        return
    from evaluator import isolation_init

    before = isolation_init.libc.personality(isolation_init.PERSONALITY_QUERY)
    if not isolation_init.fix_layout():
        raise SystemExit("this host does not let a process fix its children's layout (personality)")
    try:
        yield
    finally:
        isolation_init.libc.personality(before)


def evaluation(cpu: int, device: str, size: int, schedule: str, pairs: int, calls: int, hash_seed: str,
               start: str = "spawn") -> tuple[timing_stats.Ratio, float, float]:
    """The speedup over all pairs, and over the first and the second half of them."""
    ctx = mp.get_context("fork" if start == "fork" else "spawn")
    ends, procs = [], []
    # "same": both processes hash strings alike (one seed, new each evaluation), so their dicts and
    # the interpreter's attribute caches collide alike; "own": each its own random seed, as usual.
    seed = str(random.randrange(1, 2**32)) if hash_seed == "same" else None
    for _ in range(2):
        ours, theirs = ctx.Pipe()
        proc = ctx.Process(target=worker, args=(theirs, cpu, device, size))
        with hash_seed_set(seed), layout(fixed=start == "fixed"):
            proc.start()
        ends.append(ours)
        procs.append(proc)
    for end in ends:
        end.recv()
    times: list[list[float]] = [[], []]
    for i in range(pairs):
        for step in SCHEDULES[schedule][i % 2]:
            end = ends[0] if step == "n" else ends[step]
            end.send(-calls if step == "n" else calls)
            took = end.recv()
            if step != "n":
                times[step].append(took)
    for end in ends:
        end.send(None)
    for proc in procs:
        proc.join()
    half = pairs // 2
    first, second = (timing_stats.paired_ratio(times[0][a:b], times[1][a:b]) for a, b in ((0, half), (half, pairs)))
    return timing_stats.paired_ratio(times[0], times[1]), first.value, second.value


def halves_correlation(halves: list[tuple[float, float]]) -> float | None:
    """Pearson correlation of the evaluations' first-half and second-half speedups (None when
    either half never varies)."""
    firsts, seconds = zip(*halves)
    try:
        return statistics.correlation(firsts, seconds)
    except statistics.StatisticsError:
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--cpu", type=int, default=max(os.sched_getaffinity(0)))
    parser.add_argument("--evals", type=int, default=8)
    parser.add_argument("--pairs", type=int, default=60)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--size", type=int, default=64, help="the tensors' side: 4 makes the call the "
                        "operations' dispatch on the host, as a GPU's kernel launches are")
    parser.add_argument("--schedule", default="reference-warm,symmetric,plain")
    parser.add_argument("--start", default="spawn", help="spawn, fixed, fork, or several (spawn,fixed,fork): how the two processes start")
    parser.add_argument("--hash-seeds", default="own", help="own, same or own,same: each process its own "
                        "string-hash seed (as the judge's players have), or one seed for both")
    args = parser.parse_args()
    print(f"device {args.device}, CPU {args.cpu}, tensors {args.size}x{args.size}, {args.evals} evaluations of {args.pairs} pairs x {args.calls} calls")
    starts = [m for m in args.start.split(",") if m]
    if "fork" in starts:
        import torch  # noqa: F401 - imported here once, so that forked processes begin from one layout
    print("| schedule | start | speedups (process 0 / process 1) | median | spread | sd | halves' correlation "
          "| intervals without 1.0 | median half-width |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    # Settings interleaved evaluation by evaluation, so that a slow spell of the host hits each.
    runs = {f"{s}, {h} hash seeds | {m}": (s, h, m) for s in args.schedule.split(",") if s
            for h in args.hash_seeds.split(",") if h for m in starts}
    found: dict[str, list[tuple[timing_stats.Ratio, float, float]]] = {name: [] for name in runs}
    for _ in range(args.evals):
        for name, (s, h, m) in runs.items():
            found[name].append(evaluation(args.cpu, args.device, args.size, s, args.pairs, args.calls, h, m))
            ratio, first, second = found[name][-1]
            # as it goes: a run cut short by a time limit keeps what it measured
            print(f"  {name}: {ratio.value:.4f} [{ratio.low:.4f}, {ratio.high:.4f}], halves {first:.4f} {second:.4f}", flush=True)
    for name, rows in found.items():
        ratios = [r for r, _, _ in rows]
        values = [r.value for r in ratios]
        misses = sum(not (r.low <= 1.0 <= r.high) for r in ratios)
        corr = halves_correlation([(a, b) for _, a, b in rows]) if len(rows) > 2 else None
        sd = statistics.stdev(values) if len(values) > 1 else 0.0
        print(f"| {name} | {' '.join(f'{v:.3f}' for v in values)} | {statistics.median(values):.3f} | "
              f"{max(values) - min(values):.3f} | {sd:.3f} | {'-' if corr is None else f'{corr:.2f}'} | "
              f"{misses} of {len(ratios)} | {statistics.median(r.half_width for r in ratios):.1%} |")


if __name__ == "__main__":
    main()
