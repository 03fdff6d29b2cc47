"""What comparisons read, kept up to date as results change, so a page right after a new result
does not reread every result:

- ResultCount: per hardware, problem, model tag and submitting account, the counts the model
  comparisons sum (current results, correct ones, those over each speedup and roofline threshold,
  failures by kind).
- ProblemResultsVersion: a results version per problem and hardware, for aggregates cached
  problem by problem (the hardware comparison's, the catalog's).
- ev_visible: a problem's visible current results on a hardware, in the hardware comparison's order;
  ev_newest: the newest results, for the home page.

Triggers, as in 0003, so the rows hold whoever writes evaluations: an evaluation row that is or
was done takes its old contribution out of its ResultCount row and puts its new one in (a rerun
that supersedes an older result is two such changes), and raises its ProblemResultsVersion. A
submission handed to another account moves its counts. Loading rows with triggers off needs
leaderboards.comparisons.recount_results() afterwards.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

# leaderboards.metrics.P_GRID and U_GRID, and FailureKind, as of this migration.
SPEEDUPS = tuple(round(0.1 * i, 1) for i in range(31))
UTILIZATIONS = tuple(round(0.05 * i, 2) for i in range(21))
FAILURES = ("compile_error", "runtime_error", "incorrect", "timeout", "rejected")
COUNTS = (
    "n",
    "correct_n",
    *(f"fast_{i}" for i in range(len(SPEEDUPS))),
    *(f"roof_{i}" for i in range(len(UTILIZATIONS))),
    *FAILURES,
)
KEY = "hardware_id, problem_id, model_tag, submitter_id"
# What a result's contribution depends on: a change to any of these moves it.
COUNTED = (
    "state", "superseded", "status", "hidden", "speedup", "utilization", "output_digest",
    "hardware_id", "problem_id", "model_tag", "submission_id",
)  # fmt: skip


def conditions(r: str) -> dict[str, str]:
    """Count column -> the SQL condition for evaluation row `r` to count in it (the same conditions
    as leaderboards.comparisons.COUNTS)."""
    correct = f"{r}.status = 'correct' AND NOT {r}.hidden"
    out = {"n": "1 = 1", "correct_n": correct}
    for i, p in enumerate(SPEEDUPS):
        out[f"fast_{i}"] = f"{correct} AND {r}.speedup > {p!r}" if p > 0 else correct
    for i, u in enumerate(UTILIZATIONS):
        out[f"roof_{i}"] = f"{correct} AND {r}.utilization >= {u!r}" if u > 0 else correct
    for kind in FAILURES:
        out[kind] = f"{r}.status = '{kind}' AND NOT {r}.hidden"
    out["rejected"] = f"({r}.status = 'rejected' OR {r}.hidden)"
    return out


def _upsert(select: str) -> str:
    merge = ", ".join(f"{c} = submissions_resultcount.{c} + excluded.{c}" for c in COUNTS)
    return (
        f"INSERT INTO submissions_resultcount ({KEY}, {', '.join(COUNTS)}) {select} "
        f"ON CONFLICT ({KEY}) DO UPDATE SET {merge};"
    )


def count_row(r: str, sign: int) -> str:
    """Add (sign 1) or take out (-1) the contribution of trigger row r (NEW or OLD), if it is current."""
    values = ", ".join(f"CASE WHEN {cond} THEN {sign} ELSE 0 END" for cond in conditions(r).values())
    return _upsert(
        f"SELECT {r}.hardware_id, {r}.problem_id, {r}.model_tag, s.owner_id, {values} "
        f"FROM submissions_submission s WHERE s.id = {r}.submission_id AND {r}.state = 'done' AND NOT {r}.superseded"
    )


def count_submission(owner: str, sign: int) -> str:
    """Add or take out, under account `owner`, the current results of the submission NEW."""
    values = ", ".join(f"SUM(CASE WHEN {cond} THEN {sign} ELSE 0 END)" for cond in conditions("e").values())
    return _upsert(
        f"SELECT e.hardware_id, e.problem_id, e.model_tag, {owner}, {values} FROM submissions_evaluation e "
        "WHERE e.submission_id = NEW.id AND e.state = 'done' AND NOT e.superseded "
        "GROUP BY e.hardware_id, e.problem_id, e.model_tag"
    )


def raise_version(r: str) -> str:
    return (
        "INSERT INTO submissions_problemresultsversion (problem_id, hardware_id, version) "
        f"VALUES ({r}.problem_id, {r}.hardware_id, 1) ON CONFLICT (problem_id, hardware_id) "
        "DO UPDATE SET version = submissions_problemresultsversion.version + 1;"
    )


_PG_CHANGED = f"({', '.join('OLD.' + c for c in COUNTED)}) IS DISTINCT FROM ({', '.join('NEW.' + c for c in COUNTED)})"
POSTGRESQL = f"""
CREATE OR REPLACE FUNCTION pkb_count_results() RETURNS trigger AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        {count_row("OLD", -1)}
        {raise_version("OLD")}
    END IF;
    IF TG_OP <> 'DELETE' THEN
        {count_row("NEW", 1)}
        {raise_version("NEW")}
    END IF;
    RETURN NULL;
