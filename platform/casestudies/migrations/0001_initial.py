"""Case studies move here from the submissions app (submissions 0007 removes them from its state).
Only Django's state changes: the model keeps its tables (submissions_casestudy, and
submissions_casestudy_evaluations for its links to evaluations) and their rows. The content type is
renamed so that permissions and admin history follow the model."""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


def rename_content_type(old: str, new: str):
    def rename(apps, schema_editor):
        ContentType = apps.get_model("contenttypes", "ContentType")
        types = ContentType.objects.using(schema_editor.connection.alias)
        if not types.filter(app_label=new, model="casestudy").exists():
            types.filter(app_label=old, model="casestudy").update(app_label=new)

    return rename


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("submissions", "0007_case_study_to_casestudies"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="CaseStudy",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("title", models.CharField(max_length=200)),
                        ("slug", models.SlugField(max_length=200, unique=True)),
                        ("body", models.TextField(help_text="Markdown; HTML is sanitized")),
                        ("published", models.BooleanField(default=False)),
                        ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                        ("updated_at", models.DateTimeField(auto_now=True)),
                        (
                            "author",
                            models.ForeignKey(
                                null=True, on_delete=django.db.models.deletion.SET_NULL, to=settings.AUTH_USER_MODEL
                            ),
                        ),
                        (
                            "evaluations",
                            models.ManyToManyField(blank=True, related_name="case_studies", to="submissions.evaluation"),
                        ),
                    ],
                    options={
                        "verbose_name_plural": "case studies",
                        "db_table": "submissions_casestudy",
                        "ordering": ("-created_at",),
                    },
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(
            rename_content_type("submissions", "casestudies"), rename_content_type("casestudies", "submissions")
        ),
    ]
