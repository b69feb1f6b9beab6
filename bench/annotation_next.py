"""Annotation load benchmark: N simulated annotators doing Next + Submit at once on one pairwise
study, against gunicorn (as ./gunicorn.conf.py sets it up for compose and the image) and
PostgreSQL on this machine, for a fixed time.

Each simulated annotator holds a real session and works like the browser does
(tests/annotation/test_browser.py counts what the page sends): POST Next once (Start, htmx),
read the item token and idempotency key from the returned partial, wait (time on the item),
POST the answer — whose response is the next item, so no Next follows — and so on; Next again
only after an answer that handed out nothing, or a failed request. Every request is timed from
the client.

Targets (issue #4): p95 ≤ 50 ms per request, zero errors, zero over-assignment (no item ever
holds more than k answers and running leases), and no answer lost (every submit the client saw
succeed is in the database). Issue #20: p95 ≤ 50 ms at 200 annotators pausing 2 s ± 50 %, and
≥ 150 answers/s (20× Label Studio's 8.5) at 50 annotators in a closed loop (no pause).

    python bench/annotation_next.py                          # 50 annotators, 60 s
    python bench/annotation_next.py --annotators 10 --duration 15   # a quick look
    python bench/annotation_next.py --issue-20               # both of issue #20's loads
    python bench/annotation_next.py --floor --think-ms 0     # the floor under the same load

``--floor`` has the annotators post an answer's form to ``bench/_floor.py``'s floor instead of
answering: Django and the site's middleware over gunicorn, signed in, with no answer's work —
the part of the web's CPU per request that no change to the answer path can remove.

It uses a scratch PostgreSQL database of its own, dropped and created afresh for each load
(--database-url; default proactbench_bench_annotation), and Redis database 9 for the web's
shared renderings (--render-cache; its own keys deleted before each load). Ends with a RESULT
line.
"""

import argparse
import asyncio
import os
import random
import re
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
    SITE_APP,
    children_rss_mb,
    cpu_seconds_of,
    free_port,
    gunicorn_shape,
    processes,
    recreate_database,
    start_gunicorn,
    stop_gunicorn,
    web_env,
)
from machine import speed_probe  # noqa: E402

TOKEN = re.compile(r'data-item="([^"]*)"')
KEY = re.compile(r'name="idempotency_key" value="([^"]+)"')


def _cpu_snapshot(server_pid: int, database: str) -> dict[str, float]:
    """CPU seconds so far: the web workers, the database's server processes for the bench
    database, this machine's Redis (the render cache's; nothing else uses it during a load)
    and this process (the simulated annotators)."""
    return {
        "web": cpu_seconds_of(lambda pid, ppid, cmd: ppid == server_pid),
        "database": cpu_seconds_of(lambda pid, ppid, cmd: _serves(database, cmd)),
        "cache": cpu_seconds_of(lambda pid, ppid, cmd: cmd.startswith("redis-server")),
        "client": time.process_time(),
    }


def _serves(database: str, command: str) -> bool:
    """Whether a process's command line is a PostgreSQL server process of ``database``."""
    return f" {database} " in f"{command} "


def _database_processes(database: str) -> set[int]:
    """The database's server processes now: those whose CPU ``_cpu_snapshot`` adds up."""
    return {pid for pid, _, cmd, _ in processes() if _serves(database, cmd)}


def _render_cache_env(url: str) -> dict[str, str]:
    """The web's environment for the render cache (core/render_cache.py) at ``url`` ("none":
    without one), its entries from an earlier load deleted: every load renders afresh."""
    if url == "none":
        return {"RENDER_CACHE_URL": ""}
    import redis

    client = redis.Redis.from_url(url, socket_connect_timeout=2)
    try:
        for name in client.scan_iter("proactbench:*:md:*", count=1000):
            client.delete(name)
    except redis.RedisError as error:
        sys.exit(
            f"the render cache's Redis at {url} does not answer ({error}); "
            "start it, or pass --render-cache none"
        )
    return {"RENDER_CACHE_URL": url}


REPLIES = ("short", "long")


