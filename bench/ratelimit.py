"""Vendor rate limits: does the pipeline use the whole of a server's limit without being refused?

The fake vendor server enforces requests per minute per model (tests/fakes/vendor_server.py:
token buckets holding a minute's budget, 429 + retry-after when over, the vendor's rate-limit
headers on every response). The run's models are limited, its judge is not; the run goes
through 2 real Celery worker processes sharing the Redis limiter (bench/pipeline.py's
machinery: PostgreSQL, Redis, the generated corpus), with more calls in flight than the limit
allows, so that the run is limit-bound, not latency-bound. For each wire format (OpenAI Chat
Completions, Anthropic Messages) and each mode — limits **configured** on the endpoints
(``rate_limit_rpm``) or **learnt** from the headers (nothing configured) — it reports:

- ``limit_share``: requests the server admitted for the limited models / the most it could
  have admitted between the first and the last (a full bucket + the refill over that span);
- ``steady_share``: the same over the second half of that span alone, where the burst is long
  spent (the sustained rate against the limit);
- ``share_429``: the limited models' requests answered 429 / all their requests;
- the server's most requests in flight.

    python bench/ratelimit.py                      # 2 models, 300 requests/min each, ~6 min
    python bench/ratelimit.py --rpm 600 --only openai:learnt
    python bench/ratelimit.py --inspect-python /tmp/inspect-venv/bin/python   # with the peer

Ends with ``RESULT limit_share=… share_429=…``: the worst over the configurations (targets:
≥ 0.95 and ≤ 0.01), each configuration's figures in the table above it.
"""

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _workers import (  # noqa: E402  (after the path is set)
    ensure_database,
    fresh_corpus,
    setup_django,
    start_fake_server,
    start_workers,
    stop,
    wait_for_run,
    wait_for_workers,
    worker_env,
)

VENDORS = {
    # wire format -> (provider key of the endpoints, key variable, base URL suffix)
    "openai": ("openai-compatible", "", "/v1"),
    "anthropic": ("anthropic", "BENCH_ANTHROPIC_API_KEY", ""),
}
MODES = ("configured", "learnt")


def _json(url: str):
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.load(response)


