"""The attacks where a GPU changes the game (CUDA events, streams, device synchronisation), in
`shared-gpu` mode (two ranks on one GPU, gloo) and `gpu` mode (one rank, NCCL). Skipped without
CUDA; import-safe without a GPU."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

MODES = [pytest.param(("shared-gpu", 2), id="shared-gpu-2"), pytest.param(("gpu", 1), id="gpu-1")]
GPU_TIMED = {"warmup": 4, "iters": 32, "trials": 2, "timeout_s": 300}
DELAY_US = 2000  # gpu_late_output.DELAY_US
SLOW_SOLUTION_US = 5000  # fake_timers.SLEEP_S
SLOW_REFERENCE_SLEEP_US = 20_000  # slow_reference.SLEEP_S


def run(adv, problem, attack, mode_world, **kw):
    mode, world = mode_world
    return adv.judge(problem, attack, mode=mode, world_size=world, **{**GPU_TIMED, **kw})


@pytest.mark.parametrize("mode_world", MODES)
@pytest.mark.parametrize("variant", ["frames", "count"])
def test_skipping_calls_timed_with_cuda_events_is_caught(adv, mode_world, variant):
    params = {"TRIALS": GPU_TIMED["trials"], "WARMUP": GPU_TIMED["warmup"], "ITERS": GPU_TIMED["iters"]}
    doc = run(adv, "allreduce", "skip_when_timed", mode_world, variant=variant, params=params)
    adv.assert_not_faster(doc)


@pytest.mark.parametrize("mode_world", MODES)
@pytest.mark.parametrize("variant", ["none", "cuda_event", "module_clock", "timing_block", "perf_counter_ns"])
def test_patched_gpu_clocks_do_not_hide_the_time_spent(adv, mode_world, variant):
    doc = run(adv, "allreduce", "fake_timers", mode_world, variant=variant)
    if variant == "none":
        assert doc["status"] == "correct", adv.summary(doc)
    adv.assert_time_includes(doc, 0.8 * SLOW_SOLUTION_US)


@pytest.mark.parametrize("mode_world", MODES)
@pytest.mark.parametrize("variant", ["honest", "side_stream", "late_copy", "sync_noop"])
def test_outputs_written_on_a_side_stream_after_the_call_are_caught_or_timed(adv, mode_world, variant):
    doc = run(adv, "allgather", "gpu_late_output", mode_world, variant=variant)
    if variant == "honest":
        assert doc["status"] == "correct", adv.summary(doc)
    adv.assert_time_includes(doc, 0.8 * DELAY_US)


@pytest.mark.parametrize("mode_world", MODES)
def test_outputs_written_by_a_thread_after_the_call_are_caught_or_timed(adv, mode_world):
    if mode_world[1] < 2:
        pytest.skip("an all-reduce of one rank leaves its input as it is: no work to write late")
    doc = run(adv, "allreduce", "late_write_thread", mode_world)
    adv.assert_not_faster(doc)


@pytest.mark.parametrize("mode_world", MODES)
@pytest.mark.parametrize("variant", ["sys_modules", "import_time"])
def test_slowing_the_reference_down_on_a_gpu_does_not_raise_the_speedup(adv, mode_world, variant):
    doc = run(adv, "allreduce", "slow_reference", mode_world, variant=variant)
    adv.assert_reference_not_reached(doc, SLOW_REFERENCE_SLEEP_US)


@pytest.mark.parametrize("mode_world", MODES)
@pytest.mark.parametrize("variant", ["subclass", "lazy_mode"])
def test_lazy_outputs_on_a_gpu_are_caught(adv, mode_world, variant):
    doc = run(adv, "allgather", "lying_tensor", mode_world, variant=variant)
    adv.assert_not_faster(doc)


@pytest.mark.parametrize("mode_world", MODES)
@pytest.mark.parametrize("variant", ["one_thread", "every_sm"])
def test_gpu_work_left_queued_between_the_solutions_batches_does_not_slow_the_reference(adv, mode_world, variant):
    mode, world = mode_world
    doc = adv.judge_appended("gsplat_3d_gaussian_splatting", "gpu_idle_burn", variant=variant, mode=mode,
                             world_size=world, **GPU_TIMED)  # the problem: see the attack's docstring
    adv.assert_not_faster(doc)


@pytest.mark.parametrize("mode_world", MODES)
@pytest.mark.parametrize("variant", ["roomy", "tight"])
def test_a_solution_holding_the_gpus_memory_does_not_raise_its_speedup(adv, mode_world, variant):
    """Whatever the starved reference or judge does, the outcome is the solution's (an evaluator
    error would raise here: a judge or a reference out of memory names the solution when its
    processes hold more of the GPU than the reference's, and a reference whose allocator retried
    beside it gives no speedup, evaluator/gpu_memory.py), and a correct one is not faster than
    the reference it starved. Passed on an H100 (2026-12-07), before the starved-reference rule
    and before the CUDA runtime's out-of-memory error was read as running out."""
    mode, world = mode_world
    doc = adv.judge_appended("allreduce", "memory_hog", variant=variant, mode=mode, world_size=world, **GPU_TIMED)
    adv.assert_not_faster(doc)
