from django.core.management import call_command
from django.core.management.base import BaseCommand

from dispatch import embedded


class Command(BaseCommand):
    help = (
        "Run the whole platform on this machine with no services: migrate, sync problems and hardware, "
        "create an admin account if none, then start the web server, a web-side worker and an evaluation "
        "worker until Ctrl-C. bin/serve runs this."
    )

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)

    def handle(self, *args, host: str, port: int, **options):
        call_command("migrate", interactive=False, verbosity=0)
        call_command("sync_problems", stdout=self.stdout)
        gpus = embedded.detect_gpus()
        hw = embedded.local_hardware(gpus)
        embedded.ensure_hardware(hw)
        where = f"{len(gpus)} GPU(s): {gpus[0]}" if gpus else "no GPU"
        self.stdout.write(f"evaluating on hardware {hw.slug!r} in {hw.mode} mode ({where})")
        password = embedded.ensure_admin()
        if password:
            self.stdout.write(f"created the admin account: user admin, password {password} (shown once)")
        supervisor = embedded.Supervisor(
            embedded.commands(hw, host, port), embedded.child_environment(hw), embedded.REPO / "var" / "log"
        )
        supervisor.start()
        self.stdout.write(f"serving http://{host}:{port}/ (logs in var/log/; Ctrl-C stops everything)")
        self.stdout.flush()
        code = supervisor.wait()
        self.stdout.write("stopped")
        raise SystemExit(code)
