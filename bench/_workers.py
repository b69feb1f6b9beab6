"""Starting and watching the processes a benchmark needs: scratch databases, the fake vendor
server, Celery workers, gunicorn, and the CPU and memory of what they run.

One place for it, so that every benchmark starts a worker (or reads a process's CPU time) the
same way. Everything here reads /proc: the benchmarks run on Linux.
"""

from __future__ import annotations

import os
import runpy
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for _path in (str(ROOT), str(ROOT / "bench")):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from core.processes import celery_worker_argv  # noqa: E402  (after the path is set)

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE_MB = os.sysconf("SC_PAGE_SIZE") / 2**20

# --- Environments ---------------------------------------------------------------------------


def worker_env(
    *,
    database_url: str,
    redis_url: str,
    in_flight: int,
    batch_size: int,
    log_level: str = "WARNING",
) -> dict[str, str]:
    """The environment of a pipeline benchmark — its own process (which launches the runs) and
    the Celery workers it starts: this process's, pointed at the benchmark's scratch database and
    Redis, with each worker's calls in flight and batch size as the benchmark sets them. The
    caller adds what it alone needs (an API key's variable, a shared ``SECRET_KEY``)."""
    return {
        **os.environ,
        "DATABASE_URL": database_url,
        "REDIS_URL": redis_url,
        "LOG_LEVEL": log_level,
        "EVAL_MAX_CALLS_IN_FLIGHT": str(in_flight),
        "EVAL_BATCH_SIZE": str(batch_size),
    }


def web_env(*, database_url: str, secret_key_prefix: str) -> dict[str, str]:
    """The environment of a web benchmark — gunicorn and the process that prepares its data:
    this process's with production's settings (``DEBUG`` off, a secret key of its own,
    connections kept through the run) served over plain HTTP on localhost, so without secure
    cookies, and without Redis (``REDIS_URL`` dropped, as these benchmarks have always run:
    nothing they queue reaches the caller's Redis)."""
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "DJANGO_SETTINGS_MODULE": "proactweb.settings",
        "DEBUG": "0",
        "SECRET_KEY": secret_key_prefix + "x" * 40,
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "SESSION_COOKIE_SECURE": "0",
        "CSRF_COOKIE_SECURE": "0",
        "LOG_LEVEL": "WARNING",
        # Connections live through the run (as in production), so the database processes
        # measured at the start are the ones still working at the end. A day: 600 s had
        # them replaced inside a 600 s soak, whose PostgreSQL CPU then read 0.0 ms a request.
        "DB_CONN_MAX_AGE": "86400",
    }
    env.pop("REDIS_URL", None)
    return env


# --- Scratch databases ----------------------------------------------------------------------


def _admin_url(url: str) -> tuple[str, str]:
    """(the database's name, the URL of the server's ``postgres`` database)."""
    return url.rsplit("/", 1)[1], url.rsplit("/", 1)[0] + "/postgres"


def ensure_database(url: str) -> None:
    """Create the PostgreSQL database at ``url`` if it does not exist (its tables are kept)."""
    import psycopg

    name, admin_url = _admin_url(url)
    with psycopg.connect(admin_url, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{name}"')


def recreate_database(url: str) -> None:
    """Drop the PostgreSQL database at ``url`` (its connections too) and create it empty."""
    import psycopg

    name, admin_url = _admin_url(url)
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def migrate(env: Mapping[str, str]) -> None:
    """``manage.py migrate`` in a process of its own with ``env`` (the benchmark's database)."""
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=dict(env), check=True
    )


def setup_django(env: Mapping[str, str]) -> None:
    """Set ``env`` in this process, migrate the database it names, and set Django up here."""
    os.environ.update(env)
    migrate(env)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "proactweb.settings")
    import django

    django.setup()


