"""Problems, hardware and case studies moved to apps of their own, and hardware numbers left the
database: a database holding rows from before (the last migration before the moves) upgrades with
every row still there and linked as before, and the result triggers still fire. On PostgreSQL (a
schema of its own in the test database) and on SQLite (the embedded default)."""

from __future__ import annotations

import pytest
from django.db import connections
from django.db.migrations.executor import MigrationExecutor
from django.db.utils import load_backend

from catalog.models import Hardware
from evaluator.roofline import profile

BEFORE = [("submissions", "0005_speedup_interval")]
NUMBERS = ("bf16_tc", "fp16_tc", "fp8_tc", "tf32_tc", "fp32", "hbm_tbps", "nvlink_gbps", "l2_mb", "nvls")
ALIAS = "migrations"
SCHEMA = "pkb_migrations_test"


@pytest.fixture(params=["postgresql", "sqlite"])
def empty_database(request, db, tmp_path):
    """A connection of its own to an empty database: a schema of the test database, or a file. Made
    at run time, outside DATABASES, as Django lets tests do."""
    default = connections["default"].settings_dict
    if request.param == "postgresql":
        config = {**default, "OPTIONS": {**default["OPTIONS"], "options": f"-c search_path={SCHEMA}"}}
    else:
        sqlite = {"ENGINE": "django.db.backends.sqlite3", "NAME": str(tmp_path / "db.sqlite3"), "OPTIONS": {}}
        config = {**default, **sqlite}
    connection = load_backend(config["ENGINE"]).DatabaseWrapper(config, ALIAS)
    setattr(connections._connections, ALIAS, connection)  # so that .using(ALIAS) finds it
    if request.param == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
            cursor.execute(f"CREATE SCHEMA {SCHEMA}")
    try:
        yield connection
    finally:
        if request.param == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute(f"DROP SCHEMA {SCHEMA} CASCADE")
        connection.close()
        del connections[ALIAS]


def results_version(connection) -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT version FROM submissions_resultsversion")
        return cursor.fetchone()[0]


def test_rows_from_before_the_moves_survive_them(empty_database, capsys):
    db = empty_database.alias
    executor = MigrationExecutor(empty_database)
    executor.migrate(BEFORE)
    old = executor.loader.project_state(BEFORE).apps

    def rows(label: str, apps=old):
        return apps.get_model(label).objects.using(db)

    user = rows("auth.User").create(username="alice")
    problem = rows("submissions.Problem").create(
        slug="allreduce", title="All-reduce", level=1, parallelism="collective"
    )
    numbers = {f: getattr(profile("h200"), f) for f in NUMBERS} | {"nvlink_gbps": 900.0}  # edited in the admin
    hw = rows("submissions.Hardware").create(
        slug="h200x4", name="4x H200", profile="h200", gpu_count=4, mode="gpu", **numbers
    )
    sub = rows("submissions.Submission").create(
        problem=problem, owner=user, model_tag="human", backend="cuda", code="def solution(): ...", sha256="0" * 64
    )
    ev = rows("submissions.Evaluation").create(
        submission=sub, hardware=hw, problem=problem, model_tag="human", world_size=4, mode="gpu",
        state="done", stage="done", status="correct", speedup=2.0,
    )  # fmt: skip
    study = rows("submissions.CaseStudy").create(
        title="A ring", slug="ring", body="# Ring", author=user, published=True
    )
    study.evaluations.add(ev)
    for model in ("problem", "hardware", "casestudy", "evaluation"):
        rows("contenttypes.ContentType").create(app_label="submissions", model=model)

    executor = MigrationExecutor(empty_database)
    latest = executor.loader.graph.leaf_nodes()
    executor.migrate(latest)
    new = executor.loader.project_state(latest).apps

    study = rows("casestudies.CaseStudy", new).get(slug="ring")
    assert (study.title, study.author_id, study.published) == ("A ring", user.pk, True)
    assert list(study.evaluations.values_list("pk", flat=True)) == [ev.pk]
    moved = rows("submissions.Evaluation", new).get(pk=ev.pk)
    assert (moved.hardware_id, moved.problem_id, moved.submission_id) == (hw.pk, problem.pk, sub.pk)
    assert rows("catalog.Problem", new).get(pk=problem.pk).slug == "allreduce"

    hardware = Hardware.objects.using(db).get(pk=hw.pk)
    assert (hardware.slug, hardware.profile, hardware.gpu_count) == ("h200x4", "h200", 4)
    assert hardware.roofline_profile().nvlink_gbps == 450  # the profile's, not the stored 900
    assert "hardware h200x4: numbers now those of profile h200: nvlink_gbps 900.0 (now 450)" in capsys.readouterr().out
    with empty_database.cursor() as cursor:
        columns = {c.name for c in empty_database.introspection.get_table_description(cursor, "submissions_hardware")}
    assert not columns & set(NUMBERS)

    labels = set(rows("contenttypes.ContentType", new).values_list("app_label", "model"))
    assert {("catalog", "problem"), ("catalog", "hardware"), ("casestudies", "casestudy")} <= labels
    assert {("submissions", "evaluation")} == {t for t in labels if t[0] == "submissions"}

    before = results_version(empty_database)  # the hardware table's triggers outlived its dropped columns
    Hardware.objects.using(db).filter(pk=hw.pk).update(active=False)
    assert results_version(empty_database) > before
