"""Pipeline benchmark at the source's full scale: 624 triggers × 16 models, one condition, one
judge (~20,000 calls) through real Celery workers on Redis and PostgreSQL, against a local fake
OpenAI server that answers every call after a fixed latency (200 ms).

Headline: wall time against the ideal (calls × latency / concurrency) as an efficiency ratio
(target ≥ 0.90 at concurrency 64), worker CPU milliseconds per call (target ≤ 3) and the
workers' peak memory. Also: database rows read through indexes per call (it must not grow with
the run: compare --models 4 with 16), each worker's resident memory at the start, middle and end,
and leases that lapsed while their units were still running (--lease-s also sweeps the run as
beat would and counts what it re-dispatched).

    python bench/pipeline.py                       # full scale
    python bench/pipeline.py --models 2 --latency-ms 50   # a quick look
    python bench/pipeline.py --rejudge 2           # then 2 new judges on every reply, measured
    python bench/pipeline.py --workers 1 --in-flight 64   # one process at the SDK's limit
    python bench/pipeline.py --workers 2 --in-flight 128 --latency-ms 2000 --lease-s 4

With ``--rejudge N`` the run is made first as above (not measured), then re-judged by N new
judges (``runs.run_rejudge``: 624 × 16 × N judge calls, no reply); the figures are the
re-judge's.

It uses a scratch PostgreSQL database (created if missing; its benchmark tables are emptied)
and a Redis database of its own: --database-url / --redis-url. Ends with a RESULT line.
"""

import argparse
import json
import signal
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _workers import (  # noqa: E402  (after the path is set)
    cpu_seconds,
    ensure_database,
    fresh_corpus,
    peak_rss_mb,
    rss_mb,
    setup_django,
    start_fake_server,
    start_workers,
    wait_for_workers,
    worker_env,
)

RSS_EVERY_S = 2.0
LAPSED_EVERY_S = 5.0


