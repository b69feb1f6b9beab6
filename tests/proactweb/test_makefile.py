"""The README's two commands as the Makefile spells them (``make -n``: printed, not run): a first
`make run` installs the app's dependencies only, and `make test` the test and lint tools too;
both from constraints.txt, with uv (itself pinned there) unless ``INSTALLER=pip``."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _planned(target: str, venv: Path, *variables: str) -> list[str]:
    result = subprocess.run(
        ["make", "-n", target, f"VENV={venv}", *variables],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout.splitlines()


def _installs(lines: list[str]) -> list[str]:
    return [line for line in lines if "pip install" in line and "constraints.txt" in line]


def test_a_first_make_run_installs_uv_then_the_app_without_the_dev_tools(tmp_path):
    venv = tmp_path / ".venv"
    lines = _planned("run", venv)
    installs = _installs(lines)
    assert installs == [
        f"{venv}/bin/python -m pip install --quiet -c constraints.txt uv",
        # Bytecode is compiled on first import, of the modules a start imports only.
        f"{venv}/bin/uv pip install --quiet --python {venv}/bin/python -c constraints.txt -e .",
    ]
    assert "[dev]" not in "\n".join(lines)
    assert any("manage.py migrate" in line for line in lines)
    assert any("manage.py load_demo" in line for line in lines)
    assert any("manage.py devserver --skip-checks" in line for line in lines)


def test_uv_is_pinned_in_the_constraints():
    pins = (ROOT / "constraints.txt").read_text().splitlines()
    assert sum(line.startswith("uv==") for line in pins) == 1


def test_with_installer_pip_make_run_installs_the_app_with_pip_alone(tmp_path):
    venv = tmp_path / ".venv"
    lines = _planned("run", venv, "INSTALLER=pip")
    assert _installs(lines) == [f"{venv}/bin/python -m pip install --quiet -c constraints.txt -e ."]
    assert not any("uv" in line.split() for line in lines)


def test_an_unknown_installer_is_refused_by_name(tmp_path):
    result = subprocess.run(
        ["make", "-n", "run", f"VENV={tmp_path}", "INSTALLER=poetry"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode != 0
    assert 'INSTALLER must be uv or pip, not "poetry"' in result.stderr


def test_make_test_installs_the_dev_tools_and_counts_as_the_app_install(tmp_path):
    venv = tmp_path / ".venv"
    lines = _planned("test", venv)
    installs = _installs(lines)
    assert len(installs) == 2, installs
    assert installs[-1] == (
        f"{venv}/bin/uv pip install --quiet --python {venv}/bin/python --compile-bytecode "
        "-c constraints.txt -e '.[dev]'"
    )
    # The dev install holds everything the app needs: a later `make run` installs nothing more.
    assert any(f"{venv}/.installed-app" in line for line in lines if line.startswith("touch"))


def test_after_make_test_make_run_installs_nothing(tmp_path):
    venv = tmp_path / ".venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").touch()
    (venv / "bin" / "uv").touch()
    (venv / ".installed").touch()
    (venv / ".installed-app").touch()
    assert _installs(_planned("run", venv)) == []