def fresh_corpus(*, redis_url: str | None, endpoint_prefix: str = "bench-", copies: int = 1):
    """A clean slate for a pipeline benchmark, then the generated corpus imported (its
    summary returned): no runs, cached responses or claims left, no dialogues, and no endpoint
    named ``endpoint_prefix…``; ``redis_url``'s database is flushed (no leftover messages or
    limits). Django must be set up (``setup_django``)."""
    import tempfile

    import redis
    from corpus_import import generate_corpus

    from benchmark.corpus.importer import corpus_import
    from benchmark.models import (
        Blueprint,
        CallInFlight,
        Dialogue,
        EvaluationRun,
        ModelEndpoint,
        Persona,
        ResponseCacheEntry,
        Scenario,
    )

    if redis_url:
        redis.Redis.from_url(redis_url).flushdb()
    EvaluationRun.objects.all().delete()
    ResponseCacheEntry.objects.all().delete()
    CallInFlight.objects.all().delete()
    for model in (Dialogue, Blueprint, Scenario, Persona):
        model.objects.all().delete()
    ModelEndpoint.objects.filter(name__startswith=endpoint_prefix).delete()
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus.jsonl"
        generate_corpus(corpus, copies=copies)
        with corpus.open("rb") as stream:
            return corpus_import(stream=stream)


# --- Ports ----------------------------------------------------------------------------------


def free_port() -> int:
    """A TCP port nothing listens on now (the kernel's pick; free until someone binds it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, *, seconds: float = 30, host: str = "127.0.0.1") -> bool:
    """Whether something accepted a connection on ``port`` within ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.2)
    return False


# --- Servers and workers --------------------------------------------------------------------


def start_fake_server(latency_ms: float, *options: str) -> tuple[subprocess.Popen, str]:
    """The fake vendor server (tests/fakes/vendor_server.py, bench replies) in a process of its
    own, and its base URL; ``options``: more of its command-line options (rate limits, faults)."""
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.fakes.vendor_server",
            "--latency-ms",
            str(latency_ms),
            "--reply",
            "bench",
            *options,
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None
    line = server.stdout.readline()
    if "listening on" not in line:
        sys.exit(f"fake server did not start: {line!r}")
    return server, line.strip().rsplit(" ", 1)[1]


def start_worker(
    *,
    threads: int | None,
    queue: str,
    env: Mapping[str, str],
    name: str,
    loglevel: str = "WARNING",
    new_session: bool = False,
    banner: bool = True,
    extra: Sequence[str] = (),
) -> subprocess.Popen:
    """One Celery worker (thread pool) consuming ``queue``, named ``name`` (Celery's
    ``--hostname``, e.g. ``bench0@%h``). ``new_session``: a process group of its own, as on
    another machine (a signal to the benchmark's group does not reach it; ``stop`` ends the
    group). ``banner=False``: its start-up banner (stdout) is dropped; errors go to stderr.
    ``threads=None``: as many as the settings say (``CELERY_WORKER_CONCURRENCY``)."""
    return subprocess.Popen(
        [
            *celery_worker_argv(),
            "--pool=threads",
            *([] if threads is None else [f"--concurrency={threads}"]),
            "-Q",
            queue,
            "-n",
            name,
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            f"--loglevel={loglevel}",
            *extra,
        ],
        cwd=ROOT,
        env=dict(env),
        start_new_session=new_session,
        stdout=None if banner else subprocess.DEVNULL,
    )


def start_workers(
    n: int, threads: int | None, queue: str, env: Mapping[str, str]
) -> list[subprocess.Popen]:
    """``n`` Celery workers on this host, named ``bench0@%h`` …"""
    return [
        start_worker(threads=threads, queue=queue, env=env, name=f"bench{i}@%h") for i in range(n)
    ]


def wait_for_workers(app, n: int, *, seconds: float = 60) -> None:
    """Until ``n`` workers answer Celery's ping (on ``app``'s broker), or exit."""
    deadline = time.monotonic() + seconds
    while len(app.control.ping(timeout=1.0)) < n:
        if time.monotonic() > deadline:
            sys.exit("workers did not start")


