"""The README's two commands as the Makefile spells them (``make -n``: printed, not run): a first
`make run` installs the app's dependencies only, and `make test` the test and lint tools too;
both from constraints.txt."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _planned(target: str, venv: Path) -> list[str]:
    result = subprocess.run(
        ["make", "-n", target, f"VENV={venv}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout.splitlines()


def _installs(lines: list[str]) -> list[str]:
    return [line for line in lines if "pip install" in line and "constraints.txt" in line]


def test_a_first_make_run_installs_the_app_without_the_dev_tools(tmp_path):
    lines = _planned("run", tmp_path / ".venv")
    installs = _installs(lines)
    assert len(installs) == 1 and installs[0].endswith("-e ."), installs
    assert "[dev]" not in "\n".join(lines)
    assert any("manage.py migrate" in line for line in lines)
    assert any("manage.py load_demo" in line for line in lines)
    assert any("manage.py devserver" in line for line in lines)


def test_make_test_installs_the_dev_tools_and_counts_as_the_app_install(tmp_path):
    venv = tmp_path / ".venv"
    lines = _planned("test", venv)
    installs = _installs(lines)
    assert len(installs) == 1 and installs[0].endswith("-e '.[dev]'"), installs
    # The dev install holds everything the app needs: a later `make run` installs nothing more.
    assert any(f"{venv}/.installed-app" in line for line in lines if line.startswith("touch"))


def test_after_make_test_make_run_installs_nothing(tmp_path):
    venv = tmp_path / ".venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").touch()
    (venv / ".installed").touch()
    (venv / ".installed-app").touch()
    assert _installs(_planned("run", venv)) == []
