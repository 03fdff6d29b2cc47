"""The result document: its typed model, how it reads and writes JSON, what it refuses, and the
statistics and summaries it is built from."""

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

from evaluator import results
from evaluator.results import SCHEMA, FailureKind, InvalidResult, Mode, Result, Stage, Status, allocator_note

ROOT = Path(__file__).resolve().parents[2]
DIGEST = "c4adeecf2a591389cc09e21f971ec5d11b32461e11244d09eb0ad7c8442a8d30"


def rank_stats(median: float) -> dict:
    return {"mean_us": median + 1.0, "median_us": median, "std_us": 0.5, "min_us": median - 1.0,
            "max_us": median + 3.0, "iterations": 4, "batches": 4}


# As `python -m evaluator run --problem allgather --mode cpu --shape small --hardware h100` writes it.
CPU_DOC = {
    "schema": "pkb.result/5", "status": "correct", "reason": "", "failing_rank": None, "problem": "allgather",
    "mode": "cpu", "world_size": 2, "hardware": "h100", "timings_meaningful": False,
    "settings": {"warmup": 2, "iters": 4, "trials": 2, "timeout_s": 600.0, "timing_budget_s": 2.0},
    "shapes": [{
        "name": "small", "dims": {"M": 64, "N": 1024}, "default": True, "correct": True, "max_abs_error": 0.0,
        "solution": {"time_us": 1553.897, "per_rank": [rank_stats(1413.289), rank_stats(1553.897)], "slowest_rank": 1,
                     "interval_us": [1490.5, 1601.25]},
        "reference": {"time_us": 1128.399, "per_rank": [rank_stats(614.4445), rank_stats(1128.399)], "slowest_rank": 1,
                      "interval_us": [1100.0, 1180.5]},
        "speedup": 0.7261736138238248,
        "roofline": {"t_roof_us": 0.29127111111111115, "bound": "nvlink", "phases": [{
            "name": "allgather", "compute_us": 0.0, "hbm_us": 0.11737791044776119, "nvlink_us": 0.29127111111111115,
            "time_us": 0.29127111111111115, "bound": "nvlink"}], "utilization": None},
        "digests": {"solution": [DIGEST, DIGEST], "reference": [DIGEST, DIGEST]},
        "notes": [],
        "speedup_interval": [0.69, 0.77],
        "timing_run": {"calls_per_batch": 1, "pairs": 3, "fixed_us": 517.82, "stop": "budget", "seconds": 2.04,
                       "pairs_us": [[1128.4, 1553.9], [1101.2, 1549.0], [1140.0, 1601.3]], "allocator": None},
    }],
    "summary": {"correct": True, "speedup": 0.7261736138238248, "utilization": None, "solution_us": 1553.897,
                "reference_us": 1128.399, "speedup_interval": [0.70, 0.75]},
    "stages": {"startup": 4.455, "init": 0.036, "build": 0.068, "correctness": 0.084, "warmup": 0.040,
               "timing": 0.114, "digest": 0.041, "total": 4.866},
    "environment": {"python": "3.11.7", "torch": "2.13.0+cpu", "cuda": None, "mode": "cpu", "world_size": 2,
                    "hostname": "vm", "triton": "3.6.0", "sandboxed": True},
    "log_tail": "== rank 0 ==\n[reference process of rank 0]\nwarning: something\n",
    "started_at": "2026-12-06T01:18:46+00:00", "finished_at": "2026-12-06T01:18:51+00:00",
    "failure": None,
}  # fmt: skip


def gpu_failure() -> dict:
    """A gpu-mode document of a solution that was wrong on rank 1 of the second shape; rank 0
    never reported its environment (only the parent's facts are there), startup was not timed."""
    doc = copy.deepcopy(CPU_DOC)
    shape = copy.deepcopy(doc["shapes"][0])
    shape.update(name="large", default=False, correct=False, max_abs_error=0.25, solution=None, reference=None,
                 speedup=None, digests=None, notes=["outputs differ from the reference's"], speedup_interval=None,
                 timing_run=None)
    doc["shapes"][0]["roofline"]["utilization"] = 0.0002
    doc.update(status="incorrect", reason="rank 1: wrong sum", failing_rank=1, mode="gpu", timings_meaningful=True,
               shapes=[doc["shapes"][0], shape], stages={"startup": None, "total": 9.5},
               environment={"driver": None, "sandboxed": True})
    doc["summary"] = {"correct": False, "speedup": None, "utilization": None, "solution_us": None,
                      "reference_us": 1128.399, "speedup_interval": None}
    doc["shapes"][0]["timing_run"]["allocator"] = {
        "reference": {"device_allocs": [0, 0], "device_frees": [0, 0], "retries": [0, 0]},
        "solution": {"device_allocs": [3, 5], "device_frees": [3, 4], "retries": [0, 1]}}
    doc["failure"] = {"rank": 1, "shape": "large", "step": "trial 2 of 3", "call": None, "calls": None, "mismatch": {
        "output": "output 1", "index": [3, 17], "flat_index": 3089, "got": "0.5", "expected": "0.25",
        "max_abs_error": 0.25, "allowed": "atol=0.1, rtol=0.02", "wrong": 12, "elements": 65536}}
    return doc


