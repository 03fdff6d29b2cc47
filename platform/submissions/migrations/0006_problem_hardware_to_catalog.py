"""Problems and hardware now belong to the catalog app (catalog 0001): the foreign keys point
there, and the models leave this app's state. The database is untouched but for the content
types, renamed so that permissions and admin history follow the models."""

import django.db.models.deletion
from django.db import migrations, models

MOVED = ("problem", "hardware")


def rename_content_types(old: str, new: str):
    def rename(apps, schema_editor):
        ContentType = apps.get_model("contenttypes", "ContentType")
        types = ContentType.objects.using(schema_editor.connection.alias)
        for model in MOVED:
            if not types.filter(app_label=new, model=model).exists():
                types.filter(app_label=old, model=model).update(app_label=new)

    return rename


class Migration(migrations.Migration):

    dependencies = [
        ("catalog", "0001_initial"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("submissions", "0005_speedup_interval"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="evaluation",
                    name="hardware",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT, related_name="evaluations", to="catalog.hardware"
                    ),
                ),
                migrations.AlterField(
                    model_name="evaluation",
                    name="problem",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT, related_name="evaluations", to="catalog.problem"
                    ),
                ),
                migrations.AlterField(
                    model_name="submission",
                    name="problem",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT, related_name="submissions", to="catalog.problem"
                    ),
                ),
                migrations.DeleteModel(name="Hardware"),
                migrations.DeleteModel(name="Problem"),
            ],
            database_operations=[],
        ),
        migrations.RunPython(
            rename_content_types("submissions", "catalog"), rename_content_types("catalog", "submissions")
        ),
    ]
