"""The evaluator end to end in `cpu` mode: right answers pass, every kind of wrong answer is caught
and named, nothing is left running."""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path

import pytest

import tasks
from evaluator import sandbox
from evaluator.launch import EvaluationRequest, EvaluatorError, evaluate, seed_stream
from evaluator.sandbox import descendants

HERE = Path(__file__).parent
SOLUTIONS = HERE / "solutions"
FAST = {"warmup": 2, "iters": 6, "trials": 3, "shapes": ["small"], "timeout_s": 60, "timing_budget_s": 0}


def run(problem: str, code: str, world_size: int = 2, **overrides) -> dict:
    settings = {**FAST, **overrides}
    return evaluate(EvaluationRequest(problem=problem, solution_code=code, world_size=world_size, mode="cpu", **settings))


def solution(name: str) -> str:
    return (SOLUTIONS / f"{name}.py").read_text()


def reference(problem: str) -> str:
    return tasks.reference_source(problem)


def no_leftovers() -> bool:
    return not descendants([os.getpid()])


@pytest.mark.parametrize("world_size", [2, 4])
@pytest.mark.parametrize("problem", ["allreduce", "allgather"])
def test_reference_as_solution_is_correct(problem, world_size):
    doc = run(problem, reference(problem), world_size)
    assert doc["status"] == "correct", doc["reason"]
    shape = doc["shapes"][0]
    assert shape["correct"] is True
    assert doc["timings_meaningful"] is False
    for side in ("solution", "reference"):
        assert len(shape[side]["per_rank"]) == world_size
        assert all(r["iterations"] == FAST["iters"] for r in shape[side]["per_rank"])
    assert shape["speedup"] > 0
    # Same code, same public inputs: identical output digests.
    assert shape["digests"]["solution"] == shape["digests"]["reference"]
    assert doc["summary"]["correct"] is True
    # Rank 0's judge stopped and resumed the solution around the reference's timed batches.
    assert 0 < doc["stages"]["hold"] < doc["stages"]["timing"]
    assert no_leftovers()


def test_bitwise_public_digests_do_not_depend_on_the_cpus_simd(monkeypatch):
    """A bitwise problem's public trial is drawn portably: the digests are the same whether
    PyTorch's CPU kernels use AVX2/AVX-512 or no SIMD at all (torch.randn's values are not)."""
    digests = []
    for capability in (None, "default"):
        if capability:
            monkeypatch.setenv("ATEN_CPU_CAPABILITY", capability)
        else:
            monkeypatch.delenv("ATEN_CPU_CAPABILITY", raising=False)
        doc = run("repro_tp_row_linear", reference("repro_tp_row_linear"), shapes=["tiny"], warmup=1, iters=1, trials=1)
        assert doc["status"] == "correct", doc["reason"]
        digests.append(doc["shapes"][0]["digests"])
    assert digests[0] == digests[1]


@pytest.mark.parametrize("world_size", [2, 4])
@pytest.mark.parametrize("problem", ["allreduce", "allgather"])
def test_off_by_one_rank_is_incorrect_and_names_the_rank(problem, world_size):
    doc = run(problem, solution(f"{problem}_off_by_one"), world_size)
    assert doc["status"] == "incorrect"
    assert doc["failing_rank"] == world_size - 1
    assert f"rank {world_size - 1}" in doc["reason"]
    assert "mismatch at flat index" in doc["reason"] or "not bitwise equal" in doc["reason"]
    # Where, as the document tells it: the rank, the shape, the first trial and its worst element.
    failure = doc["failure"]
    assert (failure["rank"], failure["shape"], failure["step"]) == (world_size - 1, "small", "trial 1 of 3")
    mismatch = failure["mismatch"]
    assert mismatch["output"] == "output" and f"flat index {mismatch['flat_index']}" in doc["reason"]
    assert 0 < mismatch["wrong"] <= mismatch["elements"] and mismatch["got"] != mismatch["expected"]


def test_syntax_error_is_compile_error():
    doc = run("allreduce", solution("syntax_error"))
    assert doc["status"] == "compile_error"
    assert "SyntaxError" in doc["reason"]
    assert doc["failure"] == {"rank": 0, "shape": None, "step": "build", "call": None, "calls": None, "mismatch": None}


def test_missing_solution_is_compile_error():
    doc = run("allreduce", solution("no_solution"))
    assert doc["status"] == "compile_error"
    assert "solution" in doc["reason"]


def test_exception_is_runtime_error_with_traceback():
    doc = run("allreduce", solution("raises"))
    assert doc["status"] == "runtime_error"
    assert "too many resources requested" in doc["reason"]
    assert "Traceback" in doc["log_tail"] and "in helper" in doc["log_tail"]


