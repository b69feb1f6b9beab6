"""Workers on many hosts: does throughput grow with the hosts until the vendor's limit, and does
the shared limiter hold however many hosts spend it?

Each "host" is a Celery worker started as a process group of its own (a new session), with an
environment of its own (its own var folder and temporary folder, its own ``--hostname``) and so
its own connection pools, sharing nothing with the others but what separate machines would
share: PostgreSQL, Redis (the broker and the limiter) and the vendor (the fake OpenAI server,
tests/fakes/vendor_server.py). For N = 1, 2, 4, 6 hosts (``--hosts``) it runs an evaluation run
on one model (no judge) whose endpoint is limited — ``rate_limit_rpm`` and ``max_concurrency``
in its ``default_params``, shared by every host through Redis — against a fresh fake server
enforcing the same requests/min, and reads what the server saw (``/_fake/stats``,
``/_fake/log``):

- throughput: requests the server admitted / the span from the first request to the last
  answer; below the limit it grows by ``in-flight / latency`` per host, above it stays at the
  limit (``rpm / 60``);
- the server's most requests in flight, against the endpoint's ``max_concurrency``;
- the most requests sent (admitted or refused) in any 60 s, against ``rpm``;
- the share of requests answered 429.

The minute's burst is spent before each run, on both sides (the fake's buckets start empty,
``--start-empty``, and the endpoint's bucket in Redis is emptied through the limiter just
after the server starts), so that a run of a minute shows the sustained rate rather than a
minute's budget spent at once. A token bucket lets through, in any 60 s, what it held at the
start of them plus ``rpm``: the few seconds of refill between the emptying and the first call
may show above ``rpm``.

    python bench/hosts.py                         # 1, 2, 4, 6 hosts, ~75 s each
    python bench/hosts.py --hosts 1,2 --seconds 20   # a quick look

The defaults (500 ms a call, 2 calls in flight per host = 4 calls/s per host, 600 requests/min
= 10/s, at most 6 in flight) put the knee between 2 and 3 hosts, and keep the workers' CPU
small: 6 hosts and the fake server fit on 2 cores. Scratch PostgreSQL database (created if
missing, emptied) and Redis database (flushed): --database-url / --redis-url. Ends with a
RESULT line.
"""

import argparse
import json
import os
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _workers  # noqa: E402  (after the path is set)

MODEL = "bench-hosts-{n}"


def _json(url: str):
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.load(response)


def _most_in_window(times: list[float], window_s: float) -> int:
    """The most of ``times`` (sorted) inside any span of ``window_s`` seconds."""
    most, first = 0, 0
    for last, at in enumerate(times):
        while at - times[first] >= window_s:
            first += 1
        most = max(most, last - first + 1)
    return most


def _figures(log: list[dict], model: str) -> dict:
    """What the server saw of ``model`` (see the module docstring)."""
    mine = [row for row in log if row["model"] == model]
    admitted = [row for row in mine if row["fault"] != "rate_limit" and row["status"] == 200]
    refused = sum(row["fault"] == "rate_limit" for row in mine)
    first = min((row["received_s"] for row in mine), default=0.0)
    last = max((row["completed_s"] or row["received_s"] for row in admitted), default=first)
    span = last - first
    return {
        "requests": len(mine),
        "admitted": len(admitted),
        "refused": refused,
        "share_429": refused / len(mine) if mine else 0.0,
        "span_s": span,
        "calls_per_s": len(admitted) / span if span > 0 else 0.0,
        "most_per_min": _most_in_window(sorted(row["received_s"] for row in mine), 60.0),
    }


def _dialogues_for(triggers_wanted: int) -> list[int]:
    """The first dialogues (by id) holding at least ``triggers_wanted`` triggers between them."""
    from django.db.models import Count

    from benchmark.models import Trigger

    chosen, total = [], 0
    per_dialogue = (
        Trigger.objects.values_list("turn__dialogue")
        .annotate(n=Count("id"))
        .order_by("turn__dialogue")
    )
    for dialogue_id, n in per_dialogue:
        if total >= triggers_wanted:
            break
        chosen.append(dialogue_id)
        total += n
    if total < triggers_wanted:
        sys.exit(f"the corpus has {total} triggers, fewer than the {triggers_wanted} wanted")
    return chosen


