"""The one ranking query: best per (owner, model), equal speedups to the earlier submission,
overlapping intervals tied, reruns replace, hidden and failing results never rank."""

import pytest

from leaderboards.ranking import (
    best_speedups,
    current,
    eligible,
    leaderboard,
    leading_submission_ids,
    solved_counts,
    tie_ranks,
)
from submissions.models import Evaluation, Submission
from submissions.services import queue_evaluations

pytestmark = pytest.mark.django_db


def speedup_of(board):
    return [(e.submission.owner.username, e.submission.model_tag, round(e.evaluation.speedup, 3)) for e in board]


def test_best_per_owner_and_model(judged, user, other_user, problem, cpu):
    judged(user, problem, cpu, speedups=(2, 2, 2), model_tag="gpt-5.5")
    judged(user, problem, cpu, speedups=(3, 3, 3), model_tag="gpt-5.5")  # alice's better gpt-5.5 run
    judged(user, problem, cpu, speedups=(1.5, 1.5, 1.5), model_tag="human")
    judged(other_user, problem, cpu, speedups=(2.5, 2.5, 2.5), model_tag="gpt-5.5")
    judged(other_user, problem, cpu, status="incorrect", model_tag="glm")
    board = leaderboard(problem, cpu)
    assert speedup_of(board) == [("alice", "gpt-5.5", 3.0), ("bob", "gpt-5.5", 2.5), ("alice", "human", 1.5)]
    assert [e.rank for e in board] == [1, 2, 3]


def test_speedup_is_the_geometric_mean_over_shapes(judged, user, problem, cpu):
    ev = judged(user, problem, cpu, speedups=(1.0, 2.0, 4.0))
    assert ev.speedup == pytest.approx(2.0)


def test_ties_go_to_the_earlier_submission(judged, user, other_user, problem, cpu):
    late = judged(user, problem, cpu, speedups=(2, 2, 2))
    early = judged(other_user, problem, cpu, speedups=(2, 2, 2))
    Submission.objects.filter(pk=early.submission_id).update(created_at=late.submission.created_at.replace(year=2020))
    assert [e.submission.owner.username for e in leaderboard(problem, cpu)] == ["bob", "alice"]


def test_overlapping_intervals_are_tied(judged, user, other_user, problem, cpu):
    # 3.0 [2.73, 3.3] and 2.8 [2.55, 3.08] overlap; 2.0 [1.82, 2.2] overlaps neither.
    judged(user, problem, cpu, speedups=(3, 3, 3), interval=0.1)
    judged(other_user, problem, cpu, speedups=(2.8, 2.8, 2.8), interval=0.1)
    judged(user, problem, cpu, speedups=(2, 2, 2), interval=0.1, model_tag="human")
    board = leaderboard(problem, cpu)
    assert [(e.submission.model_tag, e.rank, e.tied) for e in board] == [
        ("gpt-5.5", 1, True), ("gpt-5.5", 1, True), ("human", 3, False)
    ]
    low, high = board[0].speedup_interval
    assert (low, high) == (pytest.approx(3 / 1.1), pytest.approx(3.3))
    # A cut after the first entry still says it is tied with the next.
    assert [(e.rank, e.tied) for e in leaderboard(problem, cpu, limit=1)] == [(1, True)]


def test_without_intervals_only_equal_speedups_tie(judged, user, other_user, problem, cpu):
    judged(user, problem, cpu, speedups=(3, 3, 3))
    judged(other_user, problem, cpu, speedups=(2.99, 2.99, 2.99))
    assert [(e.rank, e.tied) for e in leaderboard(problem, cpu)] == [(1, False), (2, False)]


class _Ev:
    def __init__(self, speedup, low=None, high=None):
        self.speedup, self.speedup_low, self.speedup_high = speedup, low, high


def test_a_tie_group_is_measured_from_its_first_entry():
    # Each overlaps its neighbour, but the third does not reach the first: no chain of ties.
    evs = [_Ev(3.0, 2.8, 3.2), _Ev(2.75, 2.55, 2.95), _Ev(2.5, 2.3, 2.7), _Ev(2.5, 2.3, 2.7), _Ev(1.0)]
    assert tie_ranks(evs) == [(1, True), (1, True), (3, True), (3, True), (5, False)]
    assert tie_ranks([]) == []


