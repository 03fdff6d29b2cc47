"""An honest but slow solution (SLEEP_S of sleep, then the all-reduce) that makes the clocks say it
is fast: every patched clock runs at full speed except while the solution runs, when it all but
stops (it subtracts 99% of the time spent inside the solution so far, so it stays monotonic).

Problem: allreduce.

VARIANT "none": no patch (the control: the honest slow time).
VARIANT "perf_counter" / "perf_counter_ns": that function of the `time` module.
VARIANT "all_clocks": perf_counter, perf_counter_ns, monotonic, monotonic_ns, time and time_ns.
VARIANT "module_clock": the `time` name inside the judge's timing modules (any loaded `evaluator.*`
module but the one that guards its own clock) is rebound to a fake module with the slowed clocks.
VARIANT "timing_block": `evaluator.timing`'s timed loops report the solution's samples divided by 100.
VARIANT "statistics": `statistics.median`, `mean`, `fmean` return a hundredth of the truth.
VARIANT "results_stats": `evaluator.results.stats` reports a hundredth of every mean and median.
VARIANT "cuda_event": `torch.cuda.Event.elapsed_time` returns a hundredth (meaningful on a GPU only).

The judge must report the time it really spent (at least the sleep per call), or `rejected`.
"""

import statistics
import sys
import time
import types

import torch
import torch.distributed as dist

VARIANT = "none"
SLEEP_S = 0.005
SHRINK = 0.01

_real_ns = time.perf_counter_ns
_inside = [0]  # ns spent inside the solution so far


def _fake_ns() -> int:
    return _real_ns() - int((1 - SHRINK) * _inside[0])


def _fake_s() -> float:
    return _fake_ns() / 1e9


def _fake_module():
    fake = types.ModuleType("time")
    fake.__dict__.update({k: getattr(time, k) for k in dir(time) if not k.startswith("__")})
    fake.perf_counter, fake.perf_counter_ns = _fake_s, _fake_ns
    fake.monotonic, fake.monotonic_ns = _fake_s, _fake_ns
    return fake


def _shrink_solution_samples(block):
    def timed_block(fn, *args, **kwargs):
        samples, wall = block(fn, *args, **kwargs)
        if getattr(fn, "__module__", None) == __name__ or getattr(fn, "__globals__", None) is globals():
            return [s * SHRINK for s in samples], wall * SHRINK
        return samples, wall

    return timed_block


def _install() -> None:
    if VARIANT == "none":
        return
    if VARIANT == "perf_counter":
        time.perf_counter = _fake_s
    elif VARIANT == "perf_counter_ns":
        time.perf_counter_ns = _fake_ns
    elif VARIANT == "all_clocks":
        time.perf_counter, time.perf_counter_ns = _fake_s, _fake_ns
        time.monotonic, time.monotonic_ns = _fake_s, _fake_ns
        time.time, time.time_ns = _fake_s, _fake_ns
    elif VARIANT == "module_clock":
        fake = _fake_module()
        for name, module in list(sys.modules.items()):
            guarded = name in ("evaluator.harness", "evaluator.judge")
            if name.startswith("evaluator.") and not guarded and getattr(module, "time", None) is time:
                module.time = fake
    elif VARIANT == "timing_block":
        timing = sys.modules.get("evaluator.timing")
        if timing is not None:
            for name in ("_block_cpu", "_block_gpu"):
                if hasattr(timing, name):
                    setattr(timing, name, _shrink_solution_samples(getattr(timing, name)))
    elif VARIANT == "statistics":
        for name in ("median", "mean", "fmean"):
            real = getattr(statistics, name)
            setattr(statistics, name, lambda data, *a, real=real, **k: real(data, *a, **k) * SHRINK)
    elif VARIANT == "results_stats":
        from evaluator import results

        real_stats = results.stats

        def stats(samples_us):
            out = real_stats(samples_us)
            return {k: (v * SHRINK if k.endswith("_us") else v) for k, v in out.items()}

        results.stats = stats
    elif VARIANT == "cuda_event":
        real = torch.cuda.Event.elapsed_time
        torch.cuda.Event.elapsed_time = lambda self, end: real(self, end) * SHRINK
    else:
        raise ValueError(f"unknown variant {VARIANT!r}")


try:
    _install()
except ImportError:
    pass  # nothing of the judge's to patch in this process


@torch.no_grad()
def solution(tensor):
    t0 = _real_ns()
    time.sleep(SLEEP_S)
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    _inside[0] += _real_ns() - t0
    return tensor
