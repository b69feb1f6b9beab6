"""Fault campaign: an evaluation run of ≥ 2,000 units through real Celery workers on Redis and
PostgreSQL, against two local fake vendor servers (the models on the OpenAI wire format, the judge
on Anthropic's) that inject 20 % 429s with Retry-After, 5 % 500s, 2 % timeouts, 5 % malformed
judge outputs and 2 % evidence quotes absent from the reply (seeded). During the run a worker is
killed with SIGKILL three times (a replacement is started each time), the in-flight claims' Redis
connections are killed mid-batch (CLIENT KILL ID), Redis is paused for 2 s (DEBUG SLEEP) and
restarted once, and every backend of the scratch database is terminated once; then the run is
resumed until it is finished (or, with --no-resume, left to the tasks' retries and the sweep of
the first worker's embedded beat), and checked (tests/fault_campaign.py says exactly what is
checked).

    python bench/fault_campaign.py                 # 624 triggers x 4 models = 2,496 units
    python bench/fault_campaign.py --models 1      # a quicker look (624 units)
    python bench/fault_campaign.py --no-resume     # the run must finish on its own

It starts a Redis server of its own (port 6390, append-only file in a temporary folder, so a
restart keeps the queued messages as a production broker would) and never touches any other
Redis; the scratch PostgreSQL database (``proactbench_faults``, created if missing) is emptied.
Ends with a RESULT line.
"""

import argparse
import atexit
import functools
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _workers import (  # noqa: E402  (after the path is set)
    ensure_database,
    fresh_corpus,
    setup_django,
    start_fake_server,
    wait_for_workers,
    worker_env,
)

KEY_ENV = "FAULT_CAMPAIGN_ANTHROPIC_API_KEY"


class RedisServer:
    """A redis-server of our own on its own port and folder, restartable."""

    def __init__(self, port: int, folder: Path) -> None:
        self.port, self.folder, self.process = port, folder, None

    def start(self) -> "RedisServer":
        import redis

        # The campaign restarts this server, so it must be ours: a server left on the port by an
        # earlier campaign that failed during setup would answer the pings below while ours
        # exits with "Address already in use", and every "restart" would then do nothing.
        try:
            redis.Redis(port=self.port, socket_connect_timeout=1).ping()
        except redis.ConnectionError:
            pass
        else:
            sys.exit(
                f"a Redis server already answers on port {self.port}: stop it (an earlier "
                "campaign's?) or pass another --redis-port"
            )
        self.process = subprocess.Popen(
            [
                shutil.which("redis-server") or "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--dir",
                str(self.folder),
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--save",
                "",
                "--logfile",
                str(self.folder / "redis.log"),
                "--enable-debug-command",  # the campaign's pause is DEBUG SLEEP
                "local",
            ]
        )
        client = redis.Redis(port=self.port)
        deadline = time.monotonic() + 20
        while True:
            if self.process.poll() is not None:
                sys.exit(
                    f"redis-server on port {self.port} exited with {self.process.returncode}; "
                    f"see {self.folder / 'redis.log'}"
                )
            try:
                client.ping()
                return self
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    sys.exit(f"redis-server on port {self.port} did not start")
                time.sleep(0.1)

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=30)

    def restart(self) -> str:
        started = time.monotonic()
        self.stop()
        self.start()
        return f"restarted redis-server on port {self.port} ({time.monotonic() - started:.1f}s)"