@pytest.mark.parametrize("doc", [CPU_DOC, gpu_failure()], ids=["cpu-correct", "gpu-incorrect"])
def test_a_document_reads_and_writes_back_unchanged(doc):
    result = Result.from_dict(copy.deepcopy(doc))
    assert result.to_dict() == doc
    assert json.dumps(result.to_dict()) == json.dumps(doc)  # same keys in the same order, plain JSON values
    assert Result.from_dict(result.to_dict()) == result


def test_a_first_schema_document_reads_with_its_later_fields_empty():
    old = copy.deepcopy(CPU_DOC)
    old["schema"] = "pkb.result/1"
    del old["settings"]["timing_budget_s"]
    shape = old["shapes"][0]
    for key in ("speedup_interval", "timing_run"):
        del shape[key]
    for side in ("solution", "reference"):
        del shape[side]["interval_us"]
    written = Result.from_dict(old).to_dict()
    assert written["schema"] == SCHEMA
    assert written["settings"]["timing_budget_s"] is None
    assert written["shapes"][0]["speedup_interval"] is None and written["shapes"][0]["timing_run"] is None
    assert written["shapes"][0]["solution"]["interval_us"] is None


def test_a_second_schema_document_reads_without_a_failure():
    old = gpu_failure()
    old["schema"] = "pkb.result/2"
    del old["failure"]
    written = Result.from_dict(old).to_dict()
    assert written["schema"] == SCHEMA and written["failure"] is None


def test_a_third_schema_document_reads_without_the_pairs_samples():
    old = copy.deepcopy(CPU_DOC)
    old["schema"] = "pkb.result/3"
    del old["shapes"][0]["timing_run"]["pairs_us"]
    written = Result.from_dict(old).to_dict()
    assert written["schema"] == SCHEMA and written["shapes"][0]["timing_run"]["pairs_us"] is None


def test_a_fourth_schema_document_reads_without_the_allocators_record():
    old = gpu_failure()
    old["schema"] = "pkb.result/4"
    del old["shapes"][0]["timing_run"]["allocator"]
    written = Result.from_dict(old).to_dict()
    assert written["schema"] == SCHEMA and written["shapes"][0]["timing_run"]["allocator"] is None


@pytest.mark.parametrize("change, message", [
    (lambda a: a["solution"].update(retries=[0]), "one value per rank"),
    (lambda a: a["reference"].update(device_frees=[0, -1]), "must not be negative"),
    (lambda a: a.update(judge=a.pop("reference")), "'judge' is not one of"),
    (lambda a: a["solution"].update(device_allocs=[1.5, 2]), "must be an integer"),
], ids=["ranks", "negative", "side", "integer"])
def test_the_allocators_record_holds_counts_per_side_and_rank(change, message):
    doc = gpu_failure()
    change(doc["shapes"][0]["timing_run"]["allocator"])
    with pytest.raises(InvalidResult, match=message):
        Result.from_dict(doc)


@pytest.mark.parametrize("pairs_us", [[[1.0, 2.0]], [[1.0, 2.0], [1.0], [3.0, 4.0]]], ids=["too-few", "not-a-pair"])
def test_the_pairs_samples_hold_one_pair_per_timed_pair(pairs_us):
    doc = copy.deepcopy(CPU_DOC)
    doc["shapes"][0]["timing_run"]["pairs_us"] = pairs_us
    with pytest.raises(InvalidResult, match="pairs_us"):
        Result.from_dict(doc)


def test_the_failure_names_one_of_the_shapes_and_only_for_a_failed_evaluation():
    doc = gpu_failure()
    doc["failure"]["shape"] = "huge"
    with pytest.raises(InvalidResult, match="failure.shape"):
        Result.from_dict(doc)
    correct = copy.deepcopy(CPU_DOC)
    correct["failure"] = gpu_failure()["failure"] | {"shape": "small"}
    with pytest.raises(InvalidResult, match="no failure"):
        Result.from_dict(correct)


