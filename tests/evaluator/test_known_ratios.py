"""Solutions whose speed relative to the reference is known by construction: the reference called
twice per call (speedup 0.5), and the reference followed by a fixed wait of known length (the
solution's time is the reference's plus that length). The timing protocol must report both: an
unsubtracted cost per call would pull the first toward 1, a timer that misses deferred work would
lose the second.

The wait holds both the host and the GPU for its length (evaluator/calibration.py): a host spin, and
on a GPU a spin kernel on the GPU's clock queued after the call's work, its launch inside the
host's spin, so each call takes the wait longer whichever of host and GPU bounds it.

In cpu mode (gloo on a shared host) the intervals are wide; there the test is that they hold the
true value: the wait's length, and for the twice-called reference the ratio that plain processes
timing it without the judge read on the same host. On a GPU in gpu mode the point estimates must be close: 0.50 +- 0.015, and the wait
within 5% of its length, on every shape."""

from __future__ import annotations

import pytest

from evaluator import calibration, stopwatch
from evaluator.launch import EvaluationRequest, evaluate

torch = pytest.importorskip("torch")

def judged(problem: str, code: str, mode: str, world_size: int, shapes: list[str] | None = None, **kw) -> dict:
    doc = evaluate(EvaluationRequest(problem=problem, solution_code=code,
                                     world_size=world_size, mode=mode, shapes=shapes, **kw))
    assert doc["status"] == "correct", doc["reason"]
    return doc


def wait_interval(shape: dict) -> tuple[float, float]:
    """The wait per call the two sides' intervals allow: [solution low - reference high,
    solution high - reference low]."""
    (sol_low, sol_high), (ref_low, ref_high) = shape["solution"]["interval_us"], shape["reference"]["interval_us"]
    return sol_low - ref_high, sol_high - ref_low


# -- cpu mode: the intervals hold the true values -------------------------------------------------

# Batches of 8 calls: in batches of one, the ranks' start skew and the host's jitter swamp the
# allgather's few milliseconds.
CPU_CALLS = 8
CPU = {"warmup": 3, "iters": 10 * CPU_CALLS, "trials": 1, "timeout_s": 240}


def widened(point: float, low: float, high: float, factor: float = 1.5) -> tuple[float, float]:
    """A 95% interval made 1.5 times as wide about its point: a test that the 95% interval holds the
    true value fails one run in twenty by construction (seen in CI); this one, about one in 300."""
    return point - factor * (point - low), point + factor * (high - point)


@pytest.mark.slow
def test_calling_the_reference_twice_reads_as_a_plain_stopwatch_does_on_cpu():
    """On a compute-bound problem (tp_muon_orthogonalization's Newton-Schulz iterations, about 40 ms
    a call on the CPU), whose second call costs about what its first did. A copy-bound call is not
    such a ruler on the CPU: the allgather called twice read 0.52-0.64 (median 0.56) at world 2.

    The true ratio is the one this host gives now: the same ruler timed in plain processes without
    the judge (evaluator/stopwatch.py), which the judge's interval must meet. Against 0.5 itself
    the test failed in CI at 0.526 [0.509, 0.558], and on a 2-core host the judge read a mean of
    0.512 at world 2 where plain processes read 0.498 (bench/NOTES.md, "Known ratios")."""
    problem, code = "tp_muon_orthogonalization", calibration.repeated("tp_muon_orthogonalization", 2)
    plain = stopwatch.plain_reading(problem, "default", code, world_size=2, pairs=20, calls=CPU_CALLS)
    doc = judged(problem, code, "cpu", 2, ["default"], **CPU)
    shape = doc["shapes"][0]
    low, high = widened(shape["speedup"], *shape["speedup_interval"])
    seen = (shape["speedup"], shape["speedup_interval"], plain.ratio, shape["timing_run"])
    assert low <= plain.ratio.high and plain.ratio.low <= high, seen


def test_the_protocols_cost_is_taken_off_every_batch_before_the_ratio():
    """What the twice-called test on the CPU no longer shows (its calls dwarf the protocol's cost):
    each side's batch time less the median null batch, per call. A call as cheap as the protocol
    then still reads 0.5 when called twice, where an unsubtracted cost would read 0.75."""
    from evaluator.timed_pairs import per_call_us
    from evaluator.timing_stats import paired_ratio

    call_ns, fixed_ns, calls = 50_000, 400_000, 8
    rows = [(calls * call_ns + fixed_ns + jitter, 2 * calls * call_ns + fixed_ns - jitter, fixed_ns + null)
            for jitter, null in [(0, 0), (3_000, 20_000), (-2_000, -20_000), (1_000, 5_000), (0, -5_000)]]
    reference, solution = per_call_us(rows, calls)
    assert reference[0] == pytest.approx(call_ns / 1e3) and solution[0] == pytest.approx(2 * call_ns / 1e3)
    assert paired_ratio(reference, solution).value == pytest.approx(0.5, abs=0.01)


@pytest.mark.slow
def test_a_fixed_wait_per_call_lies_in_the_interval_of_the_time_difference_on_cpu():
    wait_us = 5000.0
    doc = judged("allgather", calibration.waiting("allgather", wait_us), "cpu", 2, ["default"], **CPU)
    low, high = wait_interval(doc["shapes"][0])
    assert low <= wait_us <= high, (low, high, doc["shapes"][0])


# -- gpu mode on one GPU: the point estimates are right ------------------------------------------

needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
# Problems that run at world 1 and leave their inputs alone (calling such a reference twice gives
# its answer again): a collective, a communication-bound and a compute-bound problem.
GPU_PROBLEMS = ["allgather", "fp8_reduce_scatter_grads", "tp_muon_orthogonalization"]


def shape_line(problem: str, shape: dict) -> str:
    return (f"{problem}/{shape['name']}: reference {shape['reference']['time_us']:.1f} us, solution "
            f"{shape['solution']['time_us']:.1f} us, speedup {shape['speedup']:.4f} {shape['speedup_interval']}, "
            f"{shape['timing_run']}")


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("problem", GPU_PROBLEMS)
def test_calling_the_reference_twice_reads_one_half_on_every_shape_on_a_gpu(problem):
    doc = judged(problem, calibration.repeated(problem, 2), "gpu", 1, timeout_s=900)
    for shape in doc["shapes"]:
        print(shape_line(problem, shape))
    off = [s["name"] for s in doc["shapes"] if abs(s["speedup"] - 0.5) > 0.015]
    assert not off, [shape_line(problem, s) for s in doc["shapes"]]


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("problem", GPU_PROBLEMS)
def test_a_fixed_wait_per_call_reads_as_its_length_on_every_shape_on_a_gpu(problem):
    wait_us = 1000.0
    doc = judged(problem, calibration.waiting(problem, wait_us), "gpu", 1, timeout_s=900)
    off = []
    for shape in doc["shapes"]:
        seen = shape["solution"]["time_us"] - shape["reference"]["time_us"]
        print(shape_line(problem, shape), f"wait read {seen:.1f} us of {wait_us}")
        if abs(seen - wait_us) > 0.05 * wait_us:
            off.append((shape["name"], seen))
    assert not off, off