def test_a_rerun_replaces_the_earlier_result(judged, worker, make_result, user, problem, cpu, broker):
    first = judged(user, problem, cpu, speedups=(4, 4, 4))
    [rerun] = queue_evaluations([first.submission], cpu)
    broker.enqueue(rerun.pk)
    assert leaderboard(problem, cpu)[0].evaluation.pk == first.pk  # a queued rerun changes nothing yet
    worker.finish(rerun, make_result(rerun, speedups=(2, 2, 2)))
    board = leaderboard(problem, cpu)
    assert [e.evaluation.pk for e in board] == [rerun.pk] and board[0].evaluation.speedup == pytest.approx(2)
    assert set(current(cpu).values_list("pk", flat=True)) == {rerun.pk}


def test_hidden_and_failed_results_do_not_rank(judged, user, other_user, problem, cpu):
    hidden = judged(user, problem, cpu, speedups=(9, 9, 9))
    Evaluation.objects.filter(pk=hidden.pk).update(hidden=True, rejected_reason="cached outputs")
    judged(other_user, problem, cpu, status="timeout")
    assert leaderboard(problem, cpu) == []
    assert best_speedups() == {} and solved_counts() == {}


def test_results_are_per_hardware(judged, user, problem, cpu, h200):
    judged(user, problem, cpu, speedups=(2, 2, 2))
    assert leaderboard(problem, h200) == []
    assert len(leaderboard(problem, cpu)) == 1


def test_catalog_figures_agree_with_the_leaderboards(judged, user, other_user, problem, other_problem, cpu, h200):
    judged(user, problem, cpu, speedups=(2, 2, 2))
    judged(other_user, problem, cpu, speedups=(3, 3, 3), model_tag="x")
    judged(other_user, problem, h200, speedups=(1.2, 1.2, 1.2), model_tag="x")
    judged(user, other_problem, h200, status="incorrect")
    best = best_speedups()
    assert best[(problem.pk, cpu.pk)] == pytest.approx(leaderboard(problem, cpu)[0].evaluation.speedup)
    assert best[(problem.pk, h200.pk)] == pytest.approx(1.2)
    assert (other_problem.pk, h200.pk) not in best
    assert solved_counts() == {problem.pk: 3}
    assert eligible().count() == 3


def test_leading_submissions(judged, user, other_user, problem, cpu, h200):
    top = judged(user, problem, cpu, speedups=(3, 3, 3))
    second = judged(other_user, problem, cpu, speedups=(2, 2, 2))
    assert leading_submission_ids(1, exclude_hardware=h200) == [top.submission_id]
    assert leading_submission_ids(5, exclude_hardware=h200) == [top.submission_id, second.submission_id]
    assert leading_submission_ids(5, exclude_hardware=cpu) == []


def test_an_older_run_finishing_late_does_not_replace_a_newer_result(
    submit, worker, make_result, user, problem, cpu, broker
):
    sub = submit(user, problem, cpu)
    first = sub.evaluations.get()
    # queue_evaluations never doubles an unfinished run; rows written otherwise are still ordered.
    second = Evaluation.objects.create(submission=sub, hardware=cpu, world_size=2, mode="cpu")
    broker.enqueue(second.pk)
    worker.finish(second, make_result(second, speedups=(2, 2, 2)))
    worker.finish(first, make_result(first, speedups=(5, 5, 5)))  # the older delivery comes back last
    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.superseded, second.superseded) == (True, False)
    assert [e.evaluation.pk for e in leaderboard(problem, cpu)] == [second.pk]


def test_denormalized_columns_follow_the_submission(submit, user, problem, cpu):
    ev = submit(user, problem, cpu, model_tag="m1").evaluations.get()
    assert (ev.problem_id, ev.model_tag) == (problem.pk, "m1")
    again = Evaluation.objects.create(submission=ev.submission, hardware=cpu, world_size=2, mode="cpu")
    assert (again.problem_id, again.model_tag) == (problem.pk, "m1")
