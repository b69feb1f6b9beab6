"""The fault campaign's harness: an evaluation run on real Celery workers against fake vendor
servers that inject faults, while the harness kills workers, kills Redis connections, pauses and
restarts Redis and terminates the database's backends; then it resumes until the run is finished
(or, with ``resume=False``, leaves that to the tasks' retries and the beat's sweep) and checks
the outcome.

Used at full scale by ``bench/fault_campaign.py`` and in a reduced form by
``tests/benchmark/evaluation/test_fault_campaign.py``. What is checked (``verify``), precisely:

- every unit is done, or errored with a reason (``lost`` counts the others);
- no unit has two results: two judgments by one judge (``duplicates``), or one call paid for
  twice within the run (``paid_twice``: two successful call records with one cache key);
- no repeated call: a request the server received *after* it had completed (written in full,
  HTTP 200) the identical request (same model, messages and parameters). Such a repeat whose
  earlier response has no call record is the one window no client can close — the response
  left the server, but the process died (or its database connection dropped and stayed down)
  before the row recording it committed — and is counted apart (``window_repeats``); every
  other repeat is a bug (``repeated_calls``);
- the run's cost is the sum of its calls (the run's progress figure against the call records,
  and each call's cost against its tokens × the model's price), and every paid response has a
  call record: ``unrecorded_paid`` (paid, not on the bill: the same window) and
  ``recorded_unpaid`` (on the bill, never served: always a bug).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import time
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

from core.processes import celery_worker_argv

ROOT = Path(__file__).resolve().parent.parent

LogRow = dict  # one row of the fake server's /_fake/log


def log_rows(server) -> list[LogRow]:
    """An in-process FakeVendorServer's log, in the shape of its /_fake/log rows."""
    return [
        {
            "seq": e.seq,
            "request_hash": e.request_hash,
            "status": e.status,
            "outcome": e.outcome,
            "fault": e.fault,
            "received_s": e.received_s,
            "completed_s": e.completed_s,
        }
        for e in server.requests()
    ]


def log_rows_from_url(base_url: str) -> list[LogRow]:
    with urllib.request.urlopen(f"{base_url}/_fake/log", timeout=60) as response:
        return json.load(response)


# --- Workers ----------------------------------------------------------------------------------


class Workers:
    """Celery worker processes (thread pool) on one queue; ``kill_one`` is ``kill -9``."""

    def __init__(
        self, *, count: int, threads: int, queue: str, env: dict[str, str], beat: bool = False
    ) -> None:
        """``beat``: the first worker started also runs Celery beat (``-B``), whose sweep
        dispatches again the units of failed batches; the workers' tasks go to ``queue``."""
        self.count, self.threads, self.queue, self.beat = count, threads, queue, beat
        self.env = {**env, "CELERY_TASK_DEFAULT_QUEUE": queue}
        self.live: list[subprocess.Popen] = []
        self.dead: list[subprocess.Popen] = []
        self.started = 0

    def start(self) -> Workers:
        while len(self.live) < self.count:
            self.live.append(self._spawn())
        return self

    def _spawn(self) -> subprocess.Popen:
        self.started += 1
        return subprocess.Popen(
            [
                *celery_worker_argv(),
                "--pool=threads",
                f"--concurrency={self.threads}",
                "-Q",
                self.queue,
                "-n",
                f"{self.queue}-{self.started}-{uuid.uuid4().hex[:4]}@%h",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "--loglevel=ERROR",
                *(["--beat"] if self._beat_here() else []),
            ],
            cwd=ROOT,
            env=self.env,
            stdout=subprocess.DEVNULL,  # the banner; errors go to stderr
            # A group of its own: an embedded beat is a child process, which a SIGKILL of the
            # worker alone would leave running (and sweeping) after the test.
            start_new_session=True,
        )

    def _beat_here(self) -> bool:
        """One beat at a time: in the first worker, and in a replacement of a killed beat."""
        return self.beat and not any(w.args[-1] == "--beat" for w in self.live)

    def kill_one(self) -> str:
        """SIGKILL the oldest live worker (mid-batch: nothing is flushed), start another."""
        victim = self.live.pop(0)
        os.killpg(victim.pid, signal.SIGKILL)  # the worker and its beat, if it has one
        victim.wait(timeout=30)
        self.dead.append(victim)
        self.live.append(self._spawn())
        return f"killed worker pid {victim.pid} with SIGKILL; started a replacement"

    def pids(self) -> list[int]:
        return [w.pid for w in self.live]

    def stop(self) -> None:
        for worker in self.live:
            if worker.poll() is None:
                worker.send_signal(signal.SIGTERM)
        for worker in self.live:
            try:
                worker.wait(timeout=30)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait(timeout=10)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(worker.pid, signal.SIGKILL)  # anything of its group still running


