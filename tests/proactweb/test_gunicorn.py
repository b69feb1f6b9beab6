"""The web server's settings have one home, gunicorn.conf.py: gunicorn reads it from the folder
it starts in, and docker-compose.yml and the Dockerfile add nothing to it — so the annotation
benchmark, which starts gunicorn with that file, measures the server as production runs it."""

import re
import runpy
import subprocess
import sys

from django.conf import settings

BASE = settings.BASE_DIR


def test_gunicorn_started_in_the_project_folder_runs_with_gunicorn_conf():
    printed = subprocess.run(
        [sys.executable, "-m", "gunicorn", "--print-config", "proactweb.wsgi:application"],
        cwd=BASE,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    shown = dict(re.findall(r"^(\w+)\s+= (.*)$", printed, re.MULTILINE))
    configured = runpy.run_path(str(BASE / "gunicorn.conf.py"))
    assert shown["config"] == "./gunicorn.conf.py"
    assert shown["worker_class"] == configured["worker_class"] == "sync"
    assert int(shown["workers"]) == configured["workers"]
    assert shown["preload_app"] == str(configured["preload_app"]) == "True"
    assert int(shown["timeout"]) == configured["timeout"]


def test_compose_and_the_image_start_gunicorn_with_no_settings_of_their_own():
    for name in ("docker-compose.yml", "Dockerfile"):
        text = (BASE / name).read_text()
        starts = re.findall(r"gunicorn[\s\",]+proactweb\.wsgi:application(.*)$", text, re.MULTILINE)
        assert starts, name
        assert all(re.fullmatch(r'["\]]*', rest.strip()) for rest in starts), (name, starts)
