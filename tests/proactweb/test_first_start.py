"""`make run`'s steps before the web server, run as the Makefile plans them (``make -n``), on a
fresh embedded database: they migrate and load the demo without Django's system checks, which
import the URLconf and with it the statistics stack (the web server runs the checks before it
serves), and without the vendor SDKs, which the provider adapters import only to build a client.
The speed of the whole first start is measured by bench/first_start.py."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# About 2.4 s of CPU for the statistics stack, 2 s for the SDKs, in each process that imports them.
NOT_IMPORTED = {"numpy", "scipy", "statsmodels", "pandas", "anthropic", "openai"}


def _planned_manage_py_steps(venv: Path) -> list[list[str]]:
    """The `manage.py` command lines of `make run` before the devserver, run by this
    interpreter."""
    plan = subprocess.run(
        ["make", "-n", "run", f"VENV={venv}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    steps = []
    for line in plan:
        argv = shlex.split(line)
        if "manage.py" not in argv or "devserver" in argv:
            continue
        assert argv[0].startswith("DEBUG="), line  # the Makefile's own environment for it
        assert argv[1] == f"{venv}/bin/python", line
        steps.append([sys.executable, "-X", "importtime", *argv[2:]])
    return steps


def _imported(importtime_output: str) -> set[str]:
    return set(re.findall(r"^import time:.*\|\s*(\S+)\s*$", importtime_output, re.MULTILINE))


@pytest.mark.slow
def test_migrate_and_load_demo_import_neither_the_statistics_stack_nor_the_sdks(tmp_path):
    steps = _planned_manage_py_steps(tmp_path / ".venv")
    assert [step[4] for step in steps] == ["migrate", "load_demo"], steps
    assert all("--skip-checks" in step for step in steps), steps
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE")
    }
    env.update(PROACTWEB_VAR_DIR=str(tmp_path / "var"), DEBUG="1")
    outputs = []
    for step in steps:
        done = subprocess.run(step, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr[-3000:]
        imported = _imported(done.stderr)
        assert "django" in imported  # the parse sees the imports: the next line can fail
        assert not imported & NOT_IMPORTED, (step[4], imported & NOT_IMPORTED)
        outputs.append(done.stdout)
    assert "annotator1" in outputs[-1]  # the demo logins are printed
