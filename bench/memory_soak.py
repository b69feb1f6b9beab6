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
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from pipeline import _ensure_database, _peak_rss_mb, _start_fake_server, _start_workers  # noqa: E402

MARKS = (0.05, 0.25, 0.5, 0.75, 1.0)


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


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

    _ensure_database(args.database_url)
    env = {
        **os.environ,
        "DATABASE_URL": args.database_url,
        "REDIS_URL": args.redis_url,
        "LOG_LEVEL": "WARNING",
        "EVAL_MAX_CALLS_IN_FLIGHT": str(args.in_flight),
        "EVAL_BATCH_SIZE": str(args.batch_size),
    }
    os.environ.update(env)
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)

    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "proactweb.settings")
    django.setup()
    import redis
    from corpus_import import generate_corpus
    from django.db.models import Count

    import benchmark.tasks  # noqa: F401
    from benchmark.corpus.importer import corpus_import
    from benchmark.evaluation import runs
    from benchmark.models import (
        Blueprint,
        CallInFlight,
        Dialogue,
        EvaluationRun,
        EvaluationUnit,
        ModelEndpoint,
        Persona,
        ProviderCall,
        ResponseCacheEntry,
        Scenario,
    )
    from proactweb.celery import app as celery_app

    redis.Redis.from_url(args.redis_url).flushdb()
    EvaluationRun.objects.all().delete()
    ResponseCacheEntry.objects.all().delete()
    CallInFlight.objects.all().delete()
    for model in (Dialogue, Blueprint, Scenario, Persona):
        model.objects.all().delete()
    ModelEndpoint.objects.filter(name__startswith="bench-").delete()
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus.jsonl"
        generate_corpus(corpus)
        with corpus.open("rb") as stream:
            corpus_import(stream=stream)

    server, base_url = _start_fake_server(args.latency_ms)
    workers = _start_workers(args.workers, args.threads, queue, env)
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
        deadline = time.monotonic() + 60
        while len(celery_app.control.ping(timeout=1.0)) < args.workers:
            if time.monotonic() > deadline:
                sys.exit("workers did not start")
        rss_idle = [_rss_mb(w.pid) for w in workers]
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
                    (marks.pop(0), time.monotonic() - started, [_rss_mb(w.pid) for w in workers])
                )
            time.sleep(0.5)
        wall = time.monotonic() - started
        peak = [_peak_rss_mb(w.pid) for w in workers]
        calls = ProviderCall.objects.filter(run=run, ok=True).count()
        units = EvaluationUnit.objects.filter(run=run).count()
    finally:
        for worker in workers:
            worker.terminate()
        for worker in workers:
            worker.wait(timeout=60)
        server.terminate()
        server.wait(timeout=30)

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