def test_the_model_is_typed():
    result = Result.from_dict(copy.deepcopy(CPU_DOC))
    assert result.status is Status.CORRECT and result.mode is Mode.CPU
    shape = result.default_shape
    assert shape.solution.per_rank[shape.solution.slowest_rank].median_us == 1553.897
    assert shape.roofline.bound is results.Resource.NVLINK
    assert result.stages[results.StageTime.TOTAL] == 4.866
    assert result.environment["sandboxed"] is True


def test_vocabulary():
    assert [s.value for s in Status] == ["correct", "incorrect", "compile_error", "runtime_error", "timeout", "rejected"]
    assert {k.value for k in FailureKind} == {s.value for s in Status if s is not Status.CORRECT}
    assert list(Stage)[0] is Stage.QUEUED and list(Stage)[-1] is Stage.DONE
    assert [m for m in Mode if m.timings_meaningful] == [Mode.GPU]
    assert Status.CORRECT == "correct" and f"{Mode.SHARED_GPU}" == "shared-gpu"


def mutated(mutate, doc=CPU_DOC) -> dict:
    doc = copy.deepcopy(doc)
    mutate(doc)
    return doc


def shape0(doc: dict) -> dict:
    return doc["shapes"][0]


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: d.update(schema="pkb.result/0"), "unknown schema"),
        (lambda d: d.pop("schema"), "unknown schema"),
        (lambda d: d.update(status="great"), "status: 'great' is not one of"),
        (lambda d: d.update(mode="tpu"), "mode: 'tpu' is not one of"),
        (lambda d: d["environment"].update(mode="tpu"), "environment.mode"),
        (lambda d: d.pop("summary"), "lacks summary"),
        (lambda d: shape0(d).pop("digests"), "shapes[0] lacks digests"),
        (lambda d: d["environment"].pop("sandboxed"), "environment lacks sandboxed"),
        (lambda d: d.update(verdict="fast"), "unknown fields 'verdict'"),
        (lambda d: d["stages"].update(compile=1.0), "a key of stages: 'compile'"),
        (lambda d: d["summary"].update(speedup=float("nan")), "summary.speedup must be finite"),
        (lambda d: shape0(d)["solution"]["per_rank"][1].update(median_us=float("inf")), "per_rank[1].median_us"),
        (lambda d: d["stages"].update(total=float("nan")), "stages.total must be finite"),
        (lambda d: shape0(d).update(speedup="fast"), "shapes[0].speedup must be a number, not a string"),
        (lambda d: d.update(world_size="2"), "world_size must be an integer"),
        (lambda d: d.update(world_size=True), "world_size must be an integer, not a boolean"),
        (lambda d: d["settings"].update(iters=4.0), "settings.iters must be an integer"),
        (lambda d: shape0(d).update(correct=1), "shapes[0].correct must be a boolean"),
        (lambda d: d.update(shapes="none"), "shapes must be a list"),
        (lambda d: shape0(d)["dims"].update(M="64"), "shapes[0].dims.M must be an integer"),
        (lambda d: d.update(reason=None), "reason must be a string, not null"),
        (lambda d: d["summary"].update(correct=False), "summary.correct disagrees with status 'correct'"),
        (lambda d: d.update(status="timeout", failing_rank=0), "summary.correct disagrees with status 'timeout'"),
        (lambda d: d.update(timings_meaningful=True), "timings_meaningful disagrees with mode 'cpu'"),
        (lambda d: d.update(failing_rank=0), "failing_rank"),
        (lambda d: shape0(d)["digests"]["solution"].pop(), "world_size (2) entries"),
        (lambda d: shape0(d)["solution"].update(slowest_rank=2), "shapes[0].solution: slowest_rank"),
        (lambda d: shape0(d)["solution"]["per_rank"][0].update(batches=0), "per_rank[0]: needs at least one call"),
        (lambda d: d["shapes"].append(copy.deepcopy(shape0(d))), "shape names repeat"),
    ],
)
def test_malformed_documents_are_refused_with_the_reason(mutate, message):
    with pytest.raises(InvalidResult) as refused:
        Result.from_dict(mutated(mutate))
    assert message in str(refused.value)


def test_a_failed_evaluation_has_no_headline_speedup():
    doc = mutated(lambda d: d["summary"].update(speedup=2.0), gpu_failure())
    with pytest.raises(InvalidResult, match="summary of a failed evaluation"):
        Result.from_dict(doc)


@pytest.mark.parametrize("doc", [None, [], "correct"])
def test_a_result_must_be_an_object(doc):
    with pytest.raises(InvalidResult, match="must be an object"):
        Result.from_dict(doc)