def _start_fake_server(args, seed: int) -> tuple[subprocess.Popen, str]:
    """A fake vendor server injecting the campaign's faults (seeded)."""
    return start_fake_server(
        args.latency_ms,
        "--rate-429",
        "0.20",
        "--retry-after-s",
        "1",
        "--rate-500",
        "0.05",
        "--rate-timeout",
        "0.02",
        "--timeout-delay-ms",
        str(args.timeout_s * 1000 * 3),
        "--rate-malformed-judge",
        "0.05",
        "--rate-absent-evidence",
        "0.02",
        "--seed",
        str(seed),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=int, default=4, help="models under test (x 624 units)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2, help="batches at once per worker")
    parser.add_argument("--in-flight", type=int, default=32, help="calls in flight per worker")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--latency-ms", type=float, default=100.0)
    parser.add_argument("--timeout-s", type=float, default=2.0, help="client timeout per call")
    parser.add_argument("--lease-s", type=int, default=60, help="the run's lease_seconds")
    parser.add_argument("--stall-s", type=float, default=30.0)
    parser.add_argument(
        "--no-resume",
        action="store_true",
        help="never resume: the tasks' retries and the beat's sweep must finish the run",
    )
    parser.add_argument("--sweep-s", type=int, default=5, help="EVAL_SWEEP_INTERVAL_S")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--database-url", default="postgres://postgres@127.0.0.1:5432/proactbench_faults"
    )
    parser.add_argument("--redis-port", type=int, default=6390)
    args = parser.parse_args()
    if args.redis_port == 6379:
        sys.exit("use a Redis port of the campaign's own: it restarts that server")

    redis_dir = Path(tempfile.mkdtemp(prefix="fault-campaign-redis-"))
    redis_server = RedisServer(args.redis_port, redis_dir).start()
    # Stopped on any way out, a failure during the set-up below included (stop is idempotent).
    atexit.register(redis_server.stop)
    redis_url = f"redis://127.0.0.1:{args.redis_port}/0"
    ensure_database(args.database_url)
    env = worker_env(
        database_url=args.database_url,
        redis_url=redis_url,
        in_flight=args.in_flight,
        batch_size=args.batch_size,
        log_level="ERROR",
    )
    env.update({"EVAL_SWEEP_INTERVAL_S": str(args.sweep_s), KEY_ENV: "sk-ant-fault-campaign-key"})
    setup_django(env)
    from django.db import connection

    import benchmark.tasks  # noqa: F401
    from benchmark.evaluation import inflight, runs
    from benchmark.models import Dialogue, EvaluationRun, ModelEndpoint, ModelPrice
    from proactweb.celery import app as celery_app
    from tests import fault_campaign as campaign

    # Its own Redis server has just started empty: nothing to flush.
    fresh_corpus(redis_url=None, endpoint_prefix="faults-")

    model_server, model_url = _start_fake_server(args, args.seed)
    judge_server, judge_url = _start_fake_server(args, args.seed + 1)
    queue = "fault-campaign"
    celery_app.conf.task_default_queue = queue
    workers = campaign.Workers(
        count=args.workers, threads=args.threads, queue=queue, env=env, beat=True
    )
    params = {"max_tokens": 256, "timeout_s": args.timeout_s}
    try:
        under_test = []
        for i in range(args.models):
            name = f"faults-model-{i:02d}"
            under_test.append(
                ModelEndpoint.objects.create(
                    name=name,
                    display_name=name,
                    provider="openai-compatible",
                    model_name=name,
                    base_url=f"{model_url}/v1",
                    default_params=params,
                )
            )
        judge = ModelEndpoint.objects.create(
            name="faults-judge",
            display_name="faults-judge",
            provider="anthropic",
            model_name="faults-judge",
            base_url=judge_url,
            api_key_env=KEY_ENV,
            default_params=params,
        )
        for endpoint in [*under_test, judge]:
            ModelPrice.objects.update_or_create(
                model_name=endpoint.model_name,
                defaults={"input_usd_per_mtok": 3, "output_usd_per_mtok": 15},
            )
        run = runs.run_create(
            name="fault campaign",
            endpoints=under_test,
            judges=[judge],
            dialogues=Dialogue.objects.all(),
        )
        EvaluationRun.objects.filter(pk=run.pk).update(lease_seconds=args.lease_s)
        workers.start()
        wait_for_workers(celery_app, args.workers)
        settings_dict = dict(connection.settings_dict)
        plan = [
            campaign.Fault(0.10, "kill -9 worker (1/3)", workers.kill_one),
            campaign.Fault(0.25, "kill -9 worker (2/3)", workers.kill_one),
            campaign.Fault(
                0.30,
                "kill the in-flight claims' Redis connections",
                functools.partial(
                    campaign.kill_redis_connections, redis_url, (inflight.CLIENT_NAME,)
                ),
            ),
            campaign.Fault(
                0.35, "pause Redis", functools.partial(campaign.pause_redis, redis_url, 2.0)
            ),
            campaign.Fault(0.40, "restart Redis", redis_server.restart),
            campaign.Fault(0.55, "kill -9 worker (3/3)", workers.kill_one),
            campaign.Fault(
                0.70,
                "terminate PostgreSQL backends",
                lambda: campaign.terminate_backends(settings_dict),
            ),
        ]
        runs.run_launch(run_id=run.pk)
        drive = campaign.drive(
            run.pk,
            plan,
            stall_s=args.stall_s,
            timeout_s=3600,
            resume=not args.no_resume,
            say=lambda t: print(t, flush=True),
        )
        servers = [
            (campaign.log_rows_from_url(model_url), {e.pk for e in under_test}),
            (campaign.log_rows_from_url(judge_url), {judge.pk}),
        ]
        report = campaign.verify(run.pk, servers)
    finally:
        workers.stop()
        for server in (model_server, judge_server):
            server.terminate()
            server.wait(timeout=30)
        redis_server.stop()
        shutil.rmtree(redis_dir, ignore_errors=True)

    print()
    for name, value in [
        ("models x triggers", f"{args.models} x 624"),
        ("workers", f"{args.workers} x {args.threads} threads, {args.in_flight} calls in flight"),
        ("latency / client timeout", f"{args.latency_ms:.0f} ms / {args.timeout_s:g} s"),
        ("workers started", workers.started),
        ("faults fired", len([e for e in drive.events if "resumed" not in e[1]]) - 1),
        ("resumes", drive.resumes),
        ("wall", f"{drive.wall_s:.1f} s"),
        *report.table(),
    ]:
        print(f"{name:<36} {value}")
    print(
        report.result_line(
            kills=len(workers.dead),
            redis_restarts=1,
            redis_kills=1,
            redis_pauses=1,
            db_terminations=1,
            resumes=drive.resumes,
            wall_s=f"{drive.wall_s:.0f}",
            ok=report.ok,
        )
    )
    sys.exit(0 if report.ok else 1)


if __name__ == "__main__":
    main()
