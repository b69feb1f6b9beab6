import signal
import subprocess
import sys
import time

from django.core.management.base import BaseCommand


def _raise_keyboard_interrupt(signum, frame):
    raise KeyboardInterrupt


class Command(BaseCommand):
    help = (
        "Run the development web server and a Celery worker together (embedded default: no "
        "broker server needed); the worker also runs beat (-B), whose sweep dispatches again "
        "the units of failed batches. Ctrl-C stops both."
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
                    "--beat",  # the periodic sweep (CELERY_BEAT_SCHEDULE): one worker, one beat
                    f"--hostname=devserver-{addrport.replace(':', '-')}@%h",
                ],
                # Its own session: Ctrl-C reaches only this command and the web server, and the
                # worker gets a SIGTERM from us instead (a warm shutdown, exit status 0).
                start_new_session=True,
            ),
        }
        # A closed terminal or a `kill` must stop the children too, not orphan the worker.
        for signum in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, _raise_keyboard_interrupt)
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
            self._wait(children, timeout=30, kill=True)
        clean_exits = (0, -signal.SIGTERM, -signal.SIGINT)
        failed = [
            f"{name} (exit {child.returncode})"
            for name, child in children.items()
            if child.returncode not in clean_exits
        ]
        if failed:
            self.stderr.write(f"Stopped: {', '.join(map(str, failed))} exited with an error.")

    @staticmethod
    def _wait(children: dict, *, timeout: float, kill: bool = False) -> None:
        deadline = time.monotonic() + timeout
        for child in children.values():
            try:
                child.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                if kill:
                    child.kill()
                    child.wait()
