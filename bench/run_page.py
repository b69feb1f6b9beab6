"""What one poll of a run's admin page costs on a big run: the page asks for its progress
fragment every 2 s while it is open, and the fragment reads the run's units and calls (its
progress, and each endpoint's calls and limits, benchmark/providers/activity.py).

    python bench/run_page.py                       # 200,000 calls over 8 endpoints
    python bench/run_page.py --calls 50000 --polls 40

It drops and recreates the scratch database ``proactbench_bench_run_page`` (--database-url),
writes one run with --calls recorded calls spread over --endpoints endpoints (the latest
minute's share as a steady run leaves it), and times, each --polls times: the progress alone
(``run_progress``: the run's units, and its calls counted per endpoint in one grouped query),
the endpoints' table given those counts (``run_endpoint_activity``: the endpoints' row and one
Redis round trip), and the whole fragment through Django's test client as an admin.
PostgreSQL and Redis (--redis-url) as production runs them. Ends with a RESULT line.
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _workers import recreate_database, setup_django  # noqa: E402

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/proactbench_bench_run_page"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200_000)
    parser.add_argument("--endpoints", type=int, default=8)
    parser.add_argument("--polls", type=int, default=20)
    parser.add_argument("--database-url", default=DEFAULT_DATABASE_URL)
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/10")
    args = parser.parse_args()
    if args.calls < 1 or args.endpoints < 1 or args.polls < 1:
        sys.exit("--calls, --endpoints and --polls must be at least 1")

    recreate_database(args.database_url)
    setup_django(
        {
            **os.environ,
            "DATABASE_URL": args.database_url,
            "REDIS_URL": args.redis_url,
            "SECRET_KEY": os.environ.get("SECRET_KEY", "bench-run-page"),
            "LOG_LEVEL": "WARNING",
            "ALLOWED_HOSTS": "testserver",  # Django's test client's host
        }
    )
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext
    from django.urls import reverse

    from benchmark.evaluation.runs import run_endpoint_activity, run_progress
    from benchmark.models import EvaluationRun, ModelEndpoint, ProviderCall

    endpoints = [
        ModelEndpoint.objects.create(
            name=f"model-{i}",
            display_name=f"Model {i}",
            provider="openai-compatible",
            model_name=f"model-{i}",
            base_url="http://127.0.0.1:9/v1",
            default_params={"rate_limit_rpm": 600, "max_concurrency": 16},
        )
        for i in range(args.endpoints)
    ]
    run = EvaluationRun.objects.create(name="big run", status="running")
    run.endpoints.set(endpoints)
    started = time.perf_counter()
    with connection.cursor() as cursor:
        # A steady run: calls one after another over the hours before now, every 50th failed,
        # every 10th retried; the endpoints in turn.
        cursor.execute(
            f"INSERT INTO {ProviderCall._meta.db_table}"  # noqa: S608
            " (run_id, endpoint_id, purpose, cache_key, ok, error, input_tokens,"
            " output_tokens, reasoning_tokens, latency_s, attempts, request_id, cost_usd,"
            " created_at)"
            " SELECT %s, (%s::bigint[])[1 + n %% %s], 'reply', md5(n::text), n %% 50 <> 0, '',"
            " 900, 300, 0, 1.0 + (n %% 7) / 10.0, CASE WHEN n %% 10 = 0 THEN 2 ELSE 1 END,"
            " '', 0.001, now() - (%s - n) * interval '50 milliseconds'"
            " FROM generate_series(1, %s) AS n",
            [
                run.pk,
                [e.pk for e in endpoints],
                args.endpoints,
                args.calls,
                args.calls,
            ],
        )
        cursor.execute(f"ANALYZE {ProviderCall._meta.db_table}")
    print(
        f"{args.calls:,} calls over {args.endpoints} endpoints written in "
        f"{time.perf_counter() - started:.1f} s (load {os.getloadavg()[0]:.1f})"
    )

    admin = get_user_model().objects.create_superuser("bench-admin", "a@example.org", "x")
    client = Client()
    client.force_login(admin)
    url = reverse("admin:benchmark_evaluationrun_progress", args=[run.pk])

    def timed(function) -> list[float]:
        function()  # warm
        times = []
        for _ in range(args.polls):
            t = time.perf_counter()
            function()
            times.append((time.perf_counter() - t) * 1000)
        return times

    def page() -> None:
        response = client.get(url)
        assert response.status_code == 200, response.status_code
        assert b'id="endpoint-activity"' in response.content

    counts = run_progress(run=run).call_counts
    figures = {
        "progress": timed(lambda: run_progress(run=run)),
        "activity": timed(lambda: run_endpoint_activity(run=run, counts=counts)),
        "page": timed(page),
    }
    with CaptureQueriesContext(connection) as captured:
        page()
    statements = len(captured.captured_queries)
    activity = run_endpoint_activity(run=run)
    assert sum(row.counts.calls + row.counts.failed for row in activity.endpoints) == args.calls

    print(f"{args.polls} polls each, wall ms:")
    print("what                               median      p95      max")
    labels = {
        "progress": "run_progress (units, calls, cost)",
        "activity": "run_endpoint_activity (given those)",
        "page": "the fragment (test client)",
    }
    for key, times in figures.items():
        p95 = statistics.quantiles(times, n=20)[-1] if len(times) > 1 else times[0]
        print(f"{labels[key]:<34} {statistics.median(times):7.1f} {p95:8.1f} {max(times):8.1f}")
    print(f"statements per poll of the fragment: {statements}")
    print(
        f"RESULT calls={args.calls} endpoints={args.endpoints} "
        f"progress_ms={statistics.median(figures['progress']):.1f} "
        f"activity_ms={statistics.median(figures['activity']):.1f} "
        f"page_ms={statistics.median(figures['page']):.1f} statements={statements} "
        f"load_before={os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