def _index_reads(connection) -> tuple[int, int, int]:
    """Rows this database has read through indexes (fetched from the table), and by sequential
    scans, and rows written, summed over its tables. A backend reports its counts when it
    goes idle, at most once a second: read this after the workers have stopped."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_force_next_flush()")
        cursor.execute(
            "SELECT coalesce(sum(idx_tup_fetch), 0), coalesce(sum(seq_tup_read), 0), "
            "coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0) FROM pg_stat_user_tables"
        )
        fetched, scanned, written = cursor.fetchone()
    return int(fetched), int(scanned), int(written)


def _wait_for_run(run, workers: list[subprocess.Popen], *, sweep_every_s: float | None) -> dict:
    """Poll until the run ends. Meanwhile sample each worker's resident memory, and count the
    units whose lease lapsed while they were still running (claimed longer ago than the run's
    lease) — with ``sweep_every_s``, sweep as beat would and count what it re-dispatched."""
    from datetime import timedelta

    from django.utils import timezone

    from benchmark.evaluation import runs
    from benchmark.models import EvaluationUnit, UnitState

    rss: list[tuple[float, list[float]]] = []
    lapsed = redispatched = 0
    started = time.monotonic()
    next_rss = next_lapsed = started
    next_sweep = started + (sweep_every_s or 0)
    while True:
        run.refresh_from_db()
        if run.status in ("done", "failed", "cancelled"):
            break
        now = time.monotonic()
        if now >= next_rss:
            rss.append((now - started, [rss_mb(w.pid) for w in workers]))
            next_rss += RSS_EVERY_S
        if now >= next_lapsed:
            cutoff = timezone.now() - timedelta(seconds=run.lease_seconds)
            running = EvaluationUnit.objects.filter(run=run, state=UnitState.RUNNING)
            lapsed = max(lapsed, running.filter(claimed_at__lt=cutoff).count())
            next_lapsed += LAPSED_EVERY_S
        if sweep_every_s and now >= next_sweep:
            redispatched += runs.runs_sweep().redispatched
            next_sweep += sweep_every_s
        time.sleep(0.25)
    rss.append((time.monotonic() - started, [rss_mb(w.pid) for w in workers]))
    return {"rss": rss, "lapsed": lapsed, "redispatched": redispatched}


def _start_profilers(directory: str | None, workers: list[subprocess.Popen]) -> list:
    if not directory:
        return []
    Path(directory).mkdir(parents=True, exist_ok=True)
    return [
        subprocess.Popen(
            [
                str(Path(sys.executable).with_name("py-spy")),
                "record",
                "--pid",
                str(worker.pid),
                "--rate",
                "250",
                "--format",
                "raw",
                "--nonblocking",
                "--output",
                str(Path(directory) / f"worker-{i}.txt"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for i, worker in enumerate(workers)
    ]


def _stop_profilers(profilers: list[subprocess.Popen]) -> None:
    for profiler in profilers:
        profiler.send_signal(signal.SIGINT)
    for profiler in profilers:
        profiler.wait(timeout=120)


def _print_profile(directory: Path, top: int = 25) -> None:
    """Self and inclusive samples per function over every worker's threads. py-spy leaves out
    idle threads by default, so the samples are where the CPU went."""
    own: Counter = Counter()
    inclusive: Counter = Counter()
    total = 0
    for path in sorted(directory.glob("worker-*.txt")):
        for line in path.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            if not stack:
                continue
            n = int(count)
            frames = stack.split(";")
            total += n
            own[frames[-1]] += n
            for frame in set(frames):
                inclusive[frame] += n
    print(f"profile: {total} samples in {directory}")
    for title, counter in (("self", own), ("inclusive", inclusive)):
        print(f"top {top} by {title} samples")
        for frame, n in counter.most_common(top):
            print(f"  {100 * n / total:5.1f} %  {frame[:150]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=int, default=16)
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument("--workers", type=int, default=2, help="worker processes")
    parser.add_argument(
        "--threads",
        type=int,
        help="Celery threads (batches at once) per worker; default: the settings' "
        "CELERY_WORKER_CONCURRENCY, derived from --in-flight and --batch-size",
    )
    parser.add_argument(
        "--in-flight",
        type=int,
        default=32,
        help="calls in flight per worker (EVAL_MAX_CALLS_IN_FLIGHT); "
        "concurrency = workers x in-flight",
    )
    parser.add_argument("--batch-size", type=int, default=32, help="units per task")
    parser.add_argument(
        "--database-url", default="postgres://postgres@127.0.0.1:5432/proactbench_bench"
    )
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/14")
    parser.add_argument(
        "--rejudge",
        type=int,
        default=0,
        metavar="N",
        help="measure a re-judge of the finished run by N new judges instead of the run",
    )
    parser.add_argument(
        "--lease-s",
        type=int,
        metavar="S",
        help="give the run a lease of S seconds (default: the run's own, 900) and sweep it every "
        "S/2 seconds as beat would (runs.runs_sweep): a unit re-dispatched while its batch still "
        "runs it would be a lease lapsing in flight",
    )
    parser.add_argument(
        "--profile",
        metavar="DIR",
        help="sample the workers with py-spy (pip install py-spy) during the measured part and "
        "write DIR/worker-N.txt (collapsed stacks) and print the top functions",
    )
    args = parser.parse_args()
    concurrency = args.workers * args.in_flight
    queue = "bench-pipeline"

    ensure_database(args.database_url)
    env = worker_env(
        database_url=args.database_url,
        redis_url=args.redis_url,
        in_flight=args.in_flight,
        batch_size=args.batch_size,
    )
    setup_django(env)
    from django.conf import settings
    from django.db import connection
    from django.db.models import Avg, Max

    import benchmark.tasks  # noqa: F401  (imported already in a worker that launches a run)
    from benchmark.evaluation import runs
    from benchmark.models import (
        AuditVia,
        Dialogue,
        EvaluationRun,
        EvaluationUnit,
        ModelEndpoint,
        ProviderCall,
    )
    from proactweb.celery import app as celery_app

    # A clean slate: no cache hits, no leftover messages.
    summary = fresh_corpus(redis_url=args.redis_url)

    server, base_url = start_fake_server(args.latency_ms)
    workers = start_workers(args.workers, args.threads, queue, env)
    try:
        endpoints = [
            ModelEndpoint.objects.create(
                name=f"bench-model-{i:02d}",
                display_name=f"Bench model {i}",
                provider="openai-compatible",
                model_name=f"bench-model-{i:02d}",
                base_url=f"{base_url}/v1",
                default_params={"max_tokens": 512},
            )
            for i in range(args.models)
        ]
        judge = ModelEndpoint.objects.create(
            name="bench-judge",
            display_name="Bench judge",
            provider="openai-compatible",
            model_name="bench-judge",
            base_url=f"{base_url}/v1",
        )
        run = runs.run_create(
            name="pipeline benchmark",
            endpoints=endpoints,
            judges=[judge],
            dialogues=Dialogue.objects.all(),
        )
        if args.lease_s:
            EvaluationRun.objects.filter(pk=run.pk).update(lease_seconds=args.lease_s)
        sweep_every_s = args.lease_s / 2 if args.lease_s else None
        celery_app.conf.task_default_queue = queue
        wait_for_workers(celery_app, args.workers)
        cpu_before = sum(cpu_seconds(w.pid) for w in workers)
        server_cpu_before = cpu_seconds(server.pid)
        profilers = [] if args.rejudge else _start_profilers(args.profile, workers)
        reads_before = _index_reads(connection)
        started = time.perf_counter()
        runs.run_launch(run_id=run.pk)
        enqueued_s = time.perf_counter() - started
        seen = _wait_for_run(run, workers, sweep_every_s=None if args.rejudge else sweep_every_s)
        calls_before = 0
        if args.rejudge:
            new_judges = [
                ModelEndpoint.objects.create(
                    name=f"bench-judge-new-{i}",
                    display_name=f"Bench new judge {i}",
                    provider="openai-compatible",
                    model_name=f"bench-judge-new-{i}",
                    base_url=f"{base_url}/v1",
                )
                for i in range(args.rejudge)
            ]
            calls_before = ProviderCall.objects.filter(run=run, ok=True).count()
            cpu_before = sum(cpu_seconds(w.pid) for w in workers)
            server_cpu_before = cpu_seconds(server.pid)
            profilers = _start_profilers(args.profile, workers)
            reads_before = _index_reads(connection)
            started = time.perf_counter()
            runs.run_rejudge(
                run_id=run.pk, judges=new_judges, via=AuditVia.COMMAND, actor_name="bench"
            )
            enqueued_s = time.perf_counter() - started
            seen = _wait_for_run(run, workers, sweep_every_s=sweep_every_s)
        wall = time.perf_counter() - started
        _stop_profilers(profilers)
        cpu = sum(cpu_seconds(w.pid) for w in workers) - cpu_before
        server_cpu = cpu_seconds(server.pid) - server_cpu_before
        latency = ProviderCall.objects.filter(run=run, ok=True).aggregate(
            mean=Avg("latency_s"), worst=Max("latency_s")
        )
        peak = max(peak_rss_mb(w.pid) for w in workers)
        calls = ProviderCall.objects.filter(run=run, ok=True).count() - calls_before
        reply_calls = ProviderCall.objects.filter(run=run, ok=True, purpose="reply").count()
        failed_calls = ProviderCall.objects.filter(run=run, ok=False).count()
        # Units claimed more than once: a batch lost them (its lease lapsed, or it failed).
        reclaimed = EvaluationUnit.objects.filter(run=run, attempts__gt=1).count()
        progress = runs.run_progress(run=run)
        with urllib.request.urlopen(f"{base_url}/_fake/stats", timeout=10) as response:
            served = json.load(response)
    finally:
        for worker in workers:
            worker.terminate()
        for worker in workers:
            worker.wait(timeout=60)
        server.terminate()
        server.wait(timeout=30)
    # The workers' backends reported their counts as they closed; the queries just above
    # (latency, counts, progress) are the bench's own and are counted too, but are a few
    # indexed aggregates over the run (about one row per call), as are the sweeps of --lease-s.
    time.sleep(1.0)
    fetched, scanned, written = (
        after - before for after, before in zip(_index_reads(connection), reads_before, strict=True)
    )

    if args.profile:
        _print_profile(Path(args.profile))
    threads = args.threads or settings.CELERY_WORKER_CONCURRENCY
    ideal = calls * args.latency_ms / 1000 / concurrency
    efficiency = ideal / wall if wall else 0.0
    cpu_ms = 1000 * cpu / calls if calls else 0.0
    rows = [
        ("triggers", summary.triggers),
        ("models", args.models),
        ("units", progress.total),
        ("units by state", dict(progress.by_state)),
        ("measured", f"re-judge by {args.rejudge} new judges" if args.rejudge else "the run"),
        ("calls (paid)", calls),
        ("reply calls (run)", reply_calls),
        ("failed calls", failed_calls),
        ("server requests", served),
        (
            "concurrency",
            f"{args.workers} workers x {args.in_flight} calls in flight = {concurrency}",
        ),
        ("batches", f"{args.batch_size} units per task, {threads} tasks at once per worker"),
        ("latency per call", f"{args.latency_ms:.0f} ms"),
        ("enqueue", f"{enqueued_s:.1f} s"),
        ("wall", f"{wall:.1f} s"),
        ("ideal", f"{ideal:.1f} s"),
        ("efficiency", f"{efficiency:.3f}"),
        ("worker CPU", f"{cpu:.1f} s"),
        ("CPU per call", f"{cpu_ms:.2f} ms"),
        ("fake server CPU", f"{server_cpu:.1f} s (shares the 2 cores)"),
        (
            "call latency seen",
            f"mean {latency['mean'] * 1000:.1f} ms, max {latency['worst'] * 1000:.0f} ms",
        ),
        ("peak worker RSS", f"{peak:.0f} MB"),
        (
            "database rows",
            f"{fetched / calls:.1f} read through indexes, {scanned / calls:.1f} by sequential "
            f"scans, {written / calls:.1f} written, per call",
        ),
        ("leases lapsed", f"{seen['lapsed']} units at most running past their lease at once"),
        ("re-dispatched", f"{seen['redispatched']} units by the sweep, {reclaimed} claimed twice"),
    ]
    for name, value in rows:
        print(f"{name:<18} {value}")
    samples = seen["rss"]
    rss_start, rss_mid, rss_end = samples[0][1], samples[len(samples) // 2][1], samples[-1][1]
    print("worker RSS, MB   " + "  ".join(f"worker {i}" for i in range(len(workers))))
    for label, (at, values) in (
        ("start", samples[0]),
        ("middle", samples[len(samples) // 2]),
        ("end", samples[-1]),
    ):
        print(f"  {label:<6} {at:6.1f} s " + "  ".join(f"{v:8.1f}" for v in values))
    # Growth over the second half: the first samples come before a worker's first batch has
    # imported the SDKs and opened its connection pools; memory that keeps growing shows here.
    growth = max(end - mid for mid, end in zip(rss_mid, rss_end, strict=True))
    print(
        f"RESULT calls={calls} wall_s={wall:.1f} ideal_s={ideal:.1f} efficiency={efficiency:.3f} "
        f"cpu_ms_per_call={cpu_ms:.2f} peak_rss_mb={peak:.0f} units={progress.total} "
        f"concurrency={concurrency} latency_ms={args.latency_ms:.0f} rejudge={args.rejudge} "
        f"batches_per_worker={threads} index_rows_per_call={fetched / calls:.1f} "
        f"seq_rows_per_call={scanned / calls:.1f} rss_start_mb={max(rss_start):.0f} "
        f"rss_mid_mb={max(rss_mid):.0f} rss_end_mb={max(rss_end):.0f} "
        f"rss_growth_2nd_half_mb={growth:.1f} leases_lapsed_in_flight={seen['lapsed']} "
        f"swept={seen['redispatched']} reclaimed={reclaimed}"
    )


if __name__ == "__main__":
    main()
