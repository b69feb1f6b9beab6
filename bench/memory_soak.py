"""Memory soak of the evaluation workers: a 20,000-unit run (624 triggers x 32 models, one judge,
~40,000 calls) through real Celery workers on Redis and PostgreSQL against the fake OpenAI
server; each worker's resident memory is sampled through the run.

Headline: worker RSS once the run is warm (5 % of the units finished: code imported, connection
pools and caches filled) and at the end, and the growth between them (target: flat, a few MB).

    python bench/memory_soak.py                  # 19,968 units
    python bench/memory_soak.py --models 4       # a quicker look

Scratch PostgreSQL database ``proactbench_soak`` (created if missing, emptied) and Redis
database 13 (flushed) — its own, so that it can run beside bench/pipeline.py. Ends with a RESULT
line.
"""

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _workers import (  # noqa: E402  (after the path is set)
    ensure_database,
    fresh_corpus,
    peak_rss_mb,
    rss_mb,
    setup_django,
    start_fake_server,
    start_workers,
    stop,
    wait_for_workers,
    worker_env,
)

MARKS = (0.05, 0.25, 0.5, 0.75, 1.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=int, default=32)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--in-flight", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument(
        "--database-url", default="postgres://postgres@127.0.0.1:5432/proactbench_soak"
    )
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/13")
    args = parser.parse_args()
    queue = "bench-soak"

    ensure_database(args.database_url)
    env = worker_env(
        database_url=args.database_url,
        redis_url=args.redis_url,
        in_flight=args.in_flight,
        batch_size=args.batch_size,
    )
    setup_django(env)
    from django.db.models import Count

    import benchmark.tasks  # noqa: F401
    from benchmark.evaluation import runs
    from benchmark.models import Dialogue, EvaluationUnit, ModelEndpoint, ProviderCall
    from proactweb.celery import app as celery_app

    fresh_corpus(redis_url=args.redis_url)

    server, base_url = start_fake_server(args.latency_ms)
    workers = start_workers(args.workers, args.threads, queue, env)
    samples: list[tuple[float, float, list[float]]] = []  # (share finished, seconds, RSS each)
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
            name="memory soak",
            endpoints=endpoints,
            judges=[judge],
            dialogues=Dialogue.objects.all(),
        )
        celery_app.conf.task_default_queue = queue
        wait_for_workers(celery_app, args.workers)
        rss_idle = [rss_mb(w.pid) for w in workers]
        started = time.monotonic()
        runs.run_launch(run_id=run.pk)
        marks = list(MARKS)
        while marks:
            states = dict(
                EvaluationUnit.objects.filter(run=run).values_list("state").annotate(n=Count("id"))
            )
            total = sum(states.values()) or 1
            share = (states.get("done", 0) + states.get("error", 0)) / total
            while marks and share >= marks[0]:
                samples.append(
                    (marks.pop(0), time.monotonic() - started, [rss_mb(w.pid) for w in workers])
                )
            time.sleep(0.5)
        wall = time.monotonic() - started
        peak = [peak_rss_mb(w.pid) for w in workers]
        calls = ProviderCall.objects.filter(run=run, ok=True).count()
        units = EvaluationUnit.objects.filter(run=run).count()
    finally:
        stop(workers)
        stop([server], timeout=30)

    print(
        f"{'finished':>9} {'seconds':>8} "
        + " ".join(f"{'worker ' + str(i):>10}" for i in range(len(workers)))
    )
    print(f"{'idle':>9} {0:8.1f} " + " ".join(f"{r:8.1f}MB" for r in rss_idle))
    for share, seconds, rss in samples:
        print(f"{share:9.0%} {seconds:8.1f} " + " ".join(f"{r:8.1f}MB" for r in rss))
    warm, end = samples[0][2], samples[-1][2]
    growth = max(e - w for w, e in zip(warm, end, strict=True))
    print(
        f"units {units}, calls {calls}, wall {wall:.0f} s, peak RSS "
        + ", ".join(f"{p:.0f} MB" for p in peak)
    )
    print(
        f"RESULT units={units} calls={calls} wall_s={wall:.0f} "
        f"rss_warm_mb={'/'.join(f'{r:.0f}' for r in warm)} "
        f"rss_end_mb={'/'.join(f'{r:.0f}' for r in end)} max_growth_mb={growth:.1f} "
        f"peak_rss_mb={max(peak):.0f}"
    )


if __name__ == "__main__":
    main()
