"""Two facts kept by the database itself, so they hold whoever writes evaluations (the dispatch
app, the admin, a bulk load):

- Evaluation.superseded: when an evaluation becomes done, the older done evaluations of the same
  submission on the same hardware are superseded, and it is superseded itself if a newer one is
  already done. A rerun replaces the result.
- ResultsVersion.version: raised by every change to what the catalog, rankings and comparisons
  read (finished evaluations, problems, hardware), so anything cached under it is never stale.
"""

from django.db import migrations

RANKED_COLUMNS = "state, status, hidden, speedup, utilization, output_digest, superseded"
# Progress of running evaluations changes no ranking: only rows that are or were done count.
CHANGED = (
    f"(OLD.state = 'done' OR NEW.state = 'done') AND ({', '.join('OLD.' + c for c in RANKED_COLUMNS.split(', '))}) "
    f"IS DISTINCT FROM ({', '.join('NEW.' + c for c in RANKED_COLUMNS.split(', '))})"
)

POSTGRESQL = f"""
CREATE OR REPLACE FUNCTION pkb_superseded_self() RETURNS trigger AS $$
BEGIN
    IF NEW.state = 'done' THEN
        NEW.superseded := EXISTS (
            SELECT 1 FROM submissions_evaluation
             WHERE submission_id = NEW.submission_id AND hardware_id = NEW.hardware_id
               AND state = 'done' AND id > NEW.id);
    END IF;
    RETURN NEW;
END $$ LANGUAGE plpgsql;
CREATE OR REPLACE FUNCTION pkb_supersede_older() RETURNS trigger AS $$
BEGIN
    UPDATE submissions_evaluation SET superseded = TRUE
     WHERE submission_id = NEW.submission_id AND hardware_id = NEW.hardware_id
       AND state = 'done' AND id < NEW.id AND NOT superseded;
    RETURN NULL;
END $$ LANGUAGE plpgsql;
CREATE OR REPLACE FUNCTION pkb_bump_results_version() RETURNS trigger AS $$
BEGIN
    UPDATE submissions_resultsversion SET version = version + 1;
    RETURN NULL;
END $$ LANGUAGE plpgsql;
CREATE TRIGGER pkb_superseded_self BEFORE INSERT OR UPDATE OF state ON submissions_evaluation
    FOR EACH ROW EXECUTE FUNCTION pkb_superseded_self();
-- After the statement's own row changes, so one UPDATE finishing several rows cannot trip over them.
CREATE TRIGGER pkb_supersede_older AFTER INSERT OR UPDATE OF state ON submissions_evaluation
    FOR EACH ROW WHEN (NEW.state = 'done') EXECUTE FUNCTION pkb_supersede_older();
CREATE TRIGGER pkb_bump_on_insert AFTER INSERT ON submissions_evaluation
    FOR EACH ROW WHEN (NEW.state = 'done') EXECUTE FUNCTION pkb_bump_results_version();
CREATE TRIGGER pkb_bump_on_delete AFTER DELETE ON submissions_evaluation
    FOR EACH ROW WHEN (OLD.state = 'done') EXECUTE FUNCTION pkb_bump_results_version();
CREATE TRIGGER pkb_bump_on_update AFTER UPDATE OF {RANKED_COLUMNS} ON submissions_evaluation
    FOR EACH ROW WHEN ({CHANGED}) EXECUTE FUNCTION pkb_bump_results_version();
CREATE TRIGGER pkb_bump_on_problems AFTER INSERT OR DELETE OR UPDATE ON submissions_problem
    FOR EACH STATEMENT EXECUTE FUNCTION pkb_bump_results_version();
CREATE TRIGGER pkb_bump_on_hardware AFTER INSERT OR DELETE OR UPDATE ON submissions_hardware
    FOR EACH STATEMENT EXECUTE FUNCTION pkb_bump_results_version();
"""
POSTGRESQL_DROP = """
DROP TRIGGER IF EXISTS pkb_superseded_self ON submissions_evaluation;
DROP TRIGGER IF EXISTS pkb_supersede_older ON submissions_evaluation;
DROP TRIGGER IF EXISTS pkb_bump_on_insert ON submissions_evaluation;
DROP TRIGGER IF EXISTS pkb_bump_on_delete ON submissions_evaluation;
DROP TRIGGER IF EXISTS pkb_bump_on_update ON submissions_evaluation;
DROP TRIGGER IF EXISTS pkb_bump_on_problems ON submissions_problem;
DROP TRIGGER IF EXISTS pkb_bump_on_hardware ON submissions_hardware;
DROP FUNCTION IF EXISTS pkb_superseded_self();
DROP FUNCTION IF EXISTS pkb_supersede_older();
DROP FUNCTION IF EXISTS pkb_bump_results_version();
"""

