"""The embedded default evaluates on CPU processes: create the "cpu" hardware (H100 numbers, so
the roofline columns have something to show)."""

from django.db import migrations

from evaluator.roofline import profile

NUMBERS = ("bf16_tc", "fp16_tc", "fp8_tc", "tf32_tc", "fp32", "hbm_tbps", "nvlink_gbps", "l2_mb", "nvls")


def create_cpu_hardware(apps, schema_editor):
    hardware = apps.get_model("submissions", "Hardware").objects.using(schema_editor.connection.alias)
    if hardware.filter(slug="cpu").exists():
        return
    p = profile("h100")
    hardware.create(
        slug="cpu", name="CPU (gloo, 2 processes)", profile="h100", gpu_count=2, mode="cpu",
        **{f: getattr(p, f) for f in NUMBERS},
    )


class Migration(migrations.Migration):
    dependencies = [("submissions", "0001_initial")]
    operations = [migrations.RunPython(create_cpu_hardware, migrations.RunPython.noop)]