END $$ LANGUAGE plpgsql;
CREATE OR REPLACE FUNCTION pkb_recount_submission() RETURNS trigger AS $$
BEGIN
    -- The version first, as every result's change takes it (0003's triggers fire before these by
    -- name): writers queue on that one row before they touch counts, and never deadlock over them.
    UPDATE submissions_resultsversion SET version = version + 1;
    {count_submission("OLD.owner_id", -1)}
    {count_submission("NEW.owner_id", 1)}
    RETURN NULL;
END $$ LANGUAGE plpgsql;
CREATE TRIGGER pkb_count_on_insert AFTER INSERT ON submissions_evaluation
    FOR EACH ROW WHEN (NEW.state = 'done') EXECUTE FUNCTION pkb_count_results();
CREATE TRIGGER pkb_count_on_delete AFTER DELETE ON submissions_evaluation
    FOR EACH ROW WHEN (OLD.state = 'done') EXECUTE FUNCTION pkb_count_results();
CREATE TRIGGER pkb_count_on_update AFTER UPDATE ON submissions_evaluation
    FOR EACH ROW WHEN ((OLD.state = 'done' OR NEW.state = 'done') AND {_PG_CHANGED})
    EXECUTE FUNCTION pkb_count_results();
CREATE TRIGGER pkb_recount_on_owner AFTER UPDATE OF owner_id ON submissions_submission
    FOR EACH ROW WHEN (OLD.owner_id IS DISTINCT FROM NEW.owner_id) EXECUTE FUNCTION pkb_recount_submission();
