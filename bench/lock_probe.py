"""Does holding a process (the judge's freeze: GPU lock, then SIGSTOP; thaw: SIGCONT, then unlock)
change how fast it runs afterwards? Two twin processes run the same host-bound CUDA call (many
tiny kernel launches, then a synchronisation); between measurements one twin is held and released
the way the judge holds the solution's sandbox, the other is left alone, and the cycle is run
with the lock and with signals only. Before that, fresh twin pairs that are never held show how far
two processes of the same code run apart with no judge at all. With --hold-gib, each twin also
keeps that much GPU memory allocated and written: does releasing a process that holds much memory
cost its first call (the judge releases the solution before each of its batches, and a first call
inside the clock that pays for it would read the solution slow: identical code on
ring_attention_tp's large shape, 1.7 s calls on large tensors, read 0.2% slow on one H100)?

    python bench/lock_probe.py [--cycles 20] [--calls 200] [--launches 40] [--fresh 6] [--hold-gib 0]

Prints the fresh pairs' ratios, then per cycle kind the held and the untouched twin's median call
time (us) before and after, and their first call after each release.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evaluator.gpu_lock import GpuLocker  # noqa: E402

TWIN = r"""
import json, sys, time, torch
x = torch.zeros(1024, device="cuda")
held = torch.ones(int(float(sys.argv[1]) * 2**30), dtype=torch.uint8, device="cuda") if float(sys.argv[1]) else None
def call(launches):
    for _ in range(launches):
        x.add_(1.0)
    torch.cuda.synchronize()
for line in sys.stdin:
    calls, launches = json.loads(line)
    times = []
    for _ in range(calls):
        t0 = time.perf_counter_ns()
        call(launches)
        times.append((time.perf_counter_ns() - t0) / 1e3)
    first = times[0]
    times.sort()
    print(json.dumps([first, times[len(times) // 2]]), flush=True)
"""


class Twin:
    def __init__(self, hold_gib: float = 0.0) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", TWIN, str(hold_gib)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)

    def measure(self, calls: int, launches: int) -> tuple[float, float]:
        """The median call's time and the first call's (us)."""
        self.proc.stdin.write(json.dumps([calls, launches]) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:  # the twin died: its traceback is on stderr above (out of GPU memory, say)
            raise SystemExit(f"a twin process ended (exit code {self.proc.wait()}); with --hold-gib, two twins "
                             "hold that much each at once")
        first, median = json.loads(line)
        return median, first

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cycles", type=int, default=20)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--launches", type=int, default=40)
    ap.add_argument("--fresh", type=int, default=6, help="fresh twin pairs, never held")
    ap.add_argument("--hold-gib", type=float, default=0.0,
                    help="GPU memory each of the held and the untouched twin keeps (both at once: under half the GPU's)")
    args = ap.parse_args()
    print("fresh twin pairs, never held: first / second twin's median call (us), 5 alternating measurements")
    for _ in range(args.fresh):
        a, b = Twin(), Twin()
        try:
            a.measure(args.calls, args.launches), b.measure(args.calls, args.launches)
            ta, tb = zip(*[(a.measure(args.calls, args.launches)[0], b.measure(args.calls, args.launches)[0]) for _ in range(5)])
            print(f"  {statistics.median(ta):8.1f} / {statistics.median(tb):8.1f}   ratio {statistics.median(ta) / statistics.median(tb):.3f}")
        finally:
            a.close()
            b.close()
    held, alone = Twin(args.hold_gib), Twin(args.hold_gib)
    locker = GpuLocker()
    try:
        for twin in (held, alone):  # warm both
            twin.measure(args.calls, args.launches)

        def both() -> tuple[float, float, float, float]:
            """Median calls, then first calls: held twin, untouched twin."""
            (h, first_h), (a, first_a) = held.measure(args.calls, args.launches), alone.measure(args.calls, args.launches)
            return h, a, first_h, first_a

        before = [both() for _ in range(5)]
        rows = {"before": before}
        for kind in ("signals", "lock", "signals again"):
            after, hold_ms = [], []
            for _ in range(args.cycles):
                t0 = time.perf_counter()
                if kind == "lock":
                    failed = locker.lock({held.proc.pid}, 2000)
                    assert not failed, failed
                os.kill(held.proc.pid, signal.SIGSTOP)
                time.sleep(0.01)
                os.kill(held.proc.pid, signal.SIGCONT)
                if kind == "lock":
                    failed = locker.unlock()
                    assert not failed, failed
                hold_ms.append((time.perf_counter() - t0) * 1e3)
                after.append(both())
            rows[kind] = after
            print(f"{kind}: hold and release {statistics.median(hold_ms):.2f} ms (median of {args.cycles})")
        print(f"median call, {args.launches} launches then a sync, us (held twin / untouched twin):")
        for kind, pairs in rows.items():
            h = statistics.median(p[0] for p in pairs)
            a = statistics.median(p[1] for p in pairs)
            first_h = statistics.median(p[2] for p in pairs)
            first_a = statistics.median(p[3] for p in pairs)
            print(f"  {kind:14s} {h:8.1f} / {a:8.1f}   ratio {h / a:.3f}   "
                  f"held range {min(p[0] for p in pairs):.1f}-{max(p[0] for p in pairs):.1f}   "
                  f"first call {first_h:.1f} / {first_a:.1f}")
    finally:
        locker.close()
        held.close()
        alone.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