def test_seed_stream_longer_than_a_pipe_holds():
    """Each rank's seed stream used to be written whole before the next rank was started: past a
    pipe's capacity (64 KiB by default on Linux) the evaluator blocked there, while the rank it fed
    waited for peers that did not exist yet."""
    trials = 700
    stream = seed_stream(b"k" * 32, "allreduce", [{"name": "small"}], 0, trials, timed=False)
    assert sum(len(json.dumps(m)) + 1 for m in stream) > 64 << 10
    doc = run("allreduce", reference("allreduce"), trials=trials, iters=0, warmup=0, timeout_s=120)
    assert doc["status"] == "correct", doc["reason"]


def test_crash_is_runtime_error_naming_the_rank():
    doc = run("allreduce", solution("crashes"), timeout_s=60)
    assert doc["status"] == "runtime_error"
    assert doc["failing_rank"] == 1
    # The dead player is named as the cause (not its peer's broken collective), with how it ended.
    assert doc["reason"].startswith("rank 1: the solution's process ended without answering"), doc["reason"]
    assert doc["reason"].endswith("it was killed by SIGABRT"), doc["reason"]
    assert no_leftovers()


def start_rank_0_judge_as(monkeypatch, program: Path) -> None:
    """Rank 0's judge is started as `program` (with the judge's arguments); the other ranks' as usual."""
    spawn_rank = sandbox.spawn_rank

    def rank_0_as_program(rank, *args, **kwargs):
        if rank != 0:
            return spawn_rank(rank, *args, **kwargs)
        python = sys.executable
        sys.executable = str(program)
        try:
            return spawn_rank(rank, *args, **kwargs)
        finally:
            sys.executable = python

    monkeypatch.setattr(sandbox, "spawn_rank", rank_0_as_program)


def test_a_judge_that_breaks_before_reporting_is_the_evaluators_failure_not_the_solutions(monkeypatch, tmp_path):
    # Rank 0's judge is started as a program that fails at once, as a judge broken at start-up
    # would: the evaluation must not blame (or fail) the submission, and says why with its log.
    broken = tmp_path / "broken-python"
    broken.write_text("#!/bin/sh\necho 'the judge broke at start' >&2\nexit 1\n")
    broken.chmod(0o755)
    start_rank_0_judge_as(monkeypatch, broken)
    with pytest.raises(EvaluatorError, match="the judge exited with code 1 before reporting") as failure:
        run("allreduce", reference("allreduce"), timeout_s=60)
    assert "the judge broke at start" in str(failure.value)
    assert no_leftovers()


def test_a_rank_reporting_host_trouble_ends_the_evaluation_without_waiting_for_its_deadline(tmp_path, monkeypatch):
    # Rank 0's judge reports the host's failure (as one whose GPU ran short does) and exits; rank 1's
    # waits for it at start-up. The evaluation is the evaluator's failure within the grace, not the
    # whole time-out later.
    infra_judge = tmp_path / "infra-judge"
    infra_judge.write_text(f"""#!{sys.executable}
import json, os, sys
control, result = int(sys.argv[3]), int(sys.argv[4])  # -m evaluator.rank CONTROL RESULT ...
config = json.loads(os.read(control, 1 << 20).split(b"\\n")[0])
message = {{"nonce": config["nonce"], "type": "infra", "rank": 0, "reason": "this host's GPU is short of memory"}}
os.write(result, (json.dumps(message) + "\\n").encode())
sys.exit(3)
""")
    infra_judge.chmod(0o755)
    start_rank_0_judge_as(monkeypatch, infra_judge)
    t0 = time.monotonic()
    with pytest.raises(EvaluatorError, match="rank 0: this host's GPU is short of memory"):
        run("allreduce", reference("allreduce"), timeout_s=90)
    assert time.monotonic() - t0 < 45
    assert no_leftovers()


@pytest.mark.parametrize("name", ["endless_loop", "deadlock"])
def test_hang_is_timeout_and_leaves_nothing_running(name):
    limit = 12.0
    t0 = time.monotonic()
    doc = run("allreduce", solution(name), timeout_s=limit)
    elapsed = time.monotonic() - t0
    assert doc["status"] == "timeout"
    assert "did not finish" in doc["reason"]
    assert elapsed < limit + 8
    assert no_leftovers()
    # Where each rank's judge and players were when they were stopped: both solution players are
    # stuck in the solution (endless_loop), or rank 0's is in its extra collective while rank 1's
    # judge waits for rank 0's judge (deadlock).
    stuck = (0, 1) if name == "endless_loop" else (0,)
    for rank in (0, 1):
        section = doc["log_tail"].split(f"== rank {rank} ==")[1].split("== rank")[0]
        assert "where its threads were" in section and "judge.py" in section, doc["log_tail"]
        player = section.split(f"[solution process of rank {rank}]")[1]
        if rank in stuck:
            assert "in op_run" in player and "in solution" in player, doc["log_tail"]


