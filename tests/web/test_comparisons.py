import pytest

from catalog.sync import hardware_from_profile
from leaderboards import metrics
from leaderboards.comparisons import compare_hardware, compare_models, output_agreement
from submissions.models import Evaluation

pytestmark = pytest.mark.django_db


def test_model_comparison_matches_hand_computed_metrics(judged, user, problem, other_problem, cpu):
    # gpt: on allreduce 2 samples (one 2x, one 0.5x), on allgather 2 samples (a compile error, a 1.5x)
    judged(user, problem, cpu, speedups=(2, 2, 2), model_tag="gpt", sample_index=0)
    judged(user, problem, cpu, speedups=(0.5, 0.5, 0.5), model_tag="gpt", sample_index=1)
    judged(user, other_problem, cpu, status="compile_error", model_tag="gpt", sample_index=0)
    judged(user, other_problem, cpu, speedups=(1.5, 1.5, 1.5), model_tag="gpt", sample_index=1)
    # glm: one incorrect sample on allreduce only
    judged(user, problem, cpu, status="incorrect", model_tag="glm")
    comparison = compare_models(cpu)
    assert comparison.n_problems == 2
    gpt, glm = comparison.scores
    assert (gpt.model, glm.model) == ("gpt", "glm")
    assert gpt.fast_0 == pytest.approx((2 / 2 + 1 / 2) / 2)  # correct rates 1 and 1/2
    assert gpt.fast_1 == pytest.approx((1 / 2 + 1 / 2) / 2)
    assert gpt.fast_p[metrics.P_GRID.index(1.5)] == pytest.approx((1 / 2 + 0) / 2)  # 1.5 is not > 1.5
    assert gpt.fast_p[metrics.P_GRID.index(2.0)] == 0.0
    assert gpt.pass_at == {1: pytest.approx(0.75), 2: pytest.approx(1.0)}
    assert gpt.fast1_at[2] == pytest.approx((1 + 1) / 2)
    assert gpt.roof_u[metrics.U_GRID.index(0.5)] == pytest.approx(0.75)  # utilization 0.5 everywhere
    assert gpt.roof_u[metrics.U_GRID.index(0.55)] == 0.0
    assert gpt.failures["compile_error"] == 1 and glm.failures["incorrect"] == 1
    assert glm.fast_0 == 0.0 and glm.attempted == 1 and glm.pass_at == {1: 0.0}
    assert comparison.by_level[1]["gpt"] == (pytest.approx(1.0), pytest.approx(0.5))
    assert comparison.by_level[2]["gpt"] == (pytest.approx(0.5), pytest.approx(0.5))


def test_level_filter_and_model_filter(judged, user, problem, other_problem, cpu):
    judged(user, problem, cpu, model_tag="gpt")
    judged(user, other_problem, cpu, status="timeout", model_tag="gpt")
    judged(user, problem, cpu, model_tag="glm")
    level2 = compare_models(cpu, level=2)
    assert level2.n_problems == 1 and [s.model for s in level2.scores] == ["gpt"]
    assert level2.scores[0].fast_0 == 0.0 and level2.scores[0].failures["timeout"] == 1
    assert [s.model for s in compare_models(cpu, models=["glm"]).scores] == ["glm"]


def test_sql_counts_agree_with_the_pure_metrics(judged, user, problem, other_problem, cpu):
    outcomes = {
        problem: [(2.5, "correct"), (None, "runtime_error"), (1.05, "correct")],
        other_problem: [(0.7, "correct"), (3.2, "correct"), (None, "incorrect")],
    }
    samples = {}
    for prob, runs in outcomes.items():
        for i, (s, status) in enumerate(runs):
            judged(user, prob, cpu, status=status, speedups=(s or 1,) * 3, model_tag="m", sample_index=i)
        samples[prob.slug] = [metrics.Sample(status, s, 0.5 if status == "correct" else None) for s, status in runs]
    scores = compare_models(cpu).scores[0]
    for i, p in enumerate(metrics.P_GRID):
        assert scores.fast_p[i] == pytest.approx(metrics.fast_p(samples, p, 2)), p
    for i, u in enumerate(metrics.U_GRID):
        assert scores.roof_u[i] == pytest.approx(metrics.roof_u(samples, u, 2)), u
    for k in (1, 2, 3):
        assert scores.pass_at[k] == pytest.approx(metrics.pass_rate(samples, 2, k))
        assert scores.fast1_at[k] == pytest.approx(metrics.fast_p(samples, 1.0, 2, k))