def wait_for_run(run, *, poll_s: float = 0.25) -> None:
    """Until the evaluation run ``run`` is done, failed or cancelled (refreshed in place)."""
    while True:
        run.refresh_from_db()
        if run.status in ("done", "failed", "cancelled"):
            return
        time.sleep(poll_s)


def stop(processes: Sequence[subprocess.Popen], *, timeout: float = 60) -> None:
    """SIGTERM each process (its whole group if it leads one), then wait for each."""
    for process in processes:
        if process.poll() is not None:
            continue
        if os.getpgid(process.pid) == process.pid:
            os.killpg(process.pid, signal.SIGTERM)
        else:
            process.terminate()
    for process in processes:
        process.wait(timeout=timeout)


SITE_APP = "proactweb.wsgi:application"


def start_gunicorn(
    env: Mapping[str, str], port: int, workers: int | None = None, app: str = SITE_APP
) -> subprocess.Popen:
    """gunicorn as production runs it: the settings of ./gunicorn.conf.py (docker-compose.yml
    and the Dockerfile run plain ``gunicorn proactweb.wsgi:application`` with them), bound to
    ``port`` here; ``workers`` overrides the file's count. Exits if it does not listen within
    180 s (``--preload`` imports the app first: over 30 s on a machine loaded ×6). ``app``, a
    module of bench/ (``_floor_wsgi:application``), serves that instead of the site."""
    command = [sys.executable, "-m", "gunicorn", app]
    if app != SITE_APP:
        command += ["--pythonpath", str(ROOT / "bench")]
    command += ["--config", str(ROOT / "gunicorn.conf.py"), "--bind", f"127.0.0.1:{port}"]
    command += ["--log-level", "warning"]
    if workers is not None:
        command += ["--workers", str(workers)]
    server = subprocess.Popen(command, cwd=ROOT, env=dict(env))
    if wait_for_port(port, seconds=180):
        return server
    server.kill()
    sys.exit("gunicorn did not start")


def gunicorn_shape(workers: int | None = None) -> str:
    """How many workers of which class serve, as ./gunicorn.conf.py (and ``workers``) say."""
    config = runpy.run_path(str(ROOT / "gunicorn.conf.py"))
    return f"gunicorn {workers or config['workers']} {config['worker_class']} workers"


def stop_gunicorn(server: subprocess.Popen) -> None:
    """gunicorn stopped: gracefully (SIGTERM), else after 30 s at once (its workers, left
    without their master, stop by themselves)."""
    server.send_signal(signal.SIGTERM)
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


# --- CPU and memory -------------------------------------------------------------------------


def _stat_fields(pid: int) -> list[str]:
    """/proc/PID/stat after the command name (which may hold spaces): field 3 onwards."""
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process so far, its waited-for children included."""
    utime, stime, cutime, cstime = (int(x) for x in _stat_fields(pid)[11:15])
    return (utime + stime + cutime + cstime) / CLOCK_TICKS


def _status_mb(pid: int, field: str) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024
    return 0.0


def rss_mb(pid: int) -> float:
    """Resident memory of a process now."""
    return _status_mb(pid, "VmRSS")


def peak_rss_mb(pid: int) -> float:
    """The most resident memory a process has held."""
    return _status_mb(pid, "VmHWM")


def processes() -> Iterator[tuple[int, int, str, list[str]]]:
    """(pid, ppid, command line, /proc/PID/stat fields after the name) of every process."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = _stat_fields(int(entry))
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                command = cmdline.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue  # gone between the listing and the read
        yield int(entry), int(fields[1]), command, fields


def cpu_seconds_of(match: Callable[[int, int, str], bool]) -> float:
    """User + system CPU so far of the processes ``match(pid, ppid, cmdline)`` accepts."""
    return sum(
        (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
        for pid, ppid, command, fields in processes()
        if match(pid, ppid, command)
    )


def children_rss_mb(parent: int) -> dict[int, float]:
    """Resident memory (MB) of each child of ``parent`` (e.g. gunicorn's workers)."""
    return {
        pid: int(fields[21]) * PAGE_MB for pid, ppid, _, fields in processes() if ppid == parent
    }