def _shares(rows: list[dict], models: set[str], rpm: int) -> dict:
    """The table's figures from the server's log (see the module docstring)."""
    mine = [row for row in rows if row["model"] in models]
    refused = sum(row["fault"] == "rate_limit" for row in mine)
    admitted_share, steady_share = [], []
    for model in models:
        times = sorted(
            row["received_s"]
            for row in mine
            if row["model"] == model and row["fault"] != "rate_limit"
        )
        if len(times) < 2:
            continue
        span = times[-1] - times[0]
        admitted_share.append(len(times) / (rpm + rpm / 60 * span))
        half = times[0] + span / 2
        steady = sum(t > half for t in times)
        steady_share.append(steady / (rpm / 60 * span / 2) if span else 0.0)
    return {
        "requests": len(mine),
        "refused": refused,
        "share_429": refused / len(mine) if mine else 0.0,
        "limit_share": min(admitted_share) if admitted_share else 0.0,
        "steady_share": min(steady_share) if steady_share else 0.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=int, default=2, help="limited models per run")
    parser.add_argument("--rpm", type=int, default=300, help="requests/min per model")
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--in-flight", type=int, default=32, help="per worker")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument(
        "--only",
        action="append",
        metavar="VENDOR:MODE",
        help="e.g. openai:learnt (repeatable); default: every vendor and mode",
    )
    parser.add_argument(
        "--inspect-python",
        metavar="PATH",
        help="the python of a venv with inspect_ai installed (not the project's): run the peer "
        "(bench/inspect_ratelimit_peer.py) on the same limit, OpenAI wire format",
    )
    parser.add_argument(
        "--database-url", default="postgres://postgres@127.0.0.1:5432/proactbench_ratelimit"
    )
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/12")
    args = parser.parse_args()
    configs = [(vendor, mode) for vendor in VENDORS for mode in MODES]
    if args.only:
        configs = [c for c in configs if f"{c[0]}:{c[1]}" in args.only]
        if not configs:
            sys.exit(f"--only: no such configuration among {VENDORS} x {MODES}")

    ensure_database(args.database_url)
    env = worker_env(
        database_url=args.database_url,
        redis_url=args.redis_url,
        in_flight=args.in_flight,
        batch_size=args.batch_size,
    )
    env["BENCH_ANTHROPIC_API_KEY"] = "bench-key"
    setup_django(env)
    import benchmark.tasks  # noqa: F401  (imported already in a worker that launches a run)
    from benchmark.evaluation import runs
    from benchmark.models import Dialogue, ModelEndpoint, ProviderCall
    from proactweb.celery import app as celery_app

    summary = fresh_corpus(redis_url=args.redis_url)

    queue = "bench-ratelimit"
    workers = start_workers(args.workers, args.threads, queue, env)
    results = []
    try:
        celery_app.conf.task_default_queue = queue
        wait_for_workers(celery_app, args.workers)
        for vendor, mode in configs:
            provider, key_env, suffix = VENDORS[vendor]
            names = [f"bench-rl-{vendor}-{mode}-{i}" for i in range(args.models)]
            server, base_url = start_fake_server(
                args.latency_ms, "--rpm", str(args.rpm), "--limit-models", ",".join(names)
            )
            try:
                limits = {"rate_limit_rpm": args.rpm} if mode == "configured" else {}
                endpoints = [
                    ModelEndpoint.objects.create(
                        name=name,
                        display_name=name,
                        provider=provider,
                        model_name=name,
                        base_url=f"{base_url}{suffix}",
                        api_key_env=key_env,
                        default_params={"max_tokens": 512, **limits},
                    )
                    for name in names
                ]
                judge = ModelEndpoint.objects.create(
                    name=f"bench-rl-{vendor}-{mode}-judge",
                    display_name="Bench judge",
                    provider="openai-compatible",
                    model_name=f"bench-rl-{vendor}-{mode}-judge",
                    base_url=f"{base_url}/v1",
                )
                run = runs.run_create(
                    name=f"rate limits {vendor} {mode}",
                    endpoints=endpoints,
                    judges=[judge],
                    dialogues=Dialogue.objects.all(),
                )
                started = time.perf_counter()
                runs.run_launch(run_id=run.pk)
                wait_for_run(run)
                wall = time.perf_counter() - started
                stats = _json(f"{base_url}/_fake/stats")
                figures = _shares(_json(f"{base_url}/_fake/log"), set(names), args.rpm)
                failed = ProviderCall.objects.filter(run=run, ok=False).count()
                progress = runs.run_progress(run=run)
            finally:
                stop([server], timeout=30)
            results.append(
                {
                    "vendor": vendor,
                    "mode": mode,
                    "units": progress.total,
                    "done": progress.by_state.get("done", 0),
                    "wall_s": wall,
                    "failed_calls": failed,
                    "max_in_flight": stats["max_in_flight"],
                    **figures,
                }
            )
            row = results[-1]
            print(
                f"{vendor}:{mode} done {row['done']}/{row['units']} in {wall:.1f} s, "
                f"limit_share {row['limit_share']:.3f}, 429s {row['refused']}",
                flush=True,
            )
    finally:
        stop(workers)
    peer = _run_peer(args, summary.triggers) if args.inspect_python else None

    load = os.getloadavg()
    print(
        f"\n{summary.triggers} triggers x {args.models} limited models ({args.rpm} requests/min "
        f"each) + 1 unlimited judge; {args.workers} workers x {args.in_flight} calls in flight; "
        f"{args.latency_ms:.0f} ms a call; load average {load[0]:.2f} {load[1]:.2f}\n"
    )
    header = (
        "| wire format | limits | units done | wall s | limited requests | 429s | share_429 "
        "| limit_share | steady_share | server max in flight | failed calls |"
    )
    print(header)
    print("| --- " * 11 + "|")
    for row in results:
        print(
            f"| {row['vendor']} | {row['mode']} | {row['done']}/{row['units']} | "
            f"{row['wall_s']:.1f} | {row['requests']} | {row['refused']} | "
            f"{row['share_429']:.4f} | {row['limit_share']:.3f} | {row['steady_share']:.3f} | "
            f"{row['max_in_flight']} | {row['failed_calls']} |"
        )
    if peer is not None:
        print(
            f"| openai (inspect_ai {peer['samples']} samples, adaptive concurrency) | peer | "
            f"{peer['samples'] - peer['errors']}/{peer['samples']} | {peer['wall_s']:.1f} | "
            f"{peer['requests']} | {peer['refused']} | {peer['share_429']:.4f} | "
            f"{peer['limit_share']:.3f} | {peer['steady_share']:.3f} | {peer['max_in_flight']} | "
            f"{peer['errors']} |"
        )
    else:
        print("(peer not run: give --inspect-python)")
    worst_share = min(row["limit_share"] for row in results)
    worst_429 = max(row["share_429"] for row in results)
    ok = (
        worst_share >= 0.95
        and worst_429 <= 0.01
        and all(row["done"] == row["units"] for row in results)
    )
    print(
        f"RESULT limit_share={worst_share:.3f} share_429={worst_429:.4f} "
        f"steady_share={min(row['steady_share'] for row in results):.3f} rpm={args.rpm} "
        f"models={args.models} workers={args.workers} configs={len(results)} "
        f"load={load[0]:.2f} ok={ok}"
        + (
            f" peer_limit_share={peer['limit_share']:.3f} peer_share_429={peer['share_429']:.4f}"
            if peer
            else ""
        )
    )


def _run_peer(args, triggers: int) -> dict:
    """inspect_ai against a server limited as above, on one model with as many calls as each
    of our limited models made (the triggers)."""
    model = "bench-rl-peer"
    server, base_url = start_fake_server(
        args.latency_ms, "--rpm", str(args.rpm), "--limit-models", model
    )
    try:
        done = subprocess.run(
            [
                args.inspect_python,
                str(ROOT / "bench" / "inspect_ratelimit_peer.py"),
                f"--base-url={base_url}/v1",
                f"--model={model}",
                f"--samples={triggers}",
            ],
            capture_output=True,
            text=True,
            timeout=1800,
        )
        line = next((x for x in done.stdout.splitlines() if x.startswith("PEER ")), None)
        if line is None:
            sys.exit(f"the inspect_ai peer failed:\n{done.stdout}\n{done.stderr[-3000:]}")
        reported = dict(part.split("=") for part in line.split()[1:])
        stats = _json(f"{base_url}/_fake/stats")
        figures = _shares(_json(f"{base_url}/_fake/log"), {model}, args.rpm)
    finally:
        stop([server], timeout=30)
    return {
        "samples": int(reported["samples"]),
        "errors": int(reported["errors"]),
        "wall_s": float(reported["wall_s"]),
        "max_in_flight": stats["max_in_flight"],
        **figures,
    }


if __name__ == "__main__":
    main()
