"""A real Celery worker, on the configured broker: Redis when REDIS_URL is set (CI), else the
embedded filesystem transport. Proves the two halves of `make run` talk to each other."""

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

pytestmark = pytest.mark.slow


@pytest.fixture
def worker_queue():
    queue = f"test-{uuid.uuid4().hex[:8]}"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "proactweb",
            "worker",
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


def test_devserver_starts_web_and_worker_and_ctrl_c_stops_both():
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "manage.py", "devserver", f"127.0.0.1:{port}", "--concurrency", "1"],
        cwd=settings.BASE_DIR,
        start_new_session=True,
        env={**os.environ, "DEBUG": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    # Read the output as it comes: a pipe nobody reads fills up and blocks the writers (the web
    # server and the worker log to it), and a failure below shows what they said.
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(process.stdout), daemon=True)
    reader.start()

    def output() -> str:
        return "".join(lines)

    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as r:
                    assert r.status == 200
                    break
            except OSError:
                assert time.monotonic() < deadline, "web server did not come up:\n" + output()
                assert process.poll() is None, output()
                time.sleep(0.5)
        # The worker half: it answers a ping on the default queue.
        from proactweb.celery import app

        deadline = time.monotonic() + 60
        while not app.control.ping(timeout=1.0):
            assert time.monotonic() < deadline, "worker did not answer:\n" + output()
        # ...and runs beat, whose sweep re-dispatches the units of failed batches.
        while "beat: Starting" not in output():
            assert time.monotonic() < deadline, "the worker runs no beat:\n" + output()
            time.sleep(0.2)
        os.killpg(process.pid, signal.SIGINT)  # what Ctrl-C sends to the foreground group
        process.wait(timeout=40)
        reader.join(timeout=10)
        assert process.returncode == 0, output()
        assert "exited with an error" not in output(), output()
        time.sleep(0.5)
        with pytest.raises(ProcessLookupError):
            os.killpg(process.pid, 0)  # nothing of the web server's group is left running
        assert not _processes_matching(f"devserver-127.0.0.1-{port}@")  # nor the worker
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)


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
