"""An evaluation's model tag is its submission's, copied so that the ranking and comparison queries
read one table. An admin who corrects a submission's tag (a typo, a model renamed) changes the
copies with it, by trigger as in 0003 and 0008, whoever writes the row, and raises the results
version; the evaluations' own triggers then move their counts and raise their problems' versions. The tag's format is checked on
the model too, so that the admin's form checks it."""

import django.core.validators
from django.db import migrations, models

POSTGRESQL = """
CREATE OR REPLACE FUNCTION pkb_model_tag_follows() RETURNS trigger AS $$
BEGIN
    -- The results version first (0003's columns leave the tag out), as every result's change
    -- takes it first: writers queue on that one row before they touch counts.
    UPDATE submissions_resultsversion SET version = version + 1;
    UPDATE submissions_evaluation SET model_tag = NEW.model_tag WHERE submission_id = NEW.id;
    RETURN NULL;
END $$ LANGUAGE plpgsql;
CREATE TRIGGER pkb_model_tag_follows AFTER UPDATE OF model_tag ON submissions_submission
    FOR EACH ROW WHEN (OLD.model_tag IS DISTINCT FROM NEW.model_tag) EXECUTE FUNCTION pkb_model_tag_follows();
"""
POSTGRESQL_DROP = """
DROP TRIGGER IF EXISTS pkb_model_tag_follows ON submissions_submission;
DROP FUNCTION IF EXISTS pkb_model_tag_follows();
"""
SQLITE = (
    "CREATE TRIGGER pkb_model_tag_follows AFTER UPDATE OF model_tag ON submissions_submission "
    "WHEN OLD.model_tag IS NOT NEW.model_tag "
    "BEGIN UPDATE submissions_resultsversion SET version = version + 1; "
    "UPDATE submissions_evaluation SET model_tag = NEW.model_tag WHERE submission_id = NEW.id; END;"
)
SQLITE_DROP = "DROP TRIGGER IF EXISTS pkb_model_tag_follows"


def create(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    sql = {"postgresql": POSTGRESQL, "sqlite": SQLITE}.get(vendor)
    if sql is None:
        raise NotImplementedError(f"no result triggers for {vendor}")
    schema_editor.execute(sql)
    # Copies left stale before this migration.
    schema_editor.execute(
        "UPDATE submissions_evaluation SET model_tag = (SELECT s.model_tag FROM submissions_submission s "
        "WHERE s.id = submissions_evaluation.submission_id) WHERE model_tag <> (SELECT s.model_tag FROM "
        "submissions_submission s WHERE s.id = submissions_evaluation.submission_id)"
    )


def drop(apps, schema_editor):
    schema_editor.execute(POSTGRESQL_DROP if schema_editor.connection.vendor == "postgresql" else SQLITE_DROP)


class Migration(migrations.Migration):
    dependencies = [("submissions", "0008_result_counts")]

    operations = [
        migrations.AlterField(
            model_name="submission",
            name="model_tag",
            field=models.CharField(
                db_index=True, help_text='who wrote it: "gpt-5.5", "human"', max_length=100,
                validators=[django.core.validators.RegexValidator("^[A-Za-z0-9][A-Za-z0-9._:/+@-]{0,99}$")],
            ),
        ),
        migrations.RunPython(create, drop),
    ]
