import signal
import subprocess
import sys
import time

from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = (
        "Run the development web server and a Celery worker together (embedded default: no "
        "broker server needed). Ctrl-C stops both."
    )

    def add_arguments(self, parser):
        parser.add_argument("addrport", nargs="?", default="127.0.0.1:8000")
        parser.add_argument("--concurrency", type=int, default=4, help="worker threads")

    def handle(self, *args, addrport, concurrency, **options):
        python = sys.executable
        children = {
            "web server": subprocess.Popen([python, "manage.py", "runserver", addrport]),
            "worker": subprocess.Popen(
                [
                    python,
                    "-m",
                    "celery",
                    "-A",
                    "proactweb",
                    "worker",
                    "--pool=threads",
                    f"--concurrency={concurrency}",
                    "--loglevel=INFO",
                ]
            ),
        }
        self.stdout.write(f"Web on http://{addrport}/ and a Celery worker; Ctrl-C stops both.")
        try:
            while all(child.poll() is None for child in children.values()):
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass
        finally:
            for child in children.values():
                if child.poll() is None:
                    child.send_signal(signal.SIGTERM)
            for child in children.values():
                try:
                    child.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    child.kill()
        clean_exits = (0, -signal.SIGTERM, -signal.SIGINT)
        failed = [name for name, child in children.items() if child.returncode not in clean_exits]
        if failed:
            self.stderr.write(f"Stopped: {', '.join(map(str, failed))} exited with an error.")
