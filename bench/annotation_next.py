"""Annotation load benchmark: N simulated annotators doing Next + Submit at once on one pairwise
study, against gunicorn and PostgreSQL on this machine, for a fixed time.

Each simulated annotator holds a real session and works like the browser does: POST Next
(htmx), read the item token and idempotency key from the returned partial, wait a moment
(thinking), POST the answer (which returns the next item), wait again. Every request is timed
from the client.

Targets (issue #4): p95 ≤ 50 ms per request, zero errors, zero over-assignment (no item ever
holds more than k answers and running leases), and no answer lost (every submit the client saw
succeed is in the database).

    python bench/annotation_next.py                          # 50 annotators, 60 s
    python bench/annotation_next.py --annotators 10 --duration 15   # a quick look

It uses a scratch PostgreSQL database of its own, dropped and created afresh each time
(--database-url; default proactbench_bench_annotation). Ends with a RESULT line.
"""

import argparse
import asyncio
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _workers import (  # noqa: E402
    children_rss_mb,
    cpu_seconds_of,
    free_port,
    recreate_database,
    start_gunicorn,
)
from machine import speed_probe  # noqa: E402

TOKEN = re.compile(r'data-item="([^"]*)"')
KEY = re.compile(r'name="idempotency_key" value="([^"]+)"')


def _cpu_snapshot(server_pid: int, database: str) -> dict[str, float]:
    """CPU seconds so far: the web workers, the database's server processes for the bench
    database, and this process (the simulated annotators)."""
    return {
        "web": cpu_seconds_of(lambda pid, ppid, cmd: ppid == server_pid),
        "database": cpu_seconds_of(lambda pid, ppid, cmd: f" {database} " in f"{cmd} "),
        "client": time.process_time(),
    }


def _prepare(args) -> tuple[int, list[str], int]:
    """The corpus, a finished run with vanilla + rubric-injected replies at every RECOVERY
    trigger, annotators with sessions, and one pairwise study. Returns (study id, session
    keys, items)."""
    import django

    django.setup()
    from importlib import import_module

    from corpus_import import generate_corpus
    from django.conf import settings
    from django.conf import settings as django_settings
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
    from django.contrib.auth.models import Group, User

    from annotation.services.studies import StudySpec, study_create
    from benchmark.corpus.importer import corpus_import
    from benchmark.models import (
        Condition,
        Dialogue,
        EvaluationRun,
        EvaluationUnit,
        ModelEndpoint,
        RunSource,
        RunStatus,
        Trigger,
        TriggerType,
        UnitState,
    )
    from core.roles import ANNOTATOR

    SessionStore = import_module(django_settings.SESSION_ENGINE).SessionStore  # noqa: N806

    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus.jsonl"
        generate_corpus(corpus)
        with corpus.open("rb") as stream:
            corpus_import(stream=stream)
    models = [
        ModelEndpoint.objects.create(
            name=f"bench-model-{i:02d}",
            display_name=f"Bench model {i}",
            provider="replay",
            model_name=f"bench-model-{i:02d}",
        )
        for i in range(args.models)
    ]
    run = EvaluationRun.objects.create(
        name="annotation benchmark run",
        source=RunSource.IMPORTED,
        status=RunStatus.DONE,
        conditions=[Condition.VANILLA, Condition.RUBRIC_INJECTED],
    )
    run.dialogues.set(Dialogue.objects.all())
    run.endpoints.set(models)
    EvaluationUnit.objects.bulk_create(
        EvaluationUnit(
            run=run,
            trigger=trigger,
            endpoint=model,
            condition=condition,
            state=UnitState.DONE,
            reply=f"A {condition} reply of about this length, with a concrete next step: "
            f"pack the stand last so it comes out first (trigger {trigger.pk}). " * 4,
        )
        for trigger in Trigger.objects.filter(type=TriggerType.RECOVERY)
        for model in models
        for condition in Condition.values
    )
    group = Group.objects.get(name=ANNOTATOR)
    users = []
    for i in range(args.annotators):
        user = User.objects.create(username=f"bench-annotator-{i:03d}")
        user.set_unusable_password()
        user.save()
        user.groups.add(group)
        users.append(user)
    study = study_create(
        spec=StudySpec(
            kind="pairwise",
            name="Benchmark: which reply is better?",
            annotators=users,
            overlap=args.k,
            run=run,
            trigger_type=TriggerType.RECOVERY,
            seed=1,
        )
    )
    sessions = []
    for user in users:
        session = SessionStore()
        session[SESSION_KEY] = str(user.pk)
        session[BACKEND_SESSION_KEY] = settings.AUTHENTICATION_BACKENDS[-1]
        session[HASH_SESSION_KEY] = user.get_session_auth_hash()
        session.create()
        sessions.append(session.session_key)
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")  # fresh tables: give the planner real row counts
    return study.pk, sessions, study.items.count()


