"""The web server's settings have one home, gunicorn.conf.py: gunicorn reads it from the folder
it starts in, and docker-compose.yml and the Dockerfile add nothing to it — so the annotation
benchmark, which starts gunicorn with that file, measures the server as production runs it."""

import os
import re
import runpy
import subprocess
import sys

from django.conf import settings

BASE = settings.BASE_DIR


def _gunicorn(*args: str, **env: str) -> subprocess.CompletedProcess:
    """gunicorn started as compose starts it (in the project folder, no settings of its own
    on the command line), with ``env`` over an environment that has no WEB_CONCURRENCY."""
    environ = {k: v for k, v in os.environ.items() if k != "WEB_CONCURRENCY"}
    return subprocess.run(
        [sys.executable, "-m", "gunicorn", *args, "proactweb.wsgi:application"],
        cwd=BASE,
        env={**environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def _shown(printed: str) -> dict[str, str]:
    return dict(re.findall(r"^(\w+)\s+= (.*)$", printed, re.MULTILINE))


def test_gunicorn_started_in_the_project_folder_runs_with_gunicorn_conf():
    result = _gunicorn("--print-config")
    assert result.returncode == 0, result.stderr
    shown = _shown(result.stdout)
    configured = runpy.run_path(str(BASE / "gunicorn.conf.py"))
    assert shown["config"] == "./gunicorn.conf.py"
    assert shown["worker_class"] == configured["worker_class"] == "sync"
    assert int(shown["workers"]) == configured["workers"] == 3
    assert shown["preload_app"] == str(configured["preload_app"]) == "True"
    assert int(shown["timeout"]) == configured["timeout"]


def test_compose_and_the_image_start_gunicorn_with_no_settings_of_their_own():
    for name in ("docker-compose.yml", "Dockerfile"):
        text = (BASE / name).read_text()
        starts = re.findall(r"gunicorn[\s\",]+proactweb\.wsgi:application(.*)$", text, re.MULTILINE)
        assert starts, name
        assert all(re.fullmatch(r'["\]]*', rest.strip()) for rest in starts), (name, starts)


def test_web_concurrency_sets_the_number_of_workers():
    # gunicorn's own variable: the file must not silently win over it.
    result = _gunicorn("--print-config", WEB_CONCURRENCY="7")
    assert result.returncode == 0, result.stderr
    assert _shown(result.stdout)["workers"] == "7"


def test_a_web_concurrency_that_names_no_worker_stops_the_start_by_name():
    result = _gunicorn("--check-config", WEB_CONCURRENCY="0")
    assert result.returncode != 0
    assert "WEB_CONCURRENCY='0' is below its minimum, 1." in result.stderr
    # Not a number: gunicorn's own reading of its variable refuses it first, naming it.
    result = _gunicorn("--check-config", WEB_CONCURRENCY="three")
    assert result.returncode != 0
    assert "WEB_CONCURRENCY" in result.stderr and "'three'" in result.stderr
