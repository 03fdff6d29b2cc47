"""A hardware's GPU numbers are no longer stored: they are its profile's in evaluator/hardware.toml,
the file the evaluator's rooflines read (Hardware.roofline_profile). The columns are dropped; a row
whose numbers had been edited away from its profile's is named on the way, since its pages now
show the profile's."""

from django.db import migrations, models

import catalog.models

NUMBERS = ("bf16_tc", "fp16_tc", "fp8_tc", "tf32_tc", "fp32", "hbm_tbps", "nvlink_gbps", "l2_mb", "nvls")


def name_edited_numbers(apps, schema_editor):
    from evaluator.roofline import profiles

    known = profiles()
    Hardware = apps.get_model("catalog", "Hardware")
    for hw in Hardware.objects.using(schema_editor.connection.alias).order_by("slug"):
        profile = known.get(hw.profile)
        if profile is None:
            print(f"\n  hardware {hw.slug}: profile {hw.profile!r} is not in evaluator/hardware.toml; add it there")
            continue
        edited = [f"{f} {getattr(hw, f)} (now {getattr(profile, f)})" for f in NUMBERS if getattr(hw, f) != getattr(profile, f)]
        if edited:
            print(f"\n  hardware {hw.slug}: numbers now those of profile {hw.profile}: {', '.join(edited)}")


class Migration(migrations.Migration):

    dependencies = [
        ("catalog", "0001_initial"),
    ]

    operations = [
        migrations.RunPython(name_edited_numbers, migrations.RunPython.noop),
        *(migrations.RemoveField(model_name="hardware", name=name) for name in NUMBERS),
        migrations.AlterField(
            model_name="hardware",
            name="profile",
            field=models.CharField(
                choices=catalog.models.profile_choices,
                help_text="its GPU: a profile of evaluator/hardware.toml, which holds the GPU's numbers",
                max_length=50,
            ),
        ),
    ]