def terminate_backends(settings_dict: dict) -> str:
    """``pg_terminate_backend`` for every session on this one database (never another), from a
    connection to the maintenance database. The caller's own connection is among them."""
    import psycopg

    conninfo = psycopg.conninfo.make_conninfo(
        dbname="postgres",
        user=settings_dict["USER"] or None,
        password=settings_dict["PASSWORD"] or None,
        host=settings_dict["HOST"] or "127.0.0.1",
        port=str(settings_dict["PORT"] or 5432),
    )
    with psycopg.connect(conninfo, autocommit=True) as admin:
        (count,) = admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = %s AND pid <> pg_backend_pid()",
            (settings_dict["NAME"],),
        ).fetchone()
    return f"terminated {count} PostgreSQL backend(s) of {settings_dict['NAME']}"


def kill_redis_connections(redis_url: str, names: tuple[str, ...]) -> str:
    """``CLIENT KILL ID`` for each connection to this URL's database number that bears one of
    ``names`` (``CLIENT SETNAME``), mid-batch: never a connection of another database, so
    other users of a shared Redis server are untouched."""
    import redis

    admin = redis.Redis.from_url(redis_url)
    db = admin.connection_pool.connection_kwargs.get("db", 0)
    victims = [
        c["id"] for c in admin.client_list() if int(c["db"]) == db and c.get("name") in names
    ]
    for client_id in victims:
        admin.client_kill_filter(_id=client_id)
    admin.close()
    return f"killed {len(victims)} Redis connection(s) named {', '.join(names)} (db {db})"


def pause_redis(redis_url: str, seconds: float) -> str:
    """Redis stops answering for ``seconds`` — every client of the server, so keep it short on
    a shared one. ``DEBUG SLEEP`` where the server allows it (``enable-debug-command``), else
    ``CLIENT PAUSE … ALL``, which holds every client's commands the same way."""
    import redis

    admin = redis.Redis.from_url(redis_url, socket_timeout=seconds + 10)
    try:
        admin.execute_command("DEBUG", "SLEEP", seconds)
        how = "DEBUG SLEEP"
    except redis.ResponseError:
        admin.execute_command("CLIENT", "PAUSE", int(seconds * 1000), "ALL")
        time.sleep(seconds)
        how = "CLIENT PAUSE ALL"
    finally:
        admin.close()
    return f"paused Redis for {seconds:g}s ({how})"


# --- Driving the run --------------------------------------------------------------------------


@dataclass
class Fault:
    at: float
    """Fire once this share of the units is finished (done or error)."""
    name: str
    action: Callable[[], str]


@dataclass
class DriveLog:
    events: list[tuple[float, str]] = field(default_factory=list)
    resumes: int = 0
    wall_s: float = 0.0