class Think:
    """An annotator's pauses: uniform in mean × [1 - jitter, 1 + jitter], seeded per annotator,
    and (with jitter) a first request at a random moment of the first pause. With jitter 0
    every annotator starts at once and pauses exactly ``mean``: they then move in lockstep,
    all 50 requests arriving within a few milliseconds of each other, which no group of
    people does."""

    def __init__(self, mean_s: float, jitter: float, seed: int):
        self.mean_s, self.jitter = mean_s, jitter
        self.rng = random.Random(seed)
        self.start = self.rng.uniform(0, mean_s) if jitter else 0.0

    def __call__(self) -> float:
        return self.mean_s * self.rng.uniform(1 - self.jitter, 1 + self.jitter)


class Tally:
    def __init__(self):
        self.latency: dict[str, list[float]] = defaultdict(list)
        self.errors: list[str] = []
        self.submitted = 0


async def _annotator(base, study_id, session_key, deadline, think, tally, warmup_until):
    """One simulated annotator; ``think()`` gives each pause (seconds)."""
    import aiohttp

    jar = aiohttp.CookieJar(unsafe=True)
    jar.update_cookies({"sessionid": session_key})
    timeout = aiohttp.ClientTimeout(total=30)
    # Idle connections are dropped after 1 s, before gunicorn's keep-alive (2 s) closes them:
    # otherwise a request sent on a connection the server is closing at that instant is reset
    # (47 "connection reset" errors in the first 100-annotator soak, pauses up to 3 s), and a
    # browser, unlike this client, would retry it.
    connector = aiohttp.TCPConnector(keepalive_timeout=1.0)
    async with aiohttp.ClientSession(
        base_url=base, cookie_jar=jar, timeout=timeout, connector=connector
    ) as http:
        await asyncio.sleep(think.start)
        async with http.get(f"/annotate/{study_id}/") as response:
            await response.read()
            if response.status != 200:
                tally.errors.append(f"workspace {response.status}")
                return
        csrf = next(c.value for c in jar if c.key == "csrftoken")
        headers = {"HX-Request": "true", "X-CSRFToken": csrf}

        async def post(kind, path, data=None):
            started = time.perf_counter()
            try:
                async with http.post(path, data=data or {}, headers=headers) as response:
                    body = await response.text()
                    status = response.status
            except Exception as exc:  # counted, never fatal: the run goes on
                tally.errors.append(f"{kind}: {exc!r}")
                return None
            elapsed = (time.perf_counter() - started) * 1000
            if time.monotonic() >= warmup_until:
                tally.latency[kind].append(elapsed)
            if status != 200:
                tally.errors.append(f"{kind} {status}")
                return None
            return body

        while time.monotonic() < deadline:
            body = await post("next", f"/annotate/{study_id}/next")
            if body is None:
                await asyncio.sleep(think())
                continue
            token = TOKEN.search(body).group(1)
            if not token:
                return  # nothing left for this annotator
            pause = think()
            await asyncio.sleep(pause)
            data = {
                "idempotency_key": KEY.search(body).group(1),
                "choice": "1",
                "confidence": "3",
                "elapsed_ms": str(int(pause * 1000)),
            }
            if await post("answer", f"/annotate/{study_id}/items/{token}/answer", data):
                tally.submitted += 1
            await asyncio.sleep(think())