@pytest.mark.parametrize(
    ("problem", "name", "message"),
    [
        ("allreduce", "returns_input", "mismatch"),
        ("allgather", "zeros", "all zeros"),
        ("allreduce", "nans", "non-finite"),
        ("allreduce", "wrong_dtype", "dtype"),
        ("allreduce", "tensor_subclass", "expected a torch.Tensor"),
        ("allgather", "modifies_input", "modified input 0"),
        ("allgather", "pointer_cache", ""),
    ],
)
def test_wrong_outputs_are_incorrect(problem, name, message):
    doc = run(problem, solution(name))
    assert doc["status"] == "incorrect", doc["reason"]
    assert message in doc["reason"]


def test_printed_fake_result_is_not_believed():
    doc = run("allgather", solution("fake_report"))
    assert doc["status"] == "incorrect"
    assert doc["summary"]["speedup"] is None


@pytest.mark.parametrize("name", ["forged_channel", "reads_seeds", "patches_timer"])
def test_the_judges_channels_and_clock_are_out_of_reach(name):
    """The solution's process holds no pipe of the judge's and shares no clock with it: forging
    reports, reading seeds or patching its own timer changes nothing (the attacks' computation is
    honest). tests/adversarial/ tries harder."""
    doc = run("allreduce", solution(name))
    assert doc["status"] == "correct", doc["reason"]
    assert no_leftovers()


def _processes_with(marker: bytes) -> list[int]:
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            if marker in Path(f"/proc/{entry}/cmdline").read_bytes():
                found.append(int(entry))
        except OSError:
            pass
    return found


@pytest.mark.parametrize("sandboxed", [True, False])
def test_detached_grandchild_is_killed(sandboxed):
    """A daemon that left its session and its parent is gone when the evaluation is, sandboxed
    (the pid namespace ends with its pid 1) or not (the players' pid 1 is a child subreaper)."""
    marker = b"pkb-daemon-test-marker"
    assert not _processes_with(marker)
    doc = run("allreduce", solution("daemon_child"), sandboxed=sandboxed)
    assert doc["status"] == "correct", doc["reason"]
    assert doc["environment"]["sandboxed"] is sandboxed
    time.sleep(0.2)
    assert not _processes_with(marker)
    assert no_leftovers()


def test_public_suite_layout():
    code = (HERE / "pkb_layout" / "reference" / "2_allgather.py").read_text()
    doc = evaluate(EvaluationRequest(problem="2", solution_code=code, world_size=2, mode="cpu", dims={"M": 16, "N": 32},
                                     pkb_root=str(HERE / "pkb_layout"), warmup=1, iters=3, trials=2))
    assert doc["status"] == "correct", doc["reason"]
    assert doc["shapes"][0]["dims"] == {"M": 16, "N": 32}
    # The public allreduce reference modifies its input in place; that is allowed for it.
    code = (HERE / "pkb_layout" / "reference" / "1_allreduce.py").read_text()
    doc = evaluate(EvaluationRequest(problem="1", solution_code=code, world_size=2, mode="cpu", dims={"M": 16, "N": 32},
                                     pkb_root=str(HERE / "pkb_layout"), warmup=1, iters=3, trials=2))
    assert doc["status"] == "correct", doc["reason"]
    bad = solution("allreduce_off_by_one")
    doc = evaluate(EvaluationRequest(problem="1", solution_code=bad, world_size=2, mode="cpu", dims={"M": 16, "N": 32},
                                     pkb_root=str(HERE / "pkb_layout"), warmup=1, iters=3, trials=2))
    assert doc["status"] == "incorrect"


@pytest.mark.parametrize("name", ["allreduce_out_of_place", "allreduce_scratch_input"])
def test_an_input_the_problem_may_modify_is_not_a_result(name):
    """allreduce may reduce in place; an out-of-place sum (the public reference's way) and a
    solution that leaves scratch in its input are judged on the returned tensor alone."""
    doc = run("allreduce", solution(name))
    assert doc["status"] == "correct", doc["reason"]


