"""A real Celery worker, on the configured broker: Redis when REDIS_URL is set (CI), else the
embedded filesystem transport. Proves the two halves of `make run` talk to each other."""

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid

import pytest
from django.conf import settings
from django.db import connection

from benchmark.tasks import worker_health
from core.processes import celery_worker_argv

pytestmark = pytest.mark.slow


@pytest.fixture
def worker_queue():
    queue = f"test-{uuid.uuid4().hex[:8]}"
    process = subprocess.Popen(
        [
            *celery_worker_argv(),
            "--pool=solo",
            "-Q",
            queue,
            "-n",
            f"{queue}@%h",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            "--loglevel=WARNING",
        ],
        cwd=settings.BASE_DIR,
    )
    yield queue
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()


def test_worker_runs_a_task_through_the_configured_broker(worker_queue):
    result = worker_health.apply_async(queue=worker_queue)
    assert result.get(timeout=60) == {"ok": True, "database": connection.vendor}


def _processes_matching(text: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                    if text.encode() in cmdline.read():
                        found.append(int(entry))
            except OSError:
                continue
    return found


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class _Devserver:
    """`manage.py devserver` on a free port, its output read as it comes: a pipe nobody reads
    fills up and blocks the writers (the web server and the worker log to it), and a failure
    shows what they said."""

    def __init__(self, *, sigint_ignored: bool = False):
        self.port = _free_port()
        self.process = subprocess.Popen(
            [
                sys.executable,
                "manage.py",
                "devserver",
                "--skip-checks",  # as `make run` starts it: the web server runs the checks
                f"127.0.0.1:{self.port}",
                "--concurrency",
                "1",
            ],
            cwd=settings.BASE_DIR,
            start_new_session=True,
            # As a script's background job starts it: SIGINT ignored, inherited.
            preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
            if sigint_ignored
            else None,
            env={**os.environ, "DEBUG": "1"},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[str] = []
        self.reader = threading.Thread(
            target=lambda: self.lines.extend(self.process.stdout), daemon=True
        )
        self.reader.start()

    def output(self) -> str:
        return "".join(self.lines)

    def healthz(self) -> int:
        url = f"http://127.0.0.1:{self.port}/healthz"
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status

    def wait_for_web(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                assert self.healthz() == 200
                return
            except OSError:
                assert time.monotonic() < deadline, "web server did not come up:\n" + self.output()
                assert self.process.poll() is None, self.output()
                time.sleep(0.5)

    def web_pids(self) -> list[int]:
        """The autoreloader and the server it runs (`runserver 127.0.0.1:PORT`)."""
        return _processes_matching(f"runserver\x00127.0.0.1:{self.port}\x00")

    def worker_pids(self) -> list[int]:
        return _processes_matching(f"devserver-127.0.0.1-{self.port}@")

    def wait_for_worker(self, timeout: float = 60) -> None:
        from proactweb.celery import app

        deadline = time.monotonic() + timeout
        name = f"devserver-127.0.0.1-{self.port}@"
        while not any(name in host for reply in app.control.ping(timeout=1.0) for host in reply):
            assert time.monotonic() < deadline, "worker did not answer:\n" + self.output()

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        # The web server and the worker run in their own sessions: a failed test must not
        # leave them running (an orphaned runserver polls for file changes for ever).
        for pid in self.web_pids() + self.worker_pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("sigint_ignored", [False, True], ids=["terminal", "background-job"])
def test_devserver_starts_web_and_worker_and_ctrl_c_stops_both(sigint_ignored):
    server = _Devserver(sigint_ignored=sigint_ignored)
    output = server.output
    try:
        server.wait_for_web()
        server.wait_for_worker()  # the worker half: it answers a ping
        # ...and runs beat, whose sweep re-dispatches the units of failed batches.
        deadline = time.monotonic() + 60
        while "beat: Starting" not in output():
            assert time.monotonic() < deadline, "the worker runs no beat:\n" + output()
            time.sleep(0.2)
        assert len(server.web_pids()) == 2  # the autoreloader and its server
        process = server.process
        os.killpg(process.pid, signal.SIGINT)  # what Ctrl-C sends to the foreground group
        # The devserver gives its children 30 s to stop (a warm shutdown waits for a running
        # task, such as a beat sweep) before it kills them; on a loaded CI machine the whole
        # stop once took more than 40 s, so allow the 30 s and a margin, and say what the web
        # server and the worker printed if even that is not enough.
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pytest.fail("Ctrl-C did not stop the devserver within 60 s:\n" + output())
        server.reader.join(timeout=10)
        assert process.returncode == 0, output()
        assert "exited with an error" not in output(), output()
        time.sleep(0.5)
        with pytest.raises(ProcessLookupError):
            os.killpg(process.pid, 0)  # nothing of the devserver's group is left running
        assert not server.web_pids()  # nor of the web server's
        assert not server.worker_pids()  # nor the worker
    finally:
        server.stop()


def test_devserver_restarts_a_worker_that_died_and_keeps_the_web_server_up():
    """The incident: the embedded worker exited, and the devserver took the web server down
    with it. Now the web server keeps answering, the devserver says what happened, and a new
    worker (with its beat) takes over."""
    server = _Devserver()
    output = server.output
    try:
        server.wait_for_web()
        server.wait_for_worker()
        (worker_pid,) = {os.getpgid(pid) for pid in server.worker_pids()}
        os.killpg(worker_pid, signal.SIGKILL)  # the worker and its beat, as a crash would
        deadline = time.monotonic() + 30
        while "The Celery worker exited with code -9; the web server stays up" not in output():
            assert time.monotonic() < deadline, "no word of the dead worker:\n" + output()
            time.sleep(0.2)
        assert server.process.poll() is None, output()
        assert server.healthz() == 200
        server.wait_for_worker()  # the restarted worker answers
        assert "Celery worker restarted." in output()
        assert {os.getpgid(pid) for pid in server.worker_pids()} - {worker_pid}
    finally:
        server.stop()


def test_a_worker_loads_its_tasks_without_the_statistics_stack():
    """Workers skip Django's start-up checks (proactweb/celery.py), which would import the
    URLconf and with it NumPy/SciPy/statsmodels: ~220 MB per worker process for nothing."""
    probe = (
        "import sys, django; django.setup()\n"
        "from celery.fixups.django import DjangoWorkerFixup\n"
        "from proactweb.celery import app\n"
        "DjangoWorkerFixup(app).validate_models()\n"  # what a worker does at start-up
        "app.loader.import_default_modules()\n"
        "import benchmark.tasks\n"
        "print(sorted(m for m in ('numpy', 'scipy', 'statsmodels') if m in sys.modules))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "CELERY_SKIP_CHECKS"}
    out = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=settings.BASE_DIR,
        env={**env, "DJANGO_SETTINGS_MODULE": "proactweb.settings"},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert out.stdout.strip().splitlines()[-1] == "[]"
