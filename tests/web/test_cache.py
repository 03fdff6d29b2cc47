"""Cached aggregates follow the results version, which the database raises on ranked changes only."""

import pytest
from django.core.cache import cache

from leaderboards.cache import results_version
from leaderboards.ranking import best_speedups
from submissions.models import Evaluation
from submissions.services import reject

pytestmark = pytest.mark.django_db


@pytest.fixture
def real_cache(settings):
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    cache.clear()
    yield
    cache.clear()


def test_version_moves_on_ranked_changes_only(submit, worker, make_result, user, problem, cpu):
    sub = submit(user, problem, cpu)
    ev = sub.evaluations.get()
    before = results_version()
    worker.stage(ev, "starting")
    worker.stage(ev, "timing")  # progress of a running evaluation changes no ranking
    assert results_version() == before
    worker.finish(ev, make_result(ev))
    done = results_version()
    assert done > before
    reject([sub.pk], "cheats")
    assert results_version() > done


def test_cached_best_speedups_follow_new_results(
    real_cache, judged, user, other_user, problem, cpu, django_assert_num_queries
):
    judged(user, problem, cpu, speedups=(2, 2, 2))
    assert best_speedups()[(problem.pk, cpu.pk)] == pytest.approx(2)
    with django_assert_num_queries(1):  # the version only: the aggregate comes from the cache
        best_speedups()
    judged(other_user, problem, cpu, speedups=(3, 3, 3))
    assert best_speedups()[(problem.pk, cpu.pk)] == pytest.approx(3)
    Evaluation.objects.filter(speedup__gt=2.5).update(hidden=True)
    assert best_speedups()[(problem.pk, cpu.pk)] == pytest.approx(2)


def test_version_moves_when_the_problem_set_changes(problem):
    before = results_version()
    problem.active = False
    problem.save()
    assert results_version() > before


def test_version_moves_when_hardware_changes(h200):
    before = results_version()
    h200.profile = "b200"
    h200.save()
    assert results_version() > before