def test_hidden_results_count_as_rejected(judged, user, problem, cpu):
    ev = judged(user, problem, cpu, model_tag="gpt")
    Evaluation.objects.filter(pk=ev.pk).update(hidden=True)
    scores = compare_models(cpu).scores[0]
    assert scores.fast_0 == 0.0 and scores.failures["rejected"] == 1


def test_hardware_comparison_pairs_the_same_submission(submit, worker, make_result, user, problem, cpu):
    # Same world size on both, so equal per-rank outputs give equal digests.
    h200 = hardware_from_profile("h200x2", "h200", 2)
    h200.save()
    same = submit(user, problem, [cpu, h200])
    differ = submit(user, problem, [cpu, h200], model_tag="other")
    only_cpu = submit(user, problem, [cpu], model_tag="third")
    for sub, digests in ((same, ("a", "a")), (differ, ("a", "b"))):
        ev_cpu, ev_h200 = sub.evaluations.order_by("hardware__slug")
        worker.finish(ev_cpu, make_result(ev_cpu, speedups=(1, 1, 1), digest=digests[0]))
        worker.finish(ev_h200, make_result(ev_h200, speedups=(2, 2, 2), digest=digests[1]))
    worker.finish(only_cpu.evaluations.get(), make_result(only_cpu.evaluations.get()))
    cmp = compare_hardware(cpu, h200)
    assert cmp.total == 2 and cmp.both_correct == 2
    assert cmp.identical == 1 and cmp.digests_compared == 2
    assert cmp.geomean_ratio == pytest.approx(2.0)
    by_tag = {r.evaluation_a.submission.model_tag: r for r in cmp.rows}
    assert by_tag["gpt-5.5"].bitwise_identical is True and by_tag["other"].bitwise_identical is False
    assert compare_hardware(cpu, h200, problem=problem).total == 2


def test_outputs_across_every_hardware(submit, worker, make_result, user, problem, cpu):
    # cpu, h200x2 and b200x2 run two ranks each, so equal per-rank outputs give equal digests.
    h200 = hardware_from_profile("h200x2", "h200", 2)
    b200 = hardware_from_profile("b200x2", "b200", 2)
    h200.save()
    b200.save()
    same = submit(user, problem, [cpu, h200, b200])
    differ = submit(user, problem, [cpu, h200, b200], model_tag="other")
    alone = submit(user, problem, [cpu], model_tag="third")
    for sub, digests in ((same, "aaa"), (differ, "aab")):
        for ev, d in zip(sub.evaluations.order_by("hardware__slug"), digests, strict=True):  # b200, cpu, h200
            worker.finish(ev, make_result(ev, digest=d))
    worker.finish(alone.evaluations.get(), make_result(alone.evaluations.get()))
    agreement = output_agreement([same.pk, differ.pk, alone.pk])
    assert agreement[same.pk].identical is True and agreement[same.pk].groups == (("b200x2", "cpu", "h200x2"),)
    assert agreement[differ.pk].identical is False and agreement[differ.pk].hardware == 3
    assert agreement[differ.pk].groups == (("b200x2", "cpu"), ("h200x2",))
    assert agreement[alone.pk].identical is None and agreement[alone.pk].hardware == 1
    # the pair cpu/b200 agrees, but the row says the submission differs on its third hardware
    row = {r.evaluation_a.submission_id: r for r in compare_hardware(cpu, b200).rows}[differ.pk]
    assert row.bitwise_identical is True and row.every_hardware.identical is False
    # a hidden result leaves the comparison
    Evaluation.objects.filter(submission=differ, hardware=h200).update(hidden=True)
    assert output_agreement([differ.pk])[differ.pk].identical is True