def test_public_suite_inputs_agree_across_ranks():
    """The public generators derive shared structure (per-rank counts) from `trial`: every rank
    gets the same secret trial, and an all-gather of different sizes per rank works on gloo."""
    code = (HERE / "pkb_layout" / "reference" / "3_variable_allgather.py").read_text()
    for world_size in (2, 3):
        doc = evaluate(EvaluationRequest(problem="3", solution_code=code, world_size=world_size, mode="cpu",
                                         dims={"M": 4, "N": 8}, pkb_root=str(HERE / "pkb_layout"), **FAST))
        assert doc["status"] == "correct", doc["reason"]


def test_in_place_results_are_checked():
    """Clipping gradients in place is part of the answer: skipping it fails."""
    assert run("clip_grad_norm_no_ep", reference("clip_grad_norm_no_ep"), shapes=None, dims=SMALL_CLIP)["status"] == "correct"
    doc = run("clip_grad_norm_no_ep", solution("clip_norm_without_clipping"), shapes=None, dims=SMALL_CLIP)
    assert doc["status"] == "incorrect"
    assert "in-place input 0" in doc["reason"]


SMALL_CLIP = {"L": 2, "M": 16, "N": 8}


def test_a_random_stall_does_not_move_the_time():
    """One 0.2 s call in one batch of six: the median over batches does not see it."""
    doc = run("allreduce", solution("stalls_once"), trials=3, warmup=2, iters=6)
    assert doc["status"] == "correct", doc["reason"]
    assert doc["shapes"][0]["solution"]["time_us"] < 20_000


def test_a_cost_paid_on_some_calls_stays_in_the_time():
    """50 ms on every third call: with three calls per batch every batch pays it once."""
    doc = run("allreduce", solution("slow_every_third_call"), trials=3, warmup=2, iters=30)
    assert doc["status"] == "correct", doc["reason"]
    assert doc["shapes"][0]["solution"]["per_rank"][0]["iterations"] == 30
    assert doc["shapes"][0]["solution"]["time_us"] > 50_000 / 3 * 0.9
    # Every timed pair's samples are in the document, and the headline times are their medians.
    shape = doc["shapes"][0]
    pairs_us = shape["timing_run"]["pairs_us"]
    assert len(pairs_us) == shape["timing_run"]["pairs"] == 30 // shape["timing_run"]["calls_per_batch"]
    for i, side in enumerate(("reference", "solution")):
        assert statistics.median(p[i] for p in pairs_us) == pytest.approx(shape[side]["time_us"], abs=1e-3)
    assert shape["timing_run"]["allocator"] is None  # no CUDA allocator to count on the CPU


FLUSH_SEEN = """

import gc as _gc

_reference_solution = solution


def solution(*inputs):
    players = [o for o in _gc.get_objects() if type(o).__name__ == "Player" and hasattr(o, "flush")]
    sizes = {p.flush.numel() if p.flush is not None else 0 for p in players}
    if sizes != {3 * 2**20}:
        raise RuntimeError(f"flush buffer sizes {sizes}")
    return _reference_solution(*inputs)
"""


def test_the_l2_flush_diagnostic_writes_its_buffer_before_calls_and_says_so():
    """bench/l2_policy.py's option: each player keeps a buffer of the size asked for (the solution
    looks for it in its own process), and the document notes the diagnostic."""
    doc = run("allgather", reference("allgather") + FLUSH_SEEN, flush_l2_mib=3)
    assert doc["status"] == "correct", doc["reason"]
    assert any("diagnostic run" in n for n in doc["shapes"][0]["notes"])
    plain = run("allgather", reference("allgather") + FLUSH_SEEN)
    assert plain["status"] == "runtime_error" and "flush buffer sizes" in plain["reason"]


LAYOUT_REPORTING = """
_persona = int(open("/proc/self/personality").read(), 16)
if not _persona & 0x0040000:
    raise RuntimeError(f"this player's addresses are randomised (persona {_persona:#x})")
"""


@pytest.mark.parametrize("layout", ["fixed", "random"])
def test_players_start_at_fixed_addresses_unless_the_host_asks_for_random_ones(layout, monkeypatch):
    """The judge's default (launch.fixed_layout): both sides' players, here forked from their
    sandboxes' fork servers, run at fixed addresses, so that identical code lays its memory out
    alike on both sides; PKB_PLAYER_LAYOUT=random restores the kernel's randomisation."""
    if layout == "random":
        monkeypatch.setenv("PKB_PLAYER_LAYOUT", "random")
    doc = run("allreduce", reference("allreduce") + LAYOUT_REPORTING, iters=2, trials=1)
    if layout == "fixed":
        assert doc["status"] == "correct", doc["reason"]
    else:
        assert doc["status"] == "runtime_error" and "randomised" in doc["reason"], doc["reason"]
    assert doc["environment"]["player_layout"] == layout  # as both sides' players said before any solution code ran
