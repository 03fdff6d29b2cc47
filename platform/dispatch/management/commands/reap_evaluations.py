from django.core.management.base import BaseCommand

from dispatch.reaper import reap


class Command(BaseCommand):
    help = "Requeue or fail evaluations whose worker was lost, and publish ones that never were (once)."

    def handle(self, *args, **options):
        counts = reap()
        self.stdout.write(", ".join(f"{n} {what}" for what, n in sorted(counts.items())) or "nothing to do")
