"""Model names with owners (ModelName): who vouches for which runs under a model tag. Which runs a
comparison counts depends on these rows, so changing them raises the results version, as changes
to problems and hardware do (0003): cached comparisons are never stale.

Tags submitted before this migration have no owner: unverified until someone registers them (an
admin can register a name to any account).
"""

import django.db.models.deletion
import django.db.models.functions.text
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


TABLES = ("submissions_modelname", "submissions_modelname_vouched_accounts")
BUMP = " BEGIN UPDATE submissions_resultsversion SET version = version + 1; END;"


def create(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    for table in TABLES:
        if vendor == "postgresql":  # pkb_bump_results_version() is 0003's
            schema_editor.execute(
                f"CREATE TRIGGER pkb_bump_on_{table} AFTER INSERT OR DELETE OR UPDATE ON {table} "
                "FOR EACH STATEMENT EXECUTE FUNCTION pkb_bump_results_version()"
            )
        elif vendor == "sqlite":
            for event in ("INSERT", "DELETE", "UPDATE"):
                schema_editor.execute(f"CREATE TRIGGER pkb_bump_{table}_{event.lower()} AFTER {event} ON {table}" + BUMP)
        else:
            raise NotImplementedError(f"no result triggers for {vendor}")


def drop(apps, schema_editor):
    for table in TABLES:
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(f"DROP TRIGGER IF EXISTS pkb_bump_on_{table} ON {table}")
        else:
            for event in ("insert", "delete", "update"):
                schema_editor.execute(f"DROP TRIGGER IF EXISTS pkb_bump_{table}_{event}")


class Migration(migrations.Migration):

    dependencies = [
        ('submissions', '0003_result_triggers'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='ModelName',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(help_text='the model tag, as submissions carry it', max_length=100, unique=True)),
                ('registered_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('owner', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='model_names', to=settings.AUTH_USER_MODEL)),
                ('vouched_accounts', models.ManyToManyField(blank=True, help_text='other accounts whose runs under this name the owner vouches for', related_name='vouched_model_names', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ('name',),
                'constraints': [models.UniqueConstraint(django.db.models.functions.text.Lower('name'), name='model_name_unique_case_insensitive')],
            },
        ),
        migrations.RunPython(create, drop),
    ]
