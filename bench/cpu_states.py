"""Does a CPU of this host change speed, how often, and is that per CPU or per process?

One process visits every CPU in turn (sched_setaffinity), and on each runs a fixed chunk of work:
a pure-Python loop, and, with --cuda, a host-bound CUDA call (tiny kernel launches, then a
synchronisation). Only one of our threads is busy at any moment, so what changes a chunk's time
is the CPU itself: another tenant on its core, its clock, the hypervisor (steal time), its
distance from the GPU (NUMA node).

    python bench/cpu_states.py [--seconds 30] [--window 2] [--cuda] [--json out.json]

Prints the topology, each CPU's steal time over the run, and per CPU and time window the median
chunk time relative to the whole run's median (1.00 = typical; 1.9 = a slow state), then what the
windows hide: how long slow spells last and whether the CPUs change together (`spells`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import time
from pathlib import Path


def _read(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return "?"


def gpu_local_cpus() -> str:
    """The CPUs the kernel calls local to GPU 0 (its PCI device's NUMA node), or "?"."""
    try:
        bus = subprocess.run(["nvidia-smi", "--query-gpu=pci.bus_id", "--format=csv,noheader", "-i", "0"],
                             capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "?"
    if not bus:
        return "?"
    device = bus.lower()[-12:]  # 00000000:18:00.0 -> 0000:18:00.0
    return f"{_read(f'/sys/bus/pci/devices/{device}/local_cpulist')} (node {_read(f'/sys/bus/pci/devices/{device}/numa_node')})"


def topology(cpus: list[int]) -> dict:
    info = _read("/proc/cpuinfo")
    model = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")), "?")
    flags = next((line for line in info.splitlines() if line.startswith("flags")), "")
    return {
        "model": model,
        "hypervisor": " hypervisor" in flags,
        "siblings": {cpu: _read(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list") for cpu in cpus},
        "governor": _read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
        "numa_nodes": {p.name: _read(str(p / "cpulist")) for p in sorted(Path("/sys/devices/system/node").glob("node[0-9]*"))},
        "gpu0_local_cpus": gpu_local_cpus(),
    }


def steal_ticks() -> dict[int, int]:
    """Per CPU, the ticks the hypervisor gave to someone else (/proc/stat's eighth field)."""
    ticks = {}
    for line in _read("/proc/stat").splitlines():
        name, *fields = line.split()
        if name.startswith("cpu") and name != "cpu" and len(fields) >= 8:
            ticks[int(name[3:])] = int(fields[7])
    return ticks


def python_chunk(n: int) -> None:
    total = 0
    for i in range(n):
        total += i * i


def calibrate(target_ns: float) -> int:
    n = 1000
    while True:
        t0 = time.perf_counter_ns()
        python_chunk(n)
        if time.perf_counter_ns() - t0 >= target_ns:
            return n
        n *= 2


SLOW = 1.25  # a chunk over this many times the run's median counts as a slow state


def spells(samples: dict[int, list[tuple[float, float]]]) -> dict:
    """How often the CPUs change state, which windowed medians hide: the share of slow chunks; the
    lengths (ms) of slow spells on one CPU (from the first slow visit to the next fast one); how
    often two consecutive visits to one CPU agree on the state; and how often two chunks run one
    after the other on different CPUs agree, against what independent CPUs would give."""
    overall = statistics.median(t for runs in samples.values() for _, t in runs)
    slow = {cpu: [(at, t > SLOW * overall) for at, t in runs] for cpu, runs in samples.items()}
    flat = [state for runs in slow.values() for _, state in runs]
    share = sum(flat) / len(flat) if flat else float("nan")
    lengths, agree, revisit = [], [], []
    for runs in slow.values():
        began = None
        for (at, state), (next_at, next_state) in zip(runs, runs[1:]):
            agree.append(state == next_state)
            revisit.append(next_at - at)
        for at, state in runs:
            if state and began is None:
                began = at
            elif not state and began is not None:
                lengths.append((at - began) * 1e3)
                began = None
    seq = sorted((at, cpu, state) for cpu, runs in slow.items() for at, state in runs)
    across = [a[2] == b[2] for a, b in zip(seq, seq[1:]) if a[1] != b[1]]
    quartiles = statistics.quantiles(lengths, n=4) if len(lengths) > 1 else [float("nan")] * 3
    return {"slow_share": share, "spell_ms_quartiles": quartiles, "spells": len(lengths),
            "revisit_ms": statistics.median(revisit) * 1e3 if revisit else float("nan"),
            "same_cpu_agreement": sum(agree) / len(agree) if agree else float("nan"),
            "other_cpu_agreement": sum(across) / len(across) if across else float("nan"),
            "independent_agreement": share * share + (1 - share) * (1 - share)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--window", type=float, default=2.0, help="seconds per column of the table")
    parser.add_argument("--cuda", action="store_true", help="also time a host-bound CUDA call on each CPU")
    parser.add_argument("--launches", type=int, default=40)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    cpus = sorted(os.sched_getaffinity(0))
    print(json.dumps(topology(cpus)))
    kinds = ["python"]
    cuda_call = None
    if args.cuda:
        import torch

        x = torch.zeros(1024, device="cuda")

        def cuda_call() -> None:
            for _ in range(args.launches):
                x.add_(1.0)
            torch.cuda.synchronize()

        for _ in range(50):
            cuda_call()
        kinds.append("cuda")
    n = calibrate(500_000)
    samples: dict[str, dict[int, list[tuple[float, float]]]] = {k: {c: [] for c in cpus} for k in kinds}
    steal0 = steal_ticks()
    start = time.monotonic()
    while time.monotonic() - start < args.seconds:
        for cpu in cpus:
            os.sched_setaffinity(0, {cpu})
            for kind in kinds:
                t0 = time.perf_counter_ns()
                python_chunk(n) if kind == "python" else cuda_call()
                samples[kind][cpu].append((time.monotonic() - start, (time.perf_counter_ns() - t0) / 1e3))
    os.sched_setaffinity(0, set(cpus))
    steal1 = steal_ticks()
    hz = os.sysconf("SC_CLK_TCK")
    print("steal over the run (ms) per CPU:", {c: round((steal1.get(c, 0) - steal0.get(c, 0)) * 1000 / hz) for c in cpus})

    windows = max(1, int(args.seconds // args.window))
    for kind in kinds:
        overall = statistics.median(t for c in cpus for _, t in samples[kind][c])
        print(f"\n{kind}: median chunk {overall:.1f} us; per CPU and {args.window:g} s window, median / overall")
        print("cpu  " + " ".join(f"{w * args.window:>5.0f}" for w in range(windows)) + "   spread")
        for cpu in cpus:
            cells = []
            for w in range(windows):
                times = [t for at, t in samples[kind][cpu] if w * args.window <= at < (w + 1) * args.window]
                cells.append(statistics.median(times) / overall if times else float("nan"))
            finite = [c for c in cells if c == c]
            spread = max(finite) / min(finite) if finite else float("nan")
            print(f"{cpu:>3}  " + " ".join(f"{c:5.2f}" for c in cells) + f"   {spread:5.2f}")
        found = spells(samples[kind])
        low, mid, high = found["spell_ms_quartiles"]
        print(f"slow (over {SLOW:g}x the median) {found['slow_share']:.0%} of chunks; {found['spells']} slow spells, "
              f"median {mid:.0f} ms (quartiles {low:.0f}, {high:.0f}); visits to one CPU {found['revisit_ms']:.0f} ms "
              f"apart agree {found['same_cpu_agreement']:.0%}; chunks back to back on two CPUs agree "
              f"{found['other_cpu_agreement']:.0%} (independent CPUs: {found['independent_agreement']:.0%})")
    if args.json:
        args.json.write_text(json.dumps({"samples": {k: {str(c): v for c, v in s.items()} for k, s in samples.items()},
                                         "steal": {c: steal1.get(c, 0) - steal0.get(c, 0) for c in cpus}}))


if __name__ == "__main__":
    main()