"""
POSTGRESQL_DROP = """
DROP TRIGGER IF EXISTS pkb_count_on_insert ON submissions_evaluation;
DROP TRIGGER IF EXISTS pkb_count_on_delete ON submissions_evaluation;
DROP TRIGGER IF EXISTS pkb_count_on_update ON submissions_evaluation;
DROP TRIGGER IF EXISTS pkb_recount_on_owner ON submissions_submission;
DROP FUNCTION IF EXISTS pkb_count_results();
DROP FUNCTION IF EXISTS pkb_recount_submission();
"""

_SQLITE_CHANGED = " OR ".join(f"OLD.{c} IS NOT NEW.{c}" for c in COUNTED)
SQLITE = [
    "CREATE TRIGGER pkb_count_insert AFTER INSERT ON submissions_evaluation WHEN NEW.state = 'done' "
    f"BEGIN {count_row('NEW', 1)} {raise_version('NEW')} END;",
    "CREATE TRIGGER pkb_count_delete AFTER DELETE ON submissions_evaluation WHEN OLD.state = 'done' "
    f"BEGIN {count_row('OLD', -1)} {raise_version('OLD')} END;",
    "CREATE TRIGGER pkb_count_update AFTER UPDATE ON submissions_evaluation "
    f"WHEN (OLD.state = 'done' OR NEW.state = 'done') AND ({_SQLITE_CHANGED}) "
    f"BEGIN {count_row('OLD', -1)} {count_row('NEW', 1)} {raise_version('OLD')} {raise_version('NEW')} END;",
    "CREATE TRIGGER pkb_recount_owner AFTER UPDATE OF owner_id ON submissions_submission "
    "WHEN OLD.owner_id IS NOT NEW.owner_id BEGIN UPDATE submissions_resultsversion SET version = version + 1; "
    f"{count_submission('OLD.owner_id', -1)} {count_submission('NEW.owner_id', 1)} END;",
]
SQLITE_DROP = [
    f"DROP TRIGGER IF EXISTS {name}"
    for name in ("pkb_count_insert", "pkb_count_delete", "pkb_count_update", "pkb_recount_owner")
]

BACKFILL = [
    _upsert(
        f"SELECT e.hardware_id, e.problem_id, e.model_tag, s.owner_id, "
        f"{', '.join(f'SUM(CASE WHEN {cond} THEN 1 ELSE 0 END)' for cond in conditions('e').values())} "
        "FROM submissions_evaluation e JOIN submissions_submission s ON s.id = e.submission_id "
        "WHERE e.state = 'done' AND NOT e.superseded GROUP BY e.hardware_id, e.problem_id, e.model_tag, s.owner_id"
    ),
    "INSERT INTO submissions_problemresultsversion (problem_id, hardware_id, version) "
    "SELECT problem_id, hardware_id, 1 FROM submissions_evaluation WHERE state = 'done' GROUP BY problem_id, hardware_id",
]


def create(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    statements = {"postgresql": [POSTGRESQL], "sqlite": SQLITE}.get(vendor)
    if statements is None:
        raise NotImplementedError(f"no result triggers for {vendor}")
    for sql in [*statements, *BACKFILL]:
        schema_editor.execute(sql)


def drop(apps, schema_editor):
    for sql in [POSTGRESQL_DROP] if schema_editor.connection.vendor == "postgresql" else SQLITE_DROP:
        schema_editor.execute(sql)


def _fk(to):
    return models.ForeignKey(
        on_delete=django.db.models.deletion.DO_NOTHING, db_constraint=False, db_index=False, related_name="+", to=to
    )


class Migration(migrations.Migration):
    dependencies = [
        ("submissions", "0007_case_study_to_casestudies"),
        ("catalog", "0002_hardware_numbers_from_profile"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="ResultCount",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("hardware", _fk("catalog.hardware")),
                ("problem", _fk("catalog.problem")),
                ("model_tag", models.CharField(max_length=100)),
                ("submitter", _fk(settings.AUTH_USER_MODEL)),
                *((name, models.IntegerField(default=0)) for name in COUNTS),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(
                        fields=("hardware", "problem", "model_tag", "submitter"), name="result_count_key"
                    )
                ],
            },
        ),
        migrations.CreateModel(
            name="ProblemResultsVersion",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("problem", _fk("catalog.problem")),
                ("hardware", _fk("catalog.hardware")),
                ("version", models.BigIntegerField(default=0)),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(fields=("problem", "hardware"), name="problem_results_version_key")
                ],
            },
        ),
        migrations.AddIndex(
            model_name="evaluation",
            index=models.Index(
                condition=models.Q(("hidden", False), ("state", "done"), ("superseded", False)),
                fields=["problem", "hardware", "-speedup", "id"],
                name="ev_visible",
            ),
        ),
        migrations.AddIndex(
            model_name="evaluation",
            index=models.Index(
                condition=models.Q(("hidden", False), ("state", "done"), ("superseded", False)),
                fields=["-finished_at", "-id"],
                name="ev_newest",
            ),
        ),
        migrations.RunPython(create, drop),
    ]