def test_the_model_imports_without_torch_or_django():
    """GPU worker hosts have no Django, and the worker's own process must never load torch."""
    code = (
        "import json, sys; import evaluator.results as r; r.Result.from_dict(json.load(sys.stdin)); "
        "assert not {'torch', 'django', 'pydantic'} & set(sys.modules), sorted(sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, input=json.dumps(CPU_DOC), capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr


def test_stats():
    s = results.stats([1.0, 2.0, 3.0, 10.0])
    assert (s.mean_us, s.median_us, s.min_us, s.max_us, s.iterations, s.batches) == (4.0, 2.5, 1.0, 10.0, 4, 4)
    assert s.std_us == pytest.approx(3.5355, rel=1e-4)
    assert results.stats([1.0, 2.0], calls_per_sample=10).iterations == 20


def test_problem_time_is_the_median_batch_of_the_slowest_rank():
    t = results.timing([[1.0, 1.0], [3.0, 5.0], [2.0, 2.0]])
    assert t.slowest_rank == 1 and t.time_us == 4.0
    # Batch by batch the slowest rank decides; one stalled batch does not move the median.
    t = results.timing([[1.0, 9.0, 1.0], [2.0, 1.0, 2.0]])
    assert t.time_us == 2.0


def test_summary_is_geometric_mean_over_shapes():
    shapes = Result.from_dict(copy.deepcopy(CPU_DOC)).shapes
    first, second = shapes[0], copy.deepcopy(shapes[0])
    roof = lambda u: results.Roofline(t_roof_us=1.0, bound=results.Resource.HBM, phases=[], utilization=u)  # noqa: E731
    shapes = [results.ShapeResult(**{**vars(first), "speedup": 2.0, "roofline": roof(0.5)}),
              results.ShapeResult(**{**vars(second), "name": "other", "default": False, "speedup": 8.0,
                                     "roofline": roof(0.125)})]
    s = results.summarize(shapes, Status.CORRECT)
    assert s.speedup == pytest.approx(4.0) and s.utilization == pytest.approx(0.25)
    assert s.solution_us == first.solution.time_us and s.reference_us == first.reference.time_us
    failed = results.summarize(shapes, Status.INCORRECT)
    assert failed.speedup is failed.utilization is failed.solution_us is None and not failed.correct
    assert results.summarize([], Status.TIMEOUT).reference_us is None


def test_summary_interval_is_the_geometric_mean_of_the_shapes_interval_ends():
    first = Result.from_dict(copy.deepcopy(CPU_DOC)).shapes[0]
    shapes = [results.ShapeResult(**{**vars(first), "speedup": 2.0, "speedup_interval": [1.0, 4.0]}),
              results.ShapeResult(**{**vars(first), "name": "other", "speedup": 8.0, "speedup_interval": [4.0, 16.0]})]
    s = results.summarize(shapes, Status.CORRECT)
    assert s.speedup_interval == [pytest.approx(2.0), pytest.approx(8.0)]
    assert results._parse(results.Summary, json.loads(json.dumps(results._plain(s))), "summary") == s
    # One shape without an interval (timed too briefly, or a document from before intervals): none.
    shapes[1] = results.ShapeResult(**{**vars(shapes[1]), "speedup_interval": None})
    assert results.summarize(shapes, Status.CORRECT).speedup_interval is None
    assert results.summarize(shapes[:1], Status.INCORRECT).speedup_interval is None


def test_log_tail_is_cut():
    text = "x" * (results.LOG_TAIL_CHARS + 50)
    assert results.tail(text).startswith("[... 50 characters cut ...]")


def test_schema_names_the_shape():
    assert Result.from_dict(copy.deepcopy(CPU_DOC)).to_dict()["schema"] == SCHEMA == CPU_DOC["schema"]


def test_the_allocators_note_speaks_only_where_a_side_went_to_the_device():
    quiet = {"device_allocs": [0, 0], "device_frees": [0, 0], "retries": [0, 0]}
    assert allocator_note(None) is None and allocator_note({}) is None
    assert allocator_note({"reference": quiet, "solution": quiet}) is None
    note = allocator_note({"reference": {**quiet, "retries": [0, 2]}})  # the solution's side unrecorded
    assert note.startswith("During the timed calls, the reference's CUDA allocator took memory from the device 0 "
                           "times, gave it back 0 times and retried 2 times")
    assert "ran short of GPU memory" in note  # retries empty the cache: the reference was slowed
    assert "ran short" not in allocator_note({"reference": quiet, "solution": {**quiet, "retries": [1, 0]}})