def reply_text(kind: str, trigger_id: int, model: int, condition: str) -> str:
    """A benchmark reply. ``short``: ~520 characters of plain prose, the same for every model
    at a trigger (one Markdown render serves all of that trigger's items). ``long``: ~4,800
    characters of Markdown (headings, numbered steps with bold and code, links, a table) that
    take as long to render as the median reply of the release's results sample (~7,200
    characters, ~3 ms here: denser Markdown, fewer characters), different for every model,
    condition and trigger, as a real study's replies are."""
    if kind == "short":
        return (
            f"A {condition} reply of about this length, with a concrete next step: "
            f"pack the stand last so it comes out first (trigger {trigger_id}). "
        ) * 4
    case = f"{trigger_id}-{model}-{condition}"
    parts = [
        f"## A plan for what comes next (case {case})\n\nBefore anything else, **keep a copy** "
        "of what you cannot replace: the steps below change settings that are hard to undo."
    ]
    for step in range(1, 6):
        checks = "\n".join(
            f"{i}. **Check** part {i} of step {step}: read `setting_{step}_{i}` and note its "
            f"value, then compare it with what you expect for case {case}."
            for i in range(1, 6)
        )
        parts.append(
            f"### Step {step}: pass {step} of 5\n\n{checks}\n\nWhy it matters here: this is the "
            f"step people *skip*, and the one [the checklist](https://example.org/steps/{step}) "
            "puts first."
        )
    rows = "\n".join(
        f"| check {i} | before step {i} | it catches problem {i} early |" for i in range(8)
    )
    parts.append(f"| check | when | why |\n| --- | --- | --- |\n{rows}")
    parts.append(
        "If any check fails, stop there and tell me what you saw: what comes next depends on it."
    )
    return "\n\n".join(parts)


def _prepare(args, annotators: int) -> tuple[int, list[str], int]:
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
            reply=reply_text(args.replies, trigger.pk, number, condition),
        )
        for trigger in Trigger.objects.filter(type=TriggerType.RECOVERY)
        for number, model in enumerate(models)
        for condition in Condition.values
    )
    group = Group.objects.get(name=ANNOTATOR)
    users = []
    for i in range(annotators):
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


# The floor's body: an answer's form fields, so that parsing it costs what parsing an answer does.
FLOOR_FORM = {"idempotency_key": "x" * 22, "choice": "1", "confidence": "3", "elapsed_ms": "2000"}


class Tally:
    def __init__(self):
        self.latency: dict[str, list[float]] = defaultdict(list)
        self.errors: list[str] = []
        self.submitted = 0
        # Annotators told before the deadline that nothing is left for them: the study was too
        # small for the load, so the last seconds measured a server with less and less to do.
        self.ran_out = 0


async def _annotator(
    base, study_id, session_key, deadline, think, tally, warmup_until, *, floor=False
):
    """One simulated annotator; ``think()`` gives each pause (seconds). With ``floor`` it
    posts the same form to the floor (``bench/_floor.py``) instead of answering, pausing as it
    would between answers."""
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

        if floor:
            while time.monotonic() < deadline:
                await asyncio.sleep(think())
                await post("floor", "/bench-floor", FLOOR_FORM)
            return

        # As the page does: Start (or Next) once, then each answer's response carries the
        # next item (static/js/workspace.js swaps it in; tests/annotation/test_browser.py
        # counts one request per answer), so Next is pressed again only when an answer handed
        # out nothing ("Try again") or a request failed.
        body = None
        while time.monotonic() < deadline:
            if body is None:
                body = await post("next", f"/annotate/{study_id}/next")
                if body is None:
                    await asyncio.sleep(think())
                    continue
            token = TOKEN.search(body).group(1)
            if not token:
                tally.ran_out += 1  # nothing left for this annotator
                return
            pause = think()
            await asyncio.sleep(pause)
            data = {
                "idempotency_key": KEY.search(body).group(1),
                "choice": "1",
                "confidence": "3",
                "elapsed_ms": str(int(pause * 1000)),
            }
            body = await post("answer", f"/annotate/{study_id}/items/{token}/answer", data)
            if body is not None:
                tally.submitted += 1
            if body is None or not TOKEN.search(body).group(1):
                body = None  # failed, or nothing handed out with it: a pause, then Next
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


# Label Studio on this machine under the same closed loop (50 annotators, no pause), as measured
# in an earlier session and quoted by issue #20 (not re-measured here: it is not installed);
# printed beside the closed-loop figures, as the issue asks.
LABEL_STUDIO = {"answers_per_s": 8.5, "next_p95_ms": 3900.0}


