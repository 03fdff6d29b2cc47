"""Case studies now belong to the casestudies app (casestudies 0001, which takes the model into its
state and renames the content type). Only Django's state changes: the tables submissions_casestudy
and submissions_casestudy_evaluations stay, with their rows."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("submissions", "0006_problem_hardware_to_catalog"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="CaseStudy")],
            database_operations=[],
        ),
    ]