def _check_database(study_id: int) -> dict:
    from django.db import connection
    from django.db.models import Count, Q
    from django.utils import timezone

    from annotation.models import Answer, Assignment, AssignmentState, StudyItem

    connection.close()
    now = timezone.now()
    holding = dict(
        Assignment.objects.filter(item__study_id=study_id)
        .filter(
            Q(state=AssignmentState.DONE)
            | Q(state=AssignmentState.LEASED, lease_expires_at__gt=now)
        )
        .values_list("item_id")
        .annotate(n=Count("id"))
        .values_list("item_id", "n")
    )
    required = dict(
        StudyItem.objects.filter(study_id=study_id).values_list("id", "required_answers")
    )
    live = Answer.objects.filter(assignment__item__study_id=study_id, retracted_at__isnull=True)
    return {
        "over_assigned": sum(n > required[item] for item, n in holding.items()),
        "answers": live.count(),
        "complete_items": sum(
            n >= required[i]
            for i, n in live.values_list("assignment__item_id")
            .annotate(n=Count("id"))
            .values_list("assignment__item_id", "n")
        ),
    }


def _pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--annotators", type=int, default=50)
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of load")
    parser.add_argument("--warmup", type=float, default=3.0, help="seconds not measured")
    parser.add_argument("--think-ms", type=float, default=1000.0, help="mean pause between actions")
    parser.add_argument(
        "--think-jitter",
        type=float,
        default=0.5,
        help="pauses uniform in mean × [1-j, 1+j], starts spread over one pause; 0 = lockstep",
    )
    parser.add_argument("--k", type=int, default=3, help="annotators per item")
    parser.add_argument("--models", type=int, default=16, help="pairs per RECOVERY trigger")
    parser.add_argument(
        "--workers", type=int, default=3, help="gunicorn worker processes (3: as compose)"
    )
    parser.add_argument("--threads", type=int, default=1, help="threads per worker")
    parser.add_argument(
        "--database-url",
        default="postgres://postgres@127.0.0.1:5432/proactbench_bench_annotation",
    )
    args = parser.parse_args()

    recreate_database(args.database_url)
    env = {
        **os.environ,
        "DATABASE_URL": args.database_url,
        "DJANGO_SETTINGS_MODULE": "proactweb.settings",
        "DEBUG": "0",
        "SECRET_KEY": "annotation-benchmark-only-" + "x" * 40,
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "SESSION_COOKIE_SECURE": "0",
        "CSRF_COOKIE_SECURE": "0",
        "LOG_LEVEL": "WARNING",
        # Connections live through the run (as in production), so the database processes
        # measured at the start are the ones still working at the end.
        "DB_CONN_MAX_AGE": "600",
    }
    env.pop("REDIS_URL", None)
    os.environ.update(env)
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    study_id, sessions, items = _prepare(args)
    with open("/proc/loadavg") as loadavg:
        load_before = " ".join(loadavg.read().split()[:3])
    probe = speed_probe()
    port = free_port()
    server = start_gunicorn(args, env, port)
    tally = Tally()
    try:
        started = time.monotonic()
        warmup_until = started + args.warmup
        deadline = warmup_until + args.duration

        async def everyone():
            await asyncio.gather(
                *(
                    _annotator(
                        f"http://127.0.0.1:{port}",
                        study_id,
                        key,
                        deadline,
                        Think(args.think_ms / 1000, args.think_jitter, seed=i),
                        tally,
                        warmup_until,
                    )
                    for i, key in enumerate(sessions)
                )
            )

        database = args.database_url.rsplit("/", 1)[1]
        cpu_before: dict[str, float] = {}
        rss_samples: list[tuple[float, dict[int, float]]] = []

        async def measured():
            await asyncio.sleep(args.warmup)
            cpu_before.update(_cpu_snapshot(server.pid, database))
            # Web workers' memory: once warm, then every tenth of the run, and at the end.
            step = args.duration / 10
            for n in range(11):
                rss_samples.append((n * step, children_rss_mb(server.pid)))
                if n < 10:
                    await asyncio.sleep(step)

        async def run_all():
            await asyncio.gather(everyone(), measured())

        asyncio.run(run_all())
        wall = time.monotonic() - started
        cpu_after = _cpu_snapshot(server.pid, database)
        cpu = {k: cpu_after[k] - cpu_before.get(k, 0.0) for k in cpu_after}
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
    checks = _check_database(study_id)
    lost = tally.submitted - checks["answers"]
    all_latency = [v for values in tally.latency.values() for v in values]
    measured = min(wall - args.warmup, args.duration)
    answers_per_s = len(tally.latency["answer"]) / measured if measured > 0 else 0.0

    print(f"machine load average (1, 5, 15 min) at the start: {load_before}")
    print(
        f"machine speed probe (bench/machine.py) at the start: {probe['hot_ms']:.1f} ms busy, "
        f"{probe['idle_ms']:.1f} ms after 0.5 s idle"
    )
    print(
        f"{args.annotators} annotators, {args.duration:.0f} s (+{args.warmup:.0f} s warm-up), "
        f"think {args.think_ms:.0f} ms ± {args.think_jitter:.0%}, k={args.k}, {items} items, "
        f"gunicorn {args.workers}×{args.threads} gthread, PostgreSQL"
    )
    print(f"{'request':<8} {'n':>7} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    for kind in ("next", "answer"):
        values = tally.latency[kind]
        print(
            f"{kind:<8} {len(values):>7} {_pct(values, 50):>8.1f} {_pct(values, 95):>8.1f} "
            f"{_pct(values, 99):>8.1f} {max(values, default=0):>8.1f}"
        )
    print(
        f"{'all':<8} {len(all_latency):>7} {_pct(all_latency, 50):>8.1f} "
        f"{_pct(all_latency, 95):>8.1f} {_pct(all_latency, 99):>8.1f} "
        f"{max(all_latency, default=0):>8.1f}"
    )
    cpu_per_request = cpu["web"] * 1000 / len(all_latency) if all_latency else 0.0
    print(
        f"CPU over the measured {measured:.0f} s: web workers {cpu['web']:.1f} s "
        f"({cpu_per_request:.1f} ms per request), PostgreSQL {cpu['database']:.1f} s, "
        f"simulated annotators {cpu['client']:.1f} s; {os.cpu_count()} cores"
    )
    print(
        f"answers stored {checks['answers']} (client saw {tally.submitted} succeed), "
        f"items complete {checks['complete_items']} of {items}, errors {len(tally.errors)}"
    )
    for error in tally.errors[:5]:
        print("  error:", error)
    pids = sorted(rss_samples[0][1]) if rss_samples else []
    if pids:
        print("web worker RSS, MB (one column a worker):")
        for at, sample in rss_samples:
            print(f"  {at:6.0f} s  " + " ".join(f"{sample.get(pid, 0):6.1f}" for pid in pids))
    rss_start = sum(rss_samples[0][1].values()) / len(pids) if pids else 0.0
    rss_end = sum(rss_samples[-1][1].get(pid, 0) for pid in pids) / len(pids) if pids else 0.0
    growth = max(
        (rss_samples[-1][1].get(pid, 0) - rss_samples[0][1][pid] for pid in pids), default=0.0
    )
    print(
        f"RESULT p50_ms={_pct(all_latency, 50):.1f} p95_ms={_pct(all_latency, 95):.1f} "
        f"p99_ms={_pct(all_latency, 99):.1f} answers_per_s={answers_per_s:.1f} "
        f"errors={len(tally.errors)} over_assigned={checks['over_assigned']} lost={lost} "
        f"annotators={args.annotators} think_ms={args.think_ms:.0f} "
        f"think_jitter={args.think_jitter:g} "
        f"web_cpu_ms_per_request={cpu_per_request:.1f} pg_cpu_ms_per_request="
        f"{cpu['database'] * 1000 / max(len(all_latency), 1):.1f} "
        f"web_rss_start_mb={rss_start:.1f} web_rss_end_mb={rss_end:.1f} "
        f"web_rss_max_growth_mb={growth:.1f} load_before={load_before.split()[0]} "
        f"probe_hot_ms={probe['hot_ms']:.1f} probe_idle_ms={probe['idle_ms']:.1f}"
    )


if __name__ == "__main__":
    main()
