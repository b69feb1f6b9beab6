"""Pipeline benchmark at the source's full scale: 624 triggers × 16 models, one condition, one
judge (~20,000 calls) through real Celery workers on Redis and PostgreSQL, against a local fake
OpenAI server that answers every call after a fixed latency (200 ms).

Headline: wall time against the ideal (calls × latency / concurrency) as an efficiency ratio
(target ≥ 0.90 at concurrency 64), worker CPU milliseconds per call (target ≤ 3) and the
workers' peak memory.

    python bench/pipeline.py                       # full scale
    python bench/pipeline.py --models 2 --latency-ms 50   # a quick look
    python bench/pipeline.py --rejudge 2           # then 2 new judges on every reply, measured

With ``--rejudge N`` the run is made first as above (not measured), then re-judged by N new
judges (``runs.run_rejudge``: 624 × 16 × N judge calls, no reply); the figures are the
re-judge's.

It uses a scratch PostgreSQL database (created if missing; its benchmark tables are emptied)
and a Redis database of its own: --database-url / --redis-url. Ends with a RESULT line.
"""

import argparse
import json
import os
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
    setup_django,
    start_fake_server,
    start_workers,
    wait_for_run,
    wait_for_workers,
)


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
        "--threads", type=int, default=2, help="Celery threads (batches at once) per worker"
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
        "--profile",
        metavar="DIR",
        help="sample the workers with py-spy (pip install py-spy) during the measured part and "
        "write DIR/worker-N.txt (collapsed stacks) and print the top functions",
    )
    args = parser.parse_args()
    concurrency = args.workers * args.in_flight
    queue = "bench-pipeline"

    ensure_database(args.database_url)
    env = {
        **os.environ,
        "DATABASE_URL": args.database_url,
        "REDIS_URL": args.redis_url,
        "LOG_LEVEL": "WARNING",
        "EVAL_MAX_CALLS_IN_FLIGHT": str(args.in_flight),
        "EVAL_BATCH_SIZE": str(args.batch_size),
    }
    setup_django(env)
    from django.db.models import Avg, Max

    import benchmark.tasks  # noqa: F401  (imported already in a worker that launches a run)
    from benchmark.evaluation import runs
    from benchmark.models import AuditVia, Dialogue, ModelEndpoint, ProviderCall
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
        celery_app.conf.task_default_queue = queue
        wait_for_workers(celery_app, args.workers)
        cpu_before = sum(cpu_seconds(w.pid) for w in workers)
        server_cpu_before = cpu_seconds(server.pid)
        profilers = [] if args.rejudge else _start_profilers(args.profile, workers)
        started = time.perf_counter()
        runs.run_launch(run_id=run.pk)
        enqueued_s = time.perf_counter() - started
        wait_for_run(run)
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
            started = time.perf_counter()
            runs.run_rejudge(
                run_id=run.pk, judges=new_judges, via=AuditVia.COMMAND, actor_name="bench"
            )
            enqueued_s = time.perf_counter() - started
            wait_for_run(run)
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

    if args.profile:
        _print_profile(Path(args.profile))
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
        ("batches", f"{args.batch_size} units per task, {args.threads} tasks at once per worker"),
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
    ]
    for name, value in rows:
        print(f"{name:<18} {value}")
    print(
        f"RESULT calls={calls} wall_s={wall:.1f} ideal_s={ideal:.1f} efficiency={efficiency:.3f} "
        f"cpu_ms_per_call={cpu_ms:.2f} peak_rss_mb={peak:.0f} units={progress.total} "
        f"concurrency={concurrency} latency_ms={args.latency_ms:.0f} rejudge={args.rejudge}"
    )


if __name__ == "__main__":
    main()