_SQLITE_SUPERSEDE = """
BEGIN
    UPDATE submissions_evaluation SET superseded = 1
     WHERE submission_id = NEW.submission_id AND hardware_id = NEW.hardware_id
       AND state = 'done' AND id < NEW.id;
    UPDATE submissions_evaluation SET superseded = EXISTS (
        SELECT 1 FROM submissions_evaluation AS later
         WHERE later.submission_id = NEW.submission_id AND later.hardware_id = NEW.hardware_id
           AND later.state = 'done' AND later.id > NEW.id)
     WHERE id = NEW.id;
END;
"""
_SQLITE_BUMP = " BEGIN UPDATE submissions_resultsversion SET version = version + 1; END;"
SQLITE = [
    "CREATE TRIGGER pkb_supersede_update AFTER UPDATE OF state ON submissions_evaluation "
    "WHEN NEW.state = 'done'" + _SQLITE_SUPERSEDE,
    "CREATE TRIGGER pkb_supersede_insert AFTER INSERT ON submissions_evaluation WHEN NEW.state = 'done'"
    + _SQLITE_SUPERSEDE,
    "CREATE TRIGGER pkb_bump_insert AFTER INSERT ON submissions_evaluation WHEN NEW.state = 'done'" + _SQLITE_BUMP,
    "CREATE TRIGGER pkb_bump_delete AFTER DELETE ON submissions_evaluation WHEN OLD.state = 'done'" + _SQLITE_BUMP,
    f"CREATE TRIGGER pkb_bump_update AFTER UPDATE OF {RANKED_COLUMNS} ON submissions_evaluation "
    "WHEN OLD.state = 'done' OR NEW.state = 'done'" + _SQLITE_BUMP,
    *(
        f"CREATE TRIGGER pkb_bump_{table}_{event.lower()} AFTER {event} ON submissions_{table}" + _SQLITE_BUMP
        for table in ("problem", "hardware")
        for event in ("INSERT", "DELETE", "UPDATE")
    ),
]
SQLITE_DROP = [
    f"DROP TRIGGER IF EXISTS {name}"
    for name in (
        "pkb_supersede_update", "pkb_supersede_insert", "pkb_bump_insert", "pkb_bump_delete", "pkb_bump_update",
        *(f"pkb_bump_{table}_{event}" for table in ("problem", "hardware") for event in ("insert", "delete", "update")),
    )
]


def create(apps, schema_editor):
    apps.get_model("submissions", "ResultsVersion").objects.using(schema_editor.connection.alias).get_or_create(pk=1)
    vendor = schema_editor.connection.vendor
    statements = {"postgresql": [POSTGRESQL], "sqlite": SQLITE}.get(vendor)
    if statements is None:
        raise NotImplementedError(f"no result triggers for {vendor}")
    for sql in statements:
        schema_editor.execute(sql)


def drop(apps, schema_editor):
    for sql in [POSTGRESQL_DROP] if schema_editor.connection.vendor == "postgresql" else SQLITE_DROP:
        schema_editor.execute(sql)


class Migration(migrations.Migration):
    dependencies = [("submissions", "0002_cpu_hardware")]
    operations = [migrations.RunPython(create, drop)]
