"""What the comparison pages read right after results change (ResultCount kept by triggers, per-problem
parts cached under ProblemResultsVersion, figures memoized by their inputs) equals the
straightforward computation from the evaluations, on PostgreSQL and on SQLite (the embedded
default), and a new result costs its own row and its own problem only."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import result_counts_scenario
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext

from evaluator.results import FailureKind
from leaderboards import comparisons, metrics
from submissions import models as submission_models

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def real_cache(settings):
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    cache.clear()
    yield
    cache.clear()


def test_the_counted_thresholds_are_the_metrics_grids():
    migration = importlib.import_module("submissions.migrations.0008_result_counts")
    assert submission_models.SPEEDUP_THRESHOLDS == metrics.P_GRID == migration.SPEEDUPS
    assert submission_models.UTILIZATION_THRESHOLDS == metrics.U_GRID == migration.UTILIZATIONS
    assert submission_models.FAILURE_COLUMNS == tuple(k.value for k in FailureKind) == migration.FAILURES
    assert submission_models.COUNT_COLUMNS == tuple(comparisons.COUNTS) == migration.COUNTS


@pytest.mark.django_db
def test_pages_read_what_the_evaluations_say_after_every_change_postgresql(real_cache):
    result_counts_scenario.run()


@pytest.mark.slow
def test_pages_read_what_the_evaluations_say_after_every_change_sqlite(tmp_path):
    (tmp_path / "sqlite_settings.py").write_text(
        textwrap.dedent(f"""
            from pkb_site.settings import *  # noqa: F403

            DATABASES = {{"default": {{"ENGINE": "django.db.backends.sqlite3", "NAME": {str(tmp_path / "db.sqlite3")!r}}}}}
            CACHES = {{"default": {{"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}}}
            PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
        """)
    )
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("PKB_", "DJANGO_"))},
        "DJANGO_SETTINGS_MODULE": "sqlite_settings",
        "PKB_DATABASE_URL": "postgres://unused/unused",  # replaced by sqlite_settings; keeps var/ untouched
        "PKB_SECRET_KEY": "s" * 50,
        "PYTHONPATH": os.pathsep.join(map(str, (tmp_path, ROOT / "tests" / "web", ROOT / "platform", ROOT))),
    }
    code = (
        "import django; django.setup(); from django.core.management import call_command; "
        "call_command('migrate', verbosity=0); import result_counts_scenario; result_counts_scenario.run(); print('ok')"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stdout[-3000:] + done.stderr[-6000:]


@pytest.mark.django_db
def test_a_new_result_rereads_its_own_problem_only(
    real_cache, submit, worker, make_result, judged, user, problem, other_problem, cpu, h200
):
    for prob in (problem, other_problem):
        for ev in submit(user, prob, [cpu, h200], model_tag="gpt").evaluations.all():
            worker.finish(ev, make_result(ev))
    comparisons.compare_hardware(cpu, h200)
    judged(user, other_problem, h200, model_tag="gpt", speedups=(3, 3, 3))
    with CaptureQueriesContext(connection) as ctx:
        summary = comparisons.pair_summary(cpu, h200, None)
    [pairs_query] = [q["sql"] for q in ctx.captured_queries if "JOIN submissions_evaluation b" in q["sql"]]
    assert f"a.problem_id IN ({other_problem.pk})" in pairs_query  # the other problem's part came from the cache
    assert summary[0] == 2


@pytest.mark.django_db
def test_a_new_result_rereads_its_own_model_only(real_cache, judged, user, problem, other_problem, h200):
    for model in ("gpt", "glm"):
        for prob in (problem, other_problem):
            judged(user, prob, h200, model_tag=model)
    before = comparisons.compare_models(h200)
    judged(user, problem, h200, model_tag="glm", status="timeout", sample_index=1)
    with CaptureQueriesContext(connection) as ctx:
        after = comparisons.compare_models(h200)
    # It sums ResultCount rows, never the evaluations, and reads only glm's, whose figures changed.
    assert not any("submissions_evaluation" in q["sql"] for q in ctx.captured_queries)
    [rows_query] = [q["sql"] for q in ctx.captured_queries if q["sql"].startswith("SELECT model_tag, problem_id, SUM(")]
    assert "'glm'" in rows_query and "'gpt'" not in rows_query
    assert {s.model: s for s in after.scores}["gpt"] == {s.model: s for s in before.scores}["gpt"]
    assert {s.model: s for s in after.scores}["glm"].failures["timeout"] == 1


@pytest.mark.django_db
def test_a_result_changes_its_own_count_row(judged, submit, worker, make_result, user, other_user, problem, cpu):
    from submissions.models import ResultCount

    judged(user, problem, cpu, model_tag="gpt", speedups=(2, 2, 2))
    sub = submit(other_user, problem, cpu, model_tag="gpt", sample_index=1)
    ev = sub.evaluations.get()
    worker.finish(ev, make_result(ev, status="incorrect"))
    rows = {r.submitter_id: r for r in ResultCount.objects.filter(hardware=cpu, problem=problem, model_tag="gpt")}
    assert (rows[user.pk].n, rows[user.pk].correct_n, rows[user.pk].fast_10, rows[user.pk].fast_20) == (1, 1, 1, 0)
    assert (rows[other_user.pk].n, rows[other_user.pk].incorrect, rows[other_user.pk].correct_n) == (1, 1, 0)
    # other_user's run is not vouched for (gpt is alice's): it counts only with unverified runs
    [vouched] = comparisons.per_problem_counts(cpu)
    [everyone] = comparisons.per_problem_counts(cpu, include_unverified=True)
    assert (vouched["n"], everyone["n"], everyone["incorrect"]) == (1, 2, 1)
