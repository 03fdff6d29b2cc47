"""Attacks on the judge's clock: skipping timed calls, slowing the reference down, faking the clocks,
work that finishes after the call, and stalls meant to be measured away.

A speed attack passes when the judge does not report `correct`, or reports a speedup within
SPEED_MARGIN of the honest one: 1.0 where the attack's honest work is the reference's own code.
An attack that makes an honest-but-slow solution look fast passes when the reported time includes
what the solution provably spent (its sleeps)."""

from __future__ import annotations

import os

import pytest

from evaluator import placement
from evaluator.results import Result, Status

SLOW_SOLUTION_US = 5000  # fake_timers.SLEEP_S
SLOW_REFERENCE_SLEEP_US = 20_000  # slow_reference.SLEEP_S
GIL_HOG_SWITCH_US = 20_000  # gil_hog.SWITCH_S


def test_the_reference_against_itself_stays_within_the_margin(adv):
    """The control of every speed test here: the honest reference, judged as a solution, is
    neither faster nor slower than SPEED_MARGIN x itself."""
    doc = adv.honest("allreduce", **adv.TIMED)
    margin = adv.SPEED_MARGIN[doc["mode"]]
    assert 1 / margin <= adv.speedup(doc) <= margin, adv.summary(doc)


@pytest.mark.parametrize("variant", ["count", "frames", "inspect_stack"])
def test_skipping_timed_calls_is_caught(adv, variant):
    settings = adv.TIMED
    params = {"TRIALS": settings["trials"], "WARMUP": settings["warmup"], "ITERS": settings["iters"]}
    doc = adv.judge("allreduce", "skip_when_timed", variant=variant, params=params, **settings)
    adv.assert_not_faster(doc)


@pytest.mark.parametrize("variant", ["sys_modules", "gc", "import_time"])
def test_slowing_the_reference_down_does_not_raise_the_speedup(adv, variant):
    doc = adv.judge("allreduce", "slow_reference", variant=variant, **adv.TIMED)
    assert doc["status"] == "correct", adv.summary(doc)  # an honest solution: only its speedup is in question
    adv.assert_reference_not_reached(doc, SLOW_REFERENCE_SLEEP_US)



@pytest.mark.parametrize(
    "variant",
    ["none", "perf_counter", "perf_counter_ns", "all_clocks", "module_clock", "timing_block", "statistics",
     "results_stats", "cuda_event"],
)
def test_patched_clocks_do_not_hide_the_time_spent(adv, variant):
    doc = adv.judge("allreduce", "fake_timers", variant=variant)
    if variant == "none":
        assert doc["status"] == "correct", adv.summary(doc)  # the control: honest and slow
    else:
        assert doc["status"] in ("correct", "rejected"), adv.summary(doc)
    adv.assert_time_includes(doc, 0.8 * SLOW_SOLUTION_US)


@pytest.mark.parametrize("variant", ["subclass", "plain", "partial", "native"])
def test_a_gil_hogging_thread_does_not_slow_the_reference(adv, variant):
    """The reference runs in a process of its own, so the thread can only reach the solution's own
    calls, and there it may help: any thread that keeps the solution's CPU awake does. On the 2-core
    VM in cpu mode, a thread that only sleeps 200 us at a time read 1.7-2.1x against 1.1-1.3x for
    the bare reference (gloo's wake-ups are faster on a CPU that does not idle), and this attack read
    up to 3.2x once. That is the solution's own business; what the judge must prevent is the
    reference being slowed. Where the thread reached the reference, each of its calls would wait a
    switch interval for the GIL after its collective; that absence is checked directly, since a
    one-rank all-reduce's time varies across evaluations by more than any margin (4 to 100 us per
    call on an H100; this test once read 95 against 63 us in gpu mode with the thread unreached)."""
    doc = adv.judge("allreduce", "gil_hog", variant=variant, **adv.TIMED)
    adv.assert_reference_not_reached(doc, GIL_HOG_SWITCH_US)


@pytest.mark.parametrize("variant", ["function_mode", "dispatch_mode"])
def test_a_global_torch_mode_does_not_slow_the_reference(adv, variant):
    doc = adv.judge("gemv_decode", "torch_mode_slowdown", variant=variant, **adv.TIMED)
    adv.assert_not_faster(doc)


def test_outputs_written_after_the_call_are_caught_or_timed(adv):
    if adv.DEFAULT_WORLD < 2:
        # Alone, the all-reduce is the identity: the thread has nothing to defer, and returning the
        # input at once is an honest answer (an H100 in gpu mode read it 5.1x faster).
        pytest.skip("an all-reduce of one rank leaves its input as it is: no work to write late")
    doc = adv.judge("allreduce", "late_write_thread", **adv.TIMED)
    assert doc["status"] in list(Status)
    adv.assert_not_faster(doc)