def drive(
    run_id: int,
    faults: list[Fault],
    *,
    stall_s: float,
    timeout_s: float,
    resume: bool = True,
    say: Callable[[str], None] = lambda text: None,
) -> DriveLog:
    """Watch the run, firing each fault when its share of units is finished; whenever nothing
    finishes for ``stall_s`` (queued messages lost with a worker, units handed back by a batch
    that failed) resume the run, until it is done. Raises TimeoutError after ``timeout_s``.

    ``resume=False`` never resumes: the run must finish on its own, by the workers' retries and
    the beat's sweep (``runs.runs_sweep``), as it does in production."""
    from django.db import connection
    from django.db.models import Count

    from benchmark.evaluation import runs
    from benchmark.models import EvaluationRun, EvaluationUnit, RunStatus, UnitState

    log, started = DriveLog(), time.monotonic()
    pending_faults = sorted(faults, key=lambda f: f.at)
    last_finished, last_change = -1, time.monotonic()

    def note(text: str) -> None:
        log.events.append((time.monotonic() - started, text))
        say(f"[{time.monotonic() - started:6.1f}s] {text}")

    while True:
        try:
            states = dict(
                EvaluationUnit.objects.filter(run_id=run_id)
                .values_list("state")
                .annotate(n=Count("id"))
            )
            status = EvaluationRun.objects.values_list("status", flat=True).get(pk=run_id)
        except Exception as exc:  # our own connection was among those terminated
            connection.close()
            note(f"controller reconnects after: {type(exc).__name__}")
            continue
        total = sum(states.values()) or 1
        finished = states.get(UnitState.DONE, 0) + states.get(UnitState.ERROR, 0)
        now = time.monotonic()
        if status == RunStatus.DONE and finished == total:
            break
        if finished != last_finished:
            last_finished, last_change = finished, now
        while pending_faults and finished / total >= pending_faults[0].at:
            fault = pending_faults.pop(0)
            note(f"{fault.name} at {finished}/{total} finished: {fault.action()}")
            connection.close()
            last_change = time.monotonic()
        if resume and now - last_change > stall_s and not pending_faults:
            enqueued = runs.run_resume(run_id=run_id)
            log.resumes += 1
            note(f"no unit finished for {stall_s:.0f}s: resumed, {enqueued} unit(s) re-enqueued")
            last_change = now
        if now - started > timeout_s:
            raise TimeoutError(f"run {run_id} not finished after {timeout_s:.0f}s: {states}")
        time.sleep(0.25)
    log.wall_s = time.monotonic() - started
    note("run done")
    return log


# --- Checking the outcome ---------------------------------------------------------------------


@dataclass
class Report:
    units: int = 0
    done: int = 0
    errored: int = 0
    errored_without_reason: int = 0
    lost: int = 0
    duplicates: int = 0
    paid_twice: int = 0
    repeated_calls: int = 0
    window_repeats: int = 0
    unrecorded_paid: int = 0
    recorded_unpaid: int = 0
    calls: int = 0
    failed_calls: int = 0
    server_requests: int = 0
    cost_usd: Decimal = Decimal(0)
    calls_cost_usd: Decimal = Decimal(0)
    priced_cost_usd: Decimal = Decimal(0)
    judge_errors: int = 0
    claimed_again: int = 0
    error_reasons: Counter = field(default_factory=Counter)
    server_faults: Counter = field(default_factory=Counter)

    @property
    def cost_ok(self) -> bool:
        return self.cost_usd == self.calls_cost_usd == self.priced_cost_usd

    @property
    def ok(self) -> bool:
        return (
            self.done + self.errored == self.units
            and not (self.errored_without_reason or self.lost or self.duplicates)
            and not (self.paid_twice or self.repeated_calls or self.recorded_unpaid)
            and self.cost_ok
        )

    def result_line(self, **extra) -> str:
        fields = {
            "units": self.units,
            "done": self.done,
            "errored": self.errored,
            "lost": self.lost,
            "duplicates": self.duplicates,
            "repeated_calls": self.repeated_calls,
            "window_repeats": self.window_repeats,
            "paid_twice": self.paid_twice,
            "unrecorded_paid": self.unrecorded_paid,
            "recorded_unpaid": self.recorded_unpaid,
            "calls": self.calls,
            "cost_usd": f"{self.cost_usd:.6f}",
            "cost_is_sum_of_calls": self.cost_ok,
            **extra,
        }
        return "RESULT " + " ".join(f"{k}={v}" for k, v in fields.items())

    def table(self) -> list[tuple[str, object]]:
        return [
            ("units", self.units),
            ("done", self.done),
            ("errored (each with its reason)", self.errored),
            ("errored without a reason", self.errored_without_reason),
            ("lost (neither done nor errored)", self.lost),
            ("judgments in judge_error", self.judge_errors),
            ("units claimed more than once", self.claimed_again),
            ("two results for one unit and judge", self.duplicates),
            ("one call paid twice in the run", self.paid_twice),
            ("server requests", self.server_requests),
            ("faults injected by the servers", dict(self.server_faults)),
            ("paid calls recorded", self.calls),
            ("failed calls recorded", self.failed_calls),
            ("repeated calls (a bug)", self.repeated_calls),
            ("repeats in the inherent window", self.window_repeats),
            ("paid, not recorded (the window)", self.unrecorded_paid),
            ("recorded, never served", self.recorded_unpaid),
            ("run cost (progress)", f"${self.cost_usd:.6f}"),
            ("sum of its calls", f"${self.calls_cost_usd:.6f}"),
            ("tokens x prices", f"${self.priced_cost_usd:.6f}"),
            ("error reasons", dict(self.error_reasons.most_common(6))),
        ]


