"""First start: `make run` on a fresh checkout, step by step, until the first page is served.

A copy of the project's tracked files (``git ls-files``, as a fresh clone has them) goes into a
temporary directory with no ``.venv`` and no ``var``; then ``make run`` runs there on a free port
and each step is timed from its output and from the files it leaves:

- ``venv``: the virtual environment (until make starts the first install);
- ``install``: the installer (uv, from pip) and the app's dependencies (until
  ``.venv/.installed-app``);
- ``migrate`` and ``demo``: until ``load_demo`` prints the logins;
- ``first_page``: until ``GET /accounts/login/`` answers 200 (the web server's import and
  system checks);
- ``worker``: until the Celery worker logs ``ready`` (it starts beside the web server).

Downloads come from the installer's cache when it has the packages (a machine that installed
them once): the figure then measures this project, not the network. ``--cold-cache`` measures a
fresh machine's: pip's cache off and uv's an empty folder. The machine's load average is printed
beside the figures. ``make run`` gets this process's environment less the variables that would
point it elsewhere (a database, a broker, a virtual environment) and less
``PYTHONDONTWRITEBYTECODE``, which a fresh machine does not set: with it, every process compiles
every module it imports that the install did not compile.

    .venv/bin/python bench/first_start.py [--cold-cache] [--source DIR]

Ends with ``RESULT total_s= venv_s= install_s= migrate_demo_s= first_page_s= worker_s= cpu_s= …``
(``cpu_s``: the CPU time of every process it started, which the machine's load distorts less).
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from _workers import free_port  # noqa: E402  (after the path is set)

TIMEOUT_S = 900


def _copy_tracked(root: Path, destination: Path) -> None:
    files = subprocess.run(
        ["git", "ls-files", "-z"], cwd=root, check=True, capture_output=True
    ).stdout.split(b"\0")
    for name in filter(None, files):
        source = root / name.decode()
        if not source.is_file():  # deleted in the work tree but still tracked
            continue
        target = destination / name.decode()
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(source.read_bytes())
        target.chmod(source.stat().st_mode)


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _page_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--cold-cache",
        "--no-pip-cache",
        action="store_true",
        help="download every package: pip's cache off, uv's an empty folder",
    )
    parser.add_argument(
        "--source",
        type=Path,
        default=ROOT,
        help="the checkout to copy (default: this one); another worktree compares revisions",
    )
    args = parser.parse_args()
    load_before = " ".join(f"{x:.2f}" for x in os.getloadavg())
    # The worker runs in its own session and may still be writing under var/ while it stops.
    with tempfile.TemporaryDirectory(
        prefix="proactbench-first-start-", ignore_cleanup_errors=True
    ) as tmp:
        checkout = Path(tmp) / "checkout"
        _copy_tracked(args.source, checkout)
        port = free_port()
        env = {
            key: value
            for key, value in os.environ.items()
            if key
            not in (
                "DATABASE_URL",
                "REDIS_URL",
                "VIRTUAL_ENV",
                "PROACTWEB_VAR_DIR",
                "PYTHONDONTWRITEBYTECODE",
            )
        }
        env["PYTHON"] = "python3"  # what a fresh machine has; the Makefile's default
        if args.cold_cache:
            env["PIP_NO_CACHE_DIR"] = "1"
            env["UV_CACHE_DIR"] = str(Path(tmp) / "uv-cache")
        lines: list[tuple[float, str]] = []
        cpu_before = _children_cpu_s()
        started = time.monotonic()
        process = subprocess.Popen(
            ["make", "run", f"ADDR=127.0.0.1:{port}"],
            cwd=checkout,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )

        def read() -> None:
            assert process.stdout is not None
            for line in process.stdout:
                lines.append((time.monotonic() - started, line.rstrip()))

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        marks: dict[str, float] = {}
        url = f"http://127.0.0.1:{port}/accounts/login/"
        try:
            while time.monotonic() - started < TIMEOUT_S:
                now = time.monotonic() - started
                if "venv_created" not in marks and (checkout / ".venv/bin/python").exists():
                    marks["venv_created"] = now
                installed = (checkout / ".venv/.installed-app", checkout / ".venv/.installed")
                if "install" not in marks and any(path.exists() for path in installed):
                    marks["install"] = now
                if "demo" not in marks and any("annotator1" in text for _, text in lines):
                    marks["demo"] = now
                if "first_page" not in marks and "install" in marks and _page_ok(url):
                    marks["first_page"] = now
                if "worker" not in marks and any(" ready." in text for _, text in lines):
                    marks["worker"] = now
                if "first_page" in marks and "worker" in marks:
                    break
                if process.poll() is not None:
                    sys.exit("make run stopped:\n" + "\n".join(t for _, t in lines[-30:]))
                time.sleep(0.1)
            else:
                sys.exit(
                    "no first page within the timeout:\n" + "\n".join(t for _, t in lines[-30:])
                )
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGINT)
                try:
                    process.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
        # Every process make started was waited for by its parent, so their CPU time is counted:
        # all of the first start, plus the few seconds until Ctrl-C stopped it.
        cpu_s = _children_cpu_s() - cpu_before
    # make echoes each command as it starts it: the first to name constraints.txt installs the
    # installer (uv) or, with INSTALLER=pip, the app; the venv is made before it.
    install_line = next((t for t, text in lines if "constraints.txt" in text), None)
    venv_s = install_line if install_line is not None else marks.get("venv_created", 0.0)
    steps = {
        "venv_s": venv_s,
        "install_s": marks["install"] - venv_s,
        "migrate_demo_s": marks["demo"] - marks["install"],
        "first_page_s": marks["first_page"] - marks["demo"],
        "worker_s": marks["worker"] - marks["demo"],
    }
    total = marks["first_page"]
    cache = "cold" if args.cold_cache else "warm"
    print(f"\nFirst start: `make run` on a fresh copy (installer's cache {cache})")
    print(f"machine load average (1, 5, 15 min) at the start: {load_before}\n")
    print("| step | seconds |\n| --- | ---: |")
    for label, key in (
        ("virtual environment", "venv_s"),
        ("install the app's dependencies (and the installer)", "install_s"),
        ("migrate + load_demo", "migrate_demo_s"),
        ("web server until the first page (after the demo)", "first_page_s"),
        ("(beside it) Celery worker ready (after the demo)", "worker_s"),
    ):
        print(f"| {label} | {steps[key]:.1f} |")
    print(f"| **first page, from `make run`** | **{total:.1f}** |")
    print(f"\nCPU time of every process `make run` started, until stopped: {cpu_s:.1f} s")
    fields = " ".join(f"{key}={value:.1f}" for key, value in {**steps, "cpu_s": cpu_s}.items())
    print(
        f"\nRESULT total_s={total:.1f} {fields} cache={cache} load_before={load_before.split()[0]}"
    )


if __name__ == "__main__":
    main()