def _empty_client_bucket(name: str, rpm: int, cap: int) -> int:
    """Spend the endpoint's requests bucket in Redis (the one every host takes from) down to
    nothing, through the limiter itself; the requests taken."""
    from benchmark.providers.ratelimit import limiters_for

    rate = limiters_for(name, rpm=rpm, tpm=None, max_concurrency=cap).rate
    assert rate is not None
    taken = 0
    while rate.try_acquire() == 0:
        taken += 1
    return taken


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--hosts",
        default="1,2,4,6",
        help="comma-separated host counts, ascending (default 1,2,4,6)",
    )
    parser.add_argument("--latency-ms", type=float, default=500.0)
    parser.add_argument(
        "--in-flight",
        type=int,
        default=2,
        help="calls in flight per host (EVAL_MAX_CALLS_IN_FLIGHT)",
    )
    parser.add_argument("--threads", type=int, default=2, help="Celery threads per host")
    parser.add_argument("--batch-size", type=int, default=8, help="units per task")
    parser.add_argument("--rpm", type=int, default=600, help="requests/min: server and endpoint")
    parser.add_argument(
        "--max-concurrency", type=int, default=6, help="the endpoint's cap on calls in flight"
    )
    parser.add_argument(
        "--seconds", type=float, default=75.0, help="about how long each run lasts (sets its size)"
    )
    parser.add_argument(
        "--database-url", default="postgres://postgres@127.0.0.1:5432/proactbench_hosts"
    )
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/11")
    args = parser.parse_args()
    try:
        steps = [int(n) for n in args.hosts.split(",")]
    except ValueError:
        steps = []
    if not steps or steps != sorted(set(steps)) or steps[0] < 1:
        sys.exit(f"--hosts {args.hosts!r}: distinct positive counts, ascending, e.g. 1,2,4,6")
    limit_per_s = args.rpm / 60

    def expected_per_s(hosts: int) -> float:
        """What ``hosts`` can do: their calls in flight, the cap on them, or the rate limit."""
        in_flight = min(hosts * args.in_flight, args.max_concurrency)
        return min(in_flight * 1000 / args.latency_ms, limit_per_s)

    biggest_run = max(args.seconds * expected_per_s(n) for n in steps)

    _workers.ensure_database(args.database_url)
    env = _workers.worker_env(
        database_url=args.database_url,
        redis_url=args.redis_url,
        in_flight=args.in_flight,
        batch_size=args.batch_size,
    )
    # Shared by every host of a deployment (docs/pipeline.md, "Workers on many hosts").
    env["SECRET_KEY"] = "hosts-benchmark-only-" + "x" * 40
    _workers.setup_django(env)
    summary = _workers.fresh_corpus(redis_url=args.redis_url, copies=1 + int(biggest_run) // 624)

    from benchmark.evaluation import runs
    from benchmark.models import Dialogue, ModelEndpoint, ProviderCall
    from proactweb.celery import app as celery_app

    queue = "bench-hosts"
    celery_app.conf.task_default_queue = queue
    folders = tempfile.TemporaryDirectory(prefix="bench-hosts-")
    hosts: list = []
    results = []
    try:
        for n in steps:
            while len(hosts) < n:
                i = len(hosts)
                home = Path(folders.name) / f"host-{i}"
                (home / "tmp").mkdir(parents=True)
                host_env = {
                    **env,
                    "PROACTWEB_VAR_DIR": str(home),
                    "TMPDIR": str(home / "tmp"),
                    "HOSTNAME": f"bench-host-{i}",
                }
                hosts.append(
                    _workers.start_worker(
                        threads=args.threads,
                        queue=queue,
                        env=host_env,
                        name=f"worker@bench-host-{i}",
                        new_session=True,
                        banner=False,
                    )
                )
            _workers.wait_for_workers(celery_app, n)
            model = MODEL.format(n=n)
            expected = expected_per_s(n)
            dialogues = _dialogues_for(int(args.seconds * expected))
            server, base_url = _workers.start_fake_server(
                args.latency_ms, "--rpm", str(args.rpm), "--limit-models", model, "--start-empty"
            )
            try:
                endpoint = ModelEndpoint.objects.create(
                    name=model,
                    display_name=model,
                    provider="openai-compatible",
                    model_name=model,
                    base_url=f"{base_url}/v1",
                    default_params={
                        "max_tokens": 64,
                        "rate_limit_rpm": args.rpm,
                        "max_concurrency": args.max_concurrency,
                    },
                )
                run = runs.run_create(
                    name=f"hosts {n}",
                    endpoints=[endpoint],
                    judges=[],
                    dialogues=Dialogue.objects.filter(pk__in=dialogues),
                )
                # After the server's start: the client's bucket is then never fuller than the
                # server's (both refill at the same rate), so nothing is sent that the server
                # would refuse for want of budget.
                emptied = _empty_client_bucket(model, args.rpm, args.max_concurrency)
                cpu_before = sum(_workers.cpu_seconds(h.pid) for h in hosts)
                started = time.perf_counter()
                runs.run_launch(run_id=run.pk)
                _workers.wait_for_run(run)
                wall = time.perf_counter() - started
                cpu = sum(_workers.cpu_seconds(h.pid) for h in hosts) - cpu_before
                stats = _json(f"{base_url}/_fake/stats")
                figures = _figures(_json(f"{base_url}/_fake/log"), model)
                failed = ProviderCall.objects.filter(run=run, ok=False).count()
                progress = runs.run_progress(run=run)
            finally:
                _workers.stop([server], timeout=30)
            results.append(
                {
                    "hosts": n,
                    "units": progress.total,
                    "done": progress.by_state.get("done", 0),
                    "wall_s": wall,
                    "expected_per_s": expected,
                    "max_in_flight": stats["max_in_flight"],
                    "failed_calls": failed,
                    "emptied": emptied,
                    "cpu_ms_per_call": 1000 * cpu / figures["admitted"]
                    if figures["admitted"]
                    else 0.0,
                    "load": os.getloadavg()[0],
                    **figures,
                }
            )
            row = results[-1]
            print(
                f"{n} host(s): {row['done']}/{row['units']} units in {wall:.1f} s, "
                f"{row['calls_per_s']:.2f} calls/s, max in flight {row['max_in_flight']}, "
                f"429s {row['refused']}, load {row['load']:.2f}",
                flush=True,
            )
    finally:
        _workers.stop(hosts)
        folders.cleanup()

    load = os.getloadavg()
    print(
        f"\n{summary.triggers} triggers in the corpus; one model, no judge; {args.latency_ms:.0f} "
        f"ms a call; per host {args.in_flight} calls in flight x {args.threads} threads, "
        f"{args.batch_size} units a task; limit {args.rpm} requests/min ({limit_per_s:.1f}/s), "
        f"max_concurrency {args.max_concurrency}; load average {load[0]:.2f} {load[1]:.2f}\n"
    )
    print(
        "| hosts | units done | wall s | calls/s | expected calls/s | server max in flight "
        "| most sent in 60 s | 429s | share_429 | host CPU ms/call | load |"
    )
    print("| ---: " * 11 + "|")
    for row in results:
        print(
            f"| {row['hosts']} | {row['done']}/{row['units']} | {row['wall_s']:.1f} | "
            f"{row['calls_per_s']:.2f} | {row['expected_per_s']:.2f} | {row['max_in_flight']} | "
            f"{row['most_per_min']} | {row['refused']} | {row['share_429']:.4f} | "
            f"{row['cpu_ms_per_call']:.2f} | {row['load']:.2f} |"
        )
    in_flight = max(row["max_in_flight"] for row in results)
    most_per_min = max(row["most_per_min"] for row in results)
    worst_429 = max(row["share_429"] for row in results)
    ok = (
        in_flight <= args.max_concurrency
        and worst_429 <= 0.01
        and all(row["done"] == row["units"] and not row["failed_calls"] for row in results)
    )
    print(
        "RESULT "
        + " ".join(f"calls_per_s_{row['hosts']}={row['calls_per_s']:.2f}" for row in results)
        + f" limit_per_s={limit_per_s:.2f} max_in_flight={in_flight} "
        f"max_concurrency={args.max_concurrency} most_per_min={most_per_min} rpm={args.rpm} "
        f"share_429={worst_429:.4f} latency_ms={args.latency_ms:.0f} "
        f"in_flight_per_host={args.in_flight} load={load[0]:.2f} ok={ok}"
    )


if __name__ == "__main__":
    main()
