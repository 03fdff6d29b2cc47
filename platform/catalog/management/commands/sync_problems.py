from django.core.management.base import BaseCommand

from catalog.sync import ensure_cpu_hardware, sync_problems


class Command(BaseCommand):
    help = "Copy the problem suite from tasks/ into the database (idempotent) and ensure the cpu hardware exists."

    def handle(self, *args, **options):
        counts = sync_problems()
        created_cpu = ensure_cpu_hardware()
        summary = ", ".join(f"{counts[k]} {k}" for k in ("created", "updated", "unchanged", "deactivated"))
        self.stdout.write(f"problems: {summary}; cpu hardware {'created' if created_cpu else 'present'}")