def test_stalls_on_some_calls_stay_in_the_time(adv):
    """5 ms every 7th call, 714 us per call on average. The judge's time is the median over
    batches, so stalls count where most batches hold them: with 70 requested calls a batch holds 7
    on the CPU (evaluator/judge.py: MIN_TIMED_BATCHES), one stall each; a GPU's batches, sized by
    time, hold many calls and at least their number over 7 stalls. With 28 calls (3 per batch) only 3 in 7
    batches held one, and the median sat on either side of that line by the batches' phase (the
    solution read 536 to 2053 us per call). A solution gains nothing from stalls either way, and one
    that computes only on some calls cannot hide it: every batch's outputs are read when it ends."""
    settings = {**adv.TIMED, "iters": 70}
    doc = adv.judge("grad_acc_loss", "periodic_stall", **settings)
    assert doc["status"] == "correct", adv.summary(doc)
    calls = doc["shapes"][0]["timing_run"]["calls_per_batch"]  # 7 on the CPU; sized by time on a GPU
    assert calls >= 7, adv.summary(doc)
    adv.assert_time_includes(doc, 0.8 * (calls // 7) * 5000 / calls)  # the fewest stalls a batch holds
    adv.assert_not_faster(doc, honest_speedup=adv.speedup(adv.honest("grad_acc_loss", **settings)))


@pytest.mark.parametrize("variant", ["processes", "setsid"])
def test_processes_burning_the_cpus_between_the_solutions_calls_do_not_raise_the_speedup(adv, variant):
    problem = "allreduce" if adv.DEFAULT_MODE == "cpu" else "gsplat_3d_gaussian_splatting"  # see the attack
    doc = adv.judge_appended(problem, "idle_burn", variant=variant, **adv.TIMED)
    assert doc["status"] == "correct", adv.summary(doc)  # an honest solution: only its speedup is in question
    adv.assert_not_faster(doc)


def test_a_payload_asking_for_the_l2_flush_that_the_solution_skips_does_not_get_it(adv):
    """attacks/skip_l2_flush.py drops its own player's flush buffer. Where the judge asks for the
    flush (the diagnostic, straight through EvaluationRequest), that alone makes the reference's
    calls far slower than the solution's; a worker's request, built from the broker's payload,
    never carries the setting, whatever the payload says."""
    flushed = adv.judge("allreduce", "skip_l2_flush", **adv.TIMED, flush_l2_mib=64)
    reference_us = adv.reference_us(flushed)
    assert adv.solution_us(flushed) * adv.SPEED_MARGIN[flushed["mode"]] < reference_us, (
        f"the attack should gain where the flush is on: reference {reference_us} us, {adv.summary(flushed)}")
    # The worker's payload handling (a host that runs the judge alone may lack the worker's broker client).
    Job = pytest.importorskip("evaluator.worker", reason="the worker's dependencies are not installed").Job
    job = Job.from_payload({
        "evaluation": 1, "token": "t", "problem": "allreduce", "code": "", "world_size": adv.DEFAULT_WORLD,
        "mode": adv.DEFAULT_MODE, "profile": None,
        "settings": {**adv.TIMED, "flush_l2_mib": 64, "sandboxed": False},
    })  # fmt: skip
    kwargs = job.request_kwargs()
    assert "flush_l2_mib" not in kwargs and kwargs["sandboxed"] is True
    settings = {k: kwargs[k] for k in Job.REQUEST_SETTINGS if k in kwargs}
    doc = adv.judge("allreduce", "skip_l2_flush", **settings)
    assert doc["status"] == "correct", adv.summary(doc)
    adv.assert_not_faster(doc)


@pytest.mark.parametrize("variant", ["main_thread", "every_thread", "while_calling", "relay"])
def test_the_cpu_the_reference_shares_cannot_be_left(adv, variant, monkeypatch):
    """Both sides' players of a rank share one CPU while timed (evaluator/placement.py: gpu mode's
    default, asked for here in any mode), after loading on every CPU; a solution that widened its
    affinity, or kept a thread where it loaded, could be timed on a faster CPU than the
    reference's. The attack raises once its escape took effect, so `correct` means it never did;
    the relay may also be `rejected` by the judge, which then names the threads."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs two CPUs: one for the judge, one for the players")
    plan = [placement.Placement(judge=(cpus[0],), players=(cpus[1],), loading=tuple(cpus))]
    monkeypatch.setattr(placement, "for_host", lambda world_size, mode: plan)
    doc = adv.judge_appended("allreduce", "cpu_shopping", variant=variant, world_size=1, **adv.TIMED)
    if variant == "relay" and doc["status"] == Status.REJECTED:
        assert "CPU" in doc["reason"], adv.summary(doc)
    else:
        assert doc["status"] == "correct", adv.summary(doc)


def test_a_solutions_answer_about_its_allocator_cannot_spoil_the_document(adv):
    """attacks/allocator_report.py answers the judge's question about its allocator with counts no
    allocator has (negative, a string, past 2**53). On a GPU the judge keeps no record for the
    solution's side and still keeps the reference's; on the CPU it asks neither side. Either way the
    document stays valid."""
    doc = adv.judge_appended("allreduce", "allocator_report", **adv.TIMED)
    assert doc["status"] == "correct", adv.summary(doc)
    Result.from_dict({k: v for k, v in doc.items() if k != "_wall_s"})
    allocator = doc["shapes"][0]["timing_run"]["allocator"]
    if adv.DEFAULT_MODE == "cpu":
        assert allocator is None
    else:
        assert set(allocator) == {"reference"}, allocator
