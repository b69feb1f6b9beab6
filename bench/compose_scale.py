"""`docker compose up --scale worker=N`, for real: the production stack of docker-compose.yml
(PostgreSQL, Redis, web, N workers, beat) started from scratch, checked, used and taken down.

1. ``up -d --build --scale worker=N`` (project ``pbscale``, so a deployment in this folder is not
   touched), then waits until the web container answers /healthz;
2. ``celery inspect ping`` from the web container: N workers, each ``celery@<container id>``;
3. ``showmigrations``: nothing left unapplied (the web service migrates before it serves);
4. ``load_demo --no-users`` and an evaluation run of the demo's replay endpoints (3 models, 1
   judge, every dialogue, no cache: 105 units, 210 calls) with ``EVAL_BATCH_SIZE`` (default 2)
   so the run is many batches; the workers' logs say which container ran each batch;
5. ``down -v`` (always, also after a failure).

    python bench/compose_scale.py                 # 3 workers
    PYTHON_IMAGE=local/python:3.11-slim POSTGRES_IMAGE=local/postgres:15 \\
        REDIS_IMAGE=local/redis:7 python bench/compose_scale.py --workers 3
                                                  # without a registry (deploy/offline/)

Needs Docker and `docker compose` (or Debian's `docker-compose`); without them it says so and
exits 0 with ``RESULT compose_scale skipped: …``. The web port published on the host is
WEB_PORT (default 8000). Ends with a RESULT line; exits 1 if a check failed.
"""

import argparse
import os
import re
import secrets
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROJECT = "pbscale"
DEMO_MODELS = "demo-atlas-large,demo-birch-medium,demo-cedar-small"
DEMO_JUDGE = "demo-judge-primary"
HEALTHZ = (
    "import urllib.request; urllib.request.urlopen('http://localhost:8000/healthz', timeout=3)"
)


def _compose_command() -> list[str] | None:
    if shutil.which("docker") is None:
        return None
    if subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
        return None
    if subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    return ["docker-compose"] if shutil.which("docker-compose") else None


class Stack:
    def __init__(self, compose: list[str], env: dict[str, str]):
        self.base = [*compose, "-p", PROJECT]
        self.env = env

    def run(self, *args: str, timeout: float = 900, check: bool = True) -> str:
        result = subprocess.run(
            [*self.base, *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and result.returncode != 0:
            raise RuntimeError(f"{' '.join(args[:3])}… failed:\n{result.stdout}\n{result.stderr}")
        return result.stdout + result.stderr

    def web(self, *args: str, **kwargs) -> str:
        return self.run("exec", "-T", "web", *args, **kwargs)


def _timed(phases: dict[str, float], name: str, action):
    start = time.monotonic()
    value = action()
    phases[name] = time.monotonic() - start
    return value


def _wait_healthy(stack: Stack, limit_s: float = 300) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if "Traceback" not in stack.web("python", "-c", HEALTHZ, check=False, timeout=30):
            return
        time.sleep(1)
    raise RuntimeError(f"/healthz did not answer within {limit_s:.0f} s")


def _batches_by_container(logs: str) -> tuple[Counter, Counter]:
    """Batches (``run_units`` tasks) and units each worker container finished, from its log
    lines (``<container> | … Task benchmark.run_units[…] succeeded in …s: {'done': 2}``)."""
    batches: Counter = Counter()
    units: Counter = Counter()
    pattern = re.compile(r"^(\S+)\s+\|.*run_units\[[^]]+\] succeeded in [\d.]+s: .*'done': (\d+)")
    for line in logs.splitlines():
        if match := pattern.match(line):
            batches[match[1]] += 1
            units[match[1]] += int(match[2])
    return batches, units


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=2, help="EVAL_BATCH_SIZE")
    options = parser.parse_args()

    compose = _compose_command()
    if compose is None:
        print("RESULT compose_scale skipped: no running Docker daemon with docker compose")
        return 0
    env = {
        **os.environ,
        "SECRET_KEY": os.environ.get("SECRET_KEY") or secrets.token_urlsafe(32),
        "EVAL_BATCH_SIZE": str(options.batch_size),
    }
    stack = Stack(compose, env)
    phases: dict[str, float] = {}
    checks: dict[str, bool] = {}
    workers = options.workers
    nodes: list[str] = []
    batches: Counter = Counter()
    units: Counter = Counter()
    try:
        _timed(
            phases,
            "up --build",
            lambda: stack.run("up", "-d", "--build", "--scale", f"worker={workers}"),
        )
        _timed(phases, "until /healthz", lambda: _wait_healthy(stack))
        ping = stack.web(
            "celery", "-A", "proactweb", "inspect", "ping", "--timeout", "10", check=False
        )
        nodes = sorted(set(re.findall(r"celery@(\S+): OK", ping)))
        checks["workers answer ping"] = len(nodes) == workers
        plan = stack.web("python", "manage.py", "showmigrations", "--plan")
        checks["migrations applied"] = "[X]" in plan and "[ ]" not in plan
        _timed(
            phases, "load_demo", lambda: stack.web("python", "manage.py", "load_demo", "--no-users")
        )
        output = _timed(
            phases,
            "run_eval (105 units)",
            lambda: stack.web(
                "python", "manage.py", "run_eval", "--name", f"compose-scale-{workers}",
                "--models", DEMO_MODELS, "--judges", DEMO_JUDGE, "--dialogues", "all", "--no-cache",
            ),
        )  # fmt: skip
        done = re.search(r"Run \d+ done: \{'done': (\d+)\}", output)
        checks["run done"] = done is not None
        batches, units = _batches_by_container(stack.run("logs", "--no-color", "worker"))
        checks["units on more than one worker"] = len(units) > 1
        checks["units counted = run's"] = done is not None and sum(units.values()) == int(done[1])
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        print(exc, file=sys.stderr)
        checks["the stack ran"] = False
    finally:
        _timed(phases, "down -v", lambda: stack.run("down", "-v", check=False))

    print(f"\n{'phase':<24}{'seconds':>9}")
    for name, seconds in phases.items():
        print(f"{name:<24}{seconds:>9.1f}")
    print(f"\n{'worker container':<28}{'batches':>8}{'units':>7}")
    for container in sorted(batches):
        print(f"{container:<28}{batches[container]:>8}{units[container]:>7}")
    print("\ncelery nodes: " + ", ".join(f"celery@{node}" for node in nodes))
    for name, ok in checks.items():
        print(f"{'ok ' if ok else 'FAILED '}{name}")
    load = os.getloadavg()
    print(
        f"RESULT compose_scale workers={workers} pinged={len(nodes)} "
        f"containers_with_units={len(units)} units={sum(units.values())} "
        f"up_s={phases.get('up --build', 0):.1f} healthy_s={phases.get('until /healthz', 0):.1f} "
        f"run_s={phases.get('run_eval (105 units)', 0):.1f} down_s={phases['down -v']:.1f} "
        f"checks={'ok' if all(checks.values()) else 'FAILED'} load1={load[0]:.1f}"
    )
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
