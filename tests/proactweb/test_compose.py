import os
import shutil
import subprocess

import pytest
from django.conf import settings


def _compose_command() -> list[str]:
    if shutil.which("docker"):
        probe = subprocess.run(["docker", "compose", "version"], capture_output=True)
        if probe.returncode == 0:
            return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    pytest.skip("neither `docker compose` nor `docker-compose` is installed (.ci/run installs it)")


def test_docker_compose_file_parses_with_the_five_services():
    command = _compose_command()
    result = subprocess.run(
        [*command, "config", "--services"],
        cwd=settings.BASE_DIR,
        env={**os.environ, "SECRET_KEY": "compose-check"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert sorted(result.stdout.split()) == ["beat", "postgres", "redis", "web", "worker"]