def _reason(error: str) -> str:
    first = error.strip().splitlines()[0] if error.strip() else ""
    return re.sub(r"\d+(\.\d+)?", "N", first)[:90]


def verify(run_id: int, servers: list[tuple[list[LogRow], set[int]]]) -> Report:
    """Check a finished run against the logs of the servers it called; ``servers`` pairs each
    server's log with the ids of the endpoints that point at it."""
    from django.db.models import Count

    from benchmark.evaluation.runs import run_progress
    from benchmark.models import (
        EvaluationRun,
        EvaluationUnit,
        Judgment,
        ModelPrice,
        ProviderCall,
        UnitState,
    )

    run = EvaluationRun.objects.get(pk=run_id)
    report = Report()
    units = EvaluationUnit.objects.filter(run=run)
    states = Counter(units.values_list("state", flat=True))
    report.units = sum(states.values())
    report.done, report.errored = states[UnitState.DONE], states[UnitState.ERROR]
    report.lost = report.units - report.done - report.errored
    report.claimed_again = units.filter(attempts__gt=1).count()
    errors = list(units.filter(state=UnitState.ERROR).values_list("error", flat=True))
    report.errored_without_reason = sum(not e.strip() for e in errors)
    report.error_reasons = Counter(_reason(e) for e in errors)
    judgments = Judgment.objects.filter(unit__run=run)
    report.duplicates = (
        judgments.values("unit", "judge_name").annotate(n=Count("id")).filter(n__gt=1).count()
    )
    report.judge_errors = judgments.filter(state="judge_error").count()
    calls = ProviderCall.objects.filter(run=run)
    paid = calls.filter(ok=True)
    report.calls, report.failed_calls = paid.count(), calls.filter(ok=False).count()
    report.paid_twice = paid.values("cache_key").annotate(n=Count("id")).filter(n__gt=1).count()
    report.cost_usd = run_progress(run=run).cost_usd
    report.calls_cost_usd = sum((c.cost_usd for c in calls), Decimal(0))
    prices = {p.model_name: p for p in ModelPrice.objects.all()}
    report.priced_cost_usd = sum(
        (
            prices[model].cost(input_tokens=i, output_tokens=o, reasoning_tokens=r)
            for model, i, o, r in paid.values_list(
                "endpoint__model_name", "input_tokens", "output_tokens", "reasoning_tokens"
            )
            if model in prices
        ),
        Decimal(0),
    ).quantize(Decimal("0.000001"))

    for rows, endpoint_ids in servers:
        report.server_requests += len(rows)
        report.server_faults.update(r["fault"] for r in rows if r["fault"])
        recorded = set(
            paid.filter(endpoint_id__in=endpoint_ids).values_list("request_id", flat=True)
        )
        served = [r for r in rows if r["status"] == 200 and r["outcome"] == "completed"]
        served_ids = {f"req_{r['seq']}" for r in served}
        report.unrecorded_paid += len(served_ids - recorded)
        report.recorded_unpaid += len(recorded - served_ids)
        first: dict[str, LogRow] = {}
        for row in served:
            earlier = first.get(row["request_hash"])
            if earlier is None or row["completed_s"] < earlier["completed_s"]:
                first[row["request_hash"]] = row
        for row in rows:
            done = first.get(row["request_hash"])
            if done is None or row["received_s"] <= done["completed_s"]:
                continue
            if f"req_{done['seq']}" in recorded:
                report.repeated_calls += 1
            else:
                report.window_repeats += 1
    return report


def campaign_env(**overrides: str) -> dict[str, str]:
    env = {**os.environ, "LOG_LEVEL": "ERROR"}
    env.update(overrides)
    return env