def _run(args, annotators: int, think_ms: float) -> dict:
    """One load on a fresh database: prints its table, returns its figures."""
    from django.conf import settings
    from django.db import connections

    if settings.configured:  # a previous load's connection: its database is dropped now
        connections.close_all()
    recreate_database(args.database_url)
    env = web_env(database_url=args.database_url, secret_key_prefix="annotation-benchmark-only-")
    env.update(_render_cache_env(args.render_cache))
    os.environ.update(env)
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    study_id, sessions, items = _prepare(args, annotators)
    with open("/proc/loadavg") as loadavg:
        load_before = " ".join(loadavg.read().split()[:3])
    probe = speed_probe()
    port = free_port()
    server = start_gunicorn(
        env, port, args.workers, app="_floor_wsgi:application" if args.floor else SITE_APP
    )
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
                        Think(think_ms / 1000, args.think_jitter, seed=i),
                        tally,
                        warmup_until,
                        floor=args.floor,
                    )
                    for i, key in enumerate(sessions)
                )
            )

        database = args.database_url.rsplit("/", 1)[1]
        cpu_before: dict[str, float] = {}
        backends_before: set[int] = set()
        rss_samples: list[tuple[float, dict[int, float]]] = []

        async def measured():
            await asyncio.sleep(args.warmup)
            cpu_before.update(_cpu_snapshot(server.pid, database))
            backends_before.update(_database_processes(database))
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
        # A server process that ended during the load took its CPU with it: the database's
        # figure would leave it out (connections replaced at DB_CONN_MAX_AGE did, once).
        backends_gone = len(backends_before - _database_processes(database))
        cpu = {k: cpu_after[k] - cpu_before.get(k, 0.0) for k in cpu_after}
    finally:
        stop_gunicorn(server)
    checks = _check_database(study_id)
    lost = tally.submitted - checks["answers"]
    all_latency = [v for values in tally.latency.values() for v in values]
    measured_s = min(wall - args.warmup, args.duration)
    answers_per_s = len(tally.latency["answer"]) / measured_s if measured_s > 0 else 0.0
    requests = max(len(all_latency), 1)
    web_ms, database_ms = cpu["web"] * 1000 / requests, cpu["database"] * 1000 / requests
    cache_ms = cpu["cache"] * 1000 / requests

    print(f"machine load average (1, 5, 15 min) at the start: {load_before}")
    print(
        f"machine speed probe (bench/machine.py) at the start: {probe['hot_ms']:.1f} ms busy, "
        f"{probe['idle_ms']:.1f} ms after 0.5 s idle"
    )
    print(
        f"{annotators} annotators, {args.duration:.0f} s (+{args.warmup:.0f} s warm-up), "
        f"think {think_ms:.0f} ms ± {args.think_jitter:.0%}"
        f"{' (closed loop)' if not think_ms else ''}, k={args.k}, {items} items "
        f"({args.replies} replies), "
        f"{gunicorn_shape(args.workers)} (gunicorn.conf.py), PostgreSQL, render cache "
        f"{'none' if args.render_cache == 'none' else 'Redis at ' + args.render_cache}"
    )
    print(f"{'request':<8} {'n':>7} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    for kind in ("next", "answer", "floor") if args.floor else ("next", "answer"):
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
    print(
        f"CPU over the measured {measured_s:.0f} s: web workers {cpu['web']:.1f} s "
        f"({web_ms:.1f} ms per request), PostgreSQL {cpu['database']:.1f} s "
        f"({database_ms:.1f} ms per request), Redis {cpu['cache']:.1f} s ({cache_ms:.2f} ms "
        f"per request), simulated annotators {cpu['client']:.1f} s; "
        f"{os.cpu_count()} cores"
    )
    print(
        f"answers stored {checks['answers']} (client saw {tally.submitted} succeed, "
        f"{answers_per_s:.1f} answers/s), items complete {checks['complete_items']} of {items}, "
        f"over-assigned items {checks['over_assigned']}, lost answers {lost}, "
        f"errors {len(tally.errors)}"
    )
    if args.floor:
        print(
            f"the floor (bench/_floor.py): {len(tally.latency['floor']) / measured_s:.1f} "
            "requests/s; no answers are given"
        )
    elif not think_ms:
        print(
            f"Label Studio on the same load (an earlier session, issue #20): "
            f"{LABEL_STUDIO['answers_per_s']} answers/s, next-task p95 "
            f"{LABEL_STUDIO['next_p95_ms'] / 1000:.1f} s; here {answers_per_s:.1f} answers/s "
            f"({answers_per_s / LABEL_STUDIO['answers_per_s']:.1f}×)"
        )
    for error in tally.errors[:5]:
        print("  error:", error)
    if tally.ran_out:
        print(
            f"WARNING: {tally.ran_out} of {annotators} annotators found nothing left before the "
            "end: the study was too small for this load, so these figures understate the "
            "server (raise --models)"
        )
    if backends_gone:
        print(
            f"WARNING: {backends_gone} of the database's server processes ended during the "
            "load, and their CPU with them: the PostgreSQL figure is too low"
        )
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
    return {
        "p50_ms": _pct(all_latency, 50),
        "p95_ms": _pct(all_latency, 95),
        "p99_ms": _pct(all_latency, 99),
        "next_p95_ms": _pct(tally.latency["next"], 95),
        "answer_p95_ms": _pct(tally.latency["answer"], 95),
        "answers_per_s": answers_per_s,
        "errors": len(tally.errors),
        "ran_out": tally.ran_out,
        "over_assigned": checks["over_assigned"],
        "lost": lost,
        "annotators": annotators,
        "think_ms": think_ms,
        "web_cpu_ms_per_request": web_ms,
        "pg_cpu_ms_per_request": database_ms,
        "redis_cpu_ms_per_request": cache_ms,
        "web_rss_start_mb": rss_start,
        "web_rss_end_mb": rss_end,
        "web_rss_max_growth_mb": growth,
        "load_before": float(load_before.split()[0]),
        "probe_hot_ms": probe["hot_ms"],
        "probe_idle_ms": probe["idle_ms"],
    }


def _fields(figures: dict, prefix: str = "") -> str:
    def shown(value) -> str:
        return f"{value:.1f}" if isinstance(value, float) else str(value)

    return " ".join(f"{prefix}{key}={shown(value)}" for key, value in figures.items())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--annotators", type=int, default=50)
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of load")
    parser.add_argument("--warmup", type=float, default=3.0, help="seconds not measured")
    parser.add_argument(
        "--think-ms", type=float, default=1000.0, help="mean time on an item (0: closed loop)"
    )
    parser.add_argument(
        "--think-jitter",
        type=float,
        default=0.5,
        help="pauses uniform in mean × [1-j, 1+j], starts spread over one pause; 0 = lockstep",
    )
    parser.add_argument(
        "--issue-20",
        action="store_true",
        help="issue #20's two loads, one after the other: 200 annotators thinking 2 s ± 50%% "
        "(RESULT keys paced_…) and 50 annotators in a closed loop (closed_…, beside Label "
        "Studio's); --annotators and --think-ms are then ignored",
    )
    parser.add_argument("--k", type=int, default=3, help="annotators per item")
    # 24 pairs a trigger: 4,584 items, 13,752 answers at k = 3 — room for the closed loop's
    # ~160 answers/s over 63 s (with 16, 9,168 answers, that load emptied the study).
    parser.add_argument("--models", type=int, default=24, help="pairs per RECOVERY trigger")
    parser.add_argument(
        "--replies",
        choices=REPLIES,
        default="short",
        help="short: ~520 plain characters, one text per trigger (the figures so far); long: "
        "Markdown as costly to render as a real reply, each reply its own (reply_text)",
    )
    parser.add_argument(
        "--workers", type=int, default=None, help="gunicorn workers (default: gunicorn.conf.py's)"
    )
    parser.add_argument(
        "--render-cache",
        default="redis://127.0.0.1:6379/9",
        help="the web's shared cache of rendered texts (RENDER_CACHE_URL; compose shares "
        "REDIS_URL's), emptied before each load; none: each web worker renders on its own, as "
        "before stop 33",
    )
    parser.add_argument(
        "--floor",
        action="store_true",
        help="the annotators post an answer's form to the floor (bench/_floor.py: signed in, "
        "through the site's middleware, answered with a one-line template) instead of "
        "answering: what any request costs the web over HTTP under the same load",
    )
    parser.add_argument(
        "--database-url",
        default="postgres://postgres@127.0.0.1:5432/proactbench_bench_annotation",
    )
    args = parser.parse_args()
    label_studio = {f"label_studio_{key}": value for key, value in LABEL_STUDIO.items()}
    if args.issue_20:
        paced = _run(args, 200, 2000.0)
        print()
        closed = _run(args, 50, 0.0)
        print(
            f"RESULT {_fields(paced, 'paced_')} {_fields(closed, 'closed_')} "
            f"{_fields(label_studio)} closed_vs_label_studio="
            f"{closed['answers_per_s'] / LABEL_STUDIO['answers_per_s']:.1f} replies={args.replies}"
            f" render_cache={args.render_cache != 'none'} floor={args.floor}"
        )
        return
    figures = _run(args, args.annotators, args.think_ms)
    extra = f" {_fields(label_studio)}" if not args.think_ms else ""
    print(
        f"RESULT {_fields(figures)}{extra} think_jitter={args.think_jitter:g}"
        f" replies={args.replies} render_cache={args.render_cache != 'none'} floor={args.floor}"
    )


if __name__ == "__main__":
    main()
