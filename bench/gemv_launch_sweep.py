"""Where the persistent GEMV's launch settings come from: every combination of the stages it keeps
in flight (`PERSISTENT_IN_FLIGHT`, built into the kernel), its weight slots (`PERSISTENT_VARIANT`),
whether x is copied in by the producer (`PERSISTENT_X_ONE_TRIP`: the default threshold, or 0 to
copy it always) and the stages it fetches into L2 before the kernel ahead ends
(`PERSISTENT_PREFETCH_STAGES`), timed back to back as `repro_gemv_chain.py` times the default:
the median per-call device time of CUDA-graph replays of 24 calls cycling weight copies, in rounds
that interleave the combinations. Every combination's output must equal the default's bit for
bit, and the default's must equal the CPU emulation on sampled columns. Run it on new hardware
before trusting the defaults there.

    python bench/gemv_launch_sweep.py [--shapes 4096x4096,3584x4608] [--m 1] [--rounds 3] [--json PATH]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.repro_gemm import check_bitwise, copy_bandwidth, graph_ms, weight_copies  # noqa: E402
from tasks.reproducible import cuda_kernels as ck  # noqa: E402

IN_FLIGHT = (2, 3)
SLOTS = (4, 5, 6)
X_ONE_TRIP = (ck.PERSISTENT_X_ONE_TRIP, 0)
PREFETCH = (1, 2)
CALLS = 24


class Builds:
    """The kernels built with each in-flight count, swapped into cuda_kernels' launcher cache."""

    def __init__(self) -> None:
        self.default_source = ck.SOURCE
        self.define = f"#define GP_IN_FLIGHT {ck.PERSISTENT_IN_FLIGHT}\n"
        if self.define not in self.default_source:
            raise SystemExit("cuda_kernels.SOURCE no longer defines GP_IN_FLIGHT as this sweep expects")
        self.launchers: dict[int, dict] = {}
        self.current: int | None = None

    def use(self, in_flight: int) -> None:
        if self.current is not None:
            self.launchers[self.current] = dict(ck._launchers)
        ck.SOURCE = self.default_source.replace(self.define, f"#define GP_IN_FLIGHT {in_flight}\n")
        ck._launchers.clear()
        ck._launchers.update(self.launchers.get(in_flight, {}))
        self.current = in_flight


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", default="4096x4096,3584x4608,4096x14336", help="K x N, comma-separated")
    parser.add_argument("--m", type=int, default=1, help="rows of x (bf16), at most 4")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", help="write all figures to this file")
    args = parser.parse_args()
    dev, gen = torch.device("cuda"), torch.Generator().manual_seed(0)
    bw = copy_bandwidth()
    print(f"device {torch.cuda.get_device_name()}, torch {torch.__version__}, copy bandwidth {bw / 1e12:.2f} TB/s")
    default = (
        ck.PERSISTENT_IN_FLIGHT,
        ck.PERSISTENT_VARIANT[0],
        ck.PERSISTENT_X_ONE_TRIP,
        ck.PERSISTENT_PREFETCH_STAGES,
    )
    combos = list(itertools.product(IN_FLIGHT, SLOTS, X_ONE_TRIP, PREFETCH))
    if default not in combos:
        combos.insert(0, default)
    builds, results, bad = Builds(), [], 0
    for shape in args.shapes.split(","):
        k, n = (int(v) for v in shape.split("x"))
        if not ck.gemv_persistent_fits(args.m, n, k, ck.PERSISTENT_VARIANT, torch.bfloat16):
            print(f"K={k} N={n} M={args.m}: the persistent GEMV does not take this shape; skipped")
            continue
        copies = weight_copies(n, k, dev)
        x = torch.randn(args.m, k, device=dev).to(torch.bfloat16)
        times: dict[tuple, list[float]] = {c: [] for c in combos}
        want = None
        mb = next(r for r in ck.PERSISTENT_MB if r >= args.m)
        ck.PERSISTENT_X_ONE_TRIP = default[2]
        copies_x_by_default = ck.persistent_copies_x(mb, k)
        for _ in range(args.rounds):
            for combo in [default] + [c for c in combos if c != default]:
                in_flight, slots, one_trip, prefetch = combo
                builds.use(in_flight)
                ck.PERSISTENT_X_ONE_TRIP, ck.PERSISTENT_PREFETCH_STAGES = one_trip, prefetch
                if not ck.gemv_persistent_fits(args.m, n, k, (slots, 1), x.dtype) or (
                    one_trip != default[2] and copies_x_by_default
                ):
                    continue  # does not fit, or the same kernel as with the default threshold

                def call(w, slots=slots, x=x):
                    return ck.gemv_persistent(x, w, None, variant=(slots, 1))

                got = call(copies[0])
                if want is None:  # the default, first in every round
                    want = got
                    ok, sample = check_bitwise(x, copies[0], got, gen)
                    bad += not ok
                    print(f"K={k} N={n} M={args.m}: default vs CPU {ok} ({sample})", flush=True)
                elif not torch.equal(got.view(torch.int32), want.view(torch.int32)):
                    bad += 1
                    print(f"  {combo}: NOT bitwise equal to the default", flush=True)
                times[combo].append(graph_ms([lambda w=w: call(w) for w in copies], CALLS) * 1e3)
        share = n * k * 2 / bw * 1e6  # us the weight takes at the copy bandwidth
        ranked = sorted((c for c in combos if times[c]), key=lambda c: statistics.median(times[c]))
        print("  (in flight, slots, x one-trip limit, prefetch stages): device us, median [range], % of copy bw")
        for combo in ranked:
            t = times[combo]
            med = statistics.median(t)
            mark = "  <- default" if combo == default else ""
            print(f"  {combo}: {med:6.2f} [{min(t):.2f}-{max(t):.2f}] {100 * share / med:5.1f}%{mark}", flush=True)
            results.append({"K": k, "N": n, "M": args.m, "combo": combo, "us": t, "default": combo == default})
        del copies
    builds.use(ck.PERSISTENT_IN_FLIGHT)
    ck.PERSISTENT_X_ONE_TRIP, ck.PERSISTENT_PREFETCH_STAGES = default[2], default[3]
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "copy_bw": bw, "rows": results}, f, indent=1)
    print(f"{bad} outputs not bitwise equal")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
