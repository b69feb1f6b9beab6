import contextlib
import os
import signal
import subprocess
import sys
import time

from django.core.management.base import BaseCommand

from core.backoff import backoff_s
from core.processes import celery_worker_argv

# A worker that ran this long before it died was working: its next restart starts the backoff
# over. One that dies sooner is crash-looping and waits longer each time, up to the cap.
STABLE_AFTER_S = 60.0
RESTART_BASE_S = 1.0
RESTART_CAP_S = 30.0


def _raise_keyboard_interrupt(signum, frame):
    raise KeyboardInterrupt


def _signal_group(process: subprocess.Popen, signum: int) -> None:
    """The web server and the worker each run in their own session, with children (the
    autoreloader's server; beat, -B): signal them all, so a child that died leaves no orphan
    behind (a second beat would run a second schedule)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signum)


class Command(BaseCommand):
    help = (
        "Run the development web server and a Celery worker together (embedded default: no "
        "broker server needed); the worker also runs beat (-B), whose sweep dispatches again "
        "the units of failed batches. A worker that exits is restarted with backoff while the "
        "web server stays up. Ctrl-C stops both."
    )

    def add_arguments(self, parser):
        parser.add_argument("addrport", nargs="?", default="127.0.0.1:8000")
        parser.add_argument(
            "--concurrency",
            type=int,
            help="worker threads (batches at once; default: the settings' "
            "CELERY_WORKER_CONCURRENCY, twice EVAL_MAX_CALLS_IN_FLIGHT / EVAL_BATCH_SIZE)",
        )

    def handle(self, *args, addrport, concurrency, **options):
        self.worker_command = [
            *celery_worker_argv(),
            "--pool=threads",
            *([f"--concurrency={concurrency}"] if concurrency else []),
            "--loglevel=INFO",
            "--beat",  # the periodic sweep (CELERY_BEAT_SCHEDULE): one worker, one beat
            f"--hostname=devserver-{addrport.replace(':', '-')}@%h",
        ]
        # Its own session, like the worker: Ctrl-C reaches only this command, which then stops
        # the web server's whole group (the autoreloader and the server it runs) with one
        # SIGTERM. Left in our group, the web server got the terminal's SIGINT and our SIGTERM
        # at once, and once in CI it was still running 30 s later and had to be killed.
        web = subprocess.Popen(
            [sys.executable, "manage.py", "runserver", addrport], start_new_session=True
        )
        worker: subprocess.Popen | None = self._start_worker()
        worker_started = time.monotonic()
        restarts = 0  # consecutive quick deaths: the backoff attempt
        restart_at = 0.0
        # A closed terminal or a `kill` must stop the children too, not orphan the worker.
        for signum in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, _raise_keyboard_interrupt)
        # And Ctrl-C always: a process started in the background of a script inherits SIGINT
        # ignored (POSIX shells ignore it for asynchronous commands), and Python then installs
        # no handler, so the devserver and everything it started would ignore Ctrl-C. The web
        # server's group and the worker's get SIGTERM from the finally below.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        self.stdout.write(f"Web on http://{addrport}/ and a Celery worker; Ctrl-C stops both.")
        try:
            # The web server is what the user is looking at: while it runs, so does this loop.
            while web.poll() is None:
                now = time.monotonic()
                if worker is not None and worker.poll() is not None:
                    _signal_group(worker, signal.SIGKILL)
                    restarts = 1 if now - worker_started >= STABLE_AFTER_S else restarts + 1
                    delay = RESTART_BASE_S / 2 + backoff_s(
                        restarts, base_s=RESTART_BASE_S, cap_s=RESTART_CAP_S
                    )
                    self.stderr.write(
                        f"The Celery worker exited with code {worker.returncode}; the web "
                        f"server stays up. Restarting the worker in {delay:.1f} s "
                        f"(restart {restarts} in a row)."
                    )
                    worker, restart_at = None, now + delay
                if worker is None and now >= restart_at:
                    worker, worker_started = self._start_worker(), now
                    self.stdout.write("Celery worker restarted.")
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass
        finally:
            if web.poll() is None:
                _signal_group(web, signal.SIGTERM)
            if worker is not None and worker.poll() is None:
                _signal_group(worker, signal.SIGTERM)  # a warm shutdown, exit status 0
            children = {"web server": web, **({"worker": worker} if worker else {})}
            self._wait(children, timeout=30, kill=True)
            _signal_group(web, signal.SIGKILL)  # the autoreloader's server, if it outlived it
            if worker is not None:
                _signal_group(worker, signal.SIGKILL)  # beat, if it outlived its worker
        clean_exits = (0, -signal.SIGTERM, -signal.SIGINT)
        failed = [
            f"{name} (exit {child.returncode})"
            for name, child in children.items()
            if child.returncode not in clean_exits
        ]
        if failed:
            self.stderr.write(f"Stopped: {', '.join(map(str, failed))} exited with an error.")

    def _start_worker(self) -> subprocess.Popen:
        # Its own session: Ctrl-C reaches only this command and the web server, and the worker
        # gets a SIGTERM from us instead (a warm shutdown, exit status 0).
        return subprocess.Popen(self.worker_command, start_new_session=True)

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
