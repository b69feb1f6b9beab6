import os
import shutil
import subprocess

import pytest
import yaml
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


def _compose_config(**env: str) -> dict:
    command = _compose_command()
    result = subprocess.run(
        [*command, "config"],
        cwd=settings.BASE_DIR,
        env={**os.environ, "SECRET_KEY": "compose-check", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return yaml.safe_load(result.stdout)


def test_worker_service_can_be_scaled_on_one_host():
    # `docker compose up --scale worker=N` starts N replicas of one service definition: a fixed
    # container name, hostname or published port would make the second replica clash.
    worker = _compose_config()["services"]["worker"]
    assert not {"container_name", "hostname", "ports"} & worker.keys()
    # Each replica then pings itself as celery@<its container id> (the container's hostname).
    assert "celery@$$HOSTNAME" in _raw_compose()["services"]["worker"]["healthcheck"]["test"][1]


def test_base_images_default_to_the_official_ones_and_can_be_swapped():
    services = _compose_config()["services"]
    assert services["postgres"]["image"] == "postgres:16"
    assert services["redis"]["image"] == "redis:7"
    assert services["web"]["build"]["args"] == {"PYTHON_IMAGE": "python:3.11-slim"}

    swapped = _compose_config(
        PYTHON_IMAGE="local/python:3.11-slim",
        POSTGRES_IMAGE="local/postgres:15",
        REDIS_IMAGE="local/redis:7",
    )["services"]
    assert swapped["postgres"]["image"] == "local/postgres:15"
    assert swapped["redis"]["image"] == "local/redis:7"
    for name in ("web", "worker", "beat"):
        assert swapped[name]["build"]["args"] == {"PYTHON_IMAGE": "local/python:3.11-slim"}


def test_the_dockerfile_builds_from_the_python_image_argument():
    dockerfile = (settings.BASE_DIR / "Dockerfile").read_text()
    instructions = [line for line in dockerfile.splitlines() if line and not line.startswith("#")]
    assert instructions[:2] == ["ARG PYTHON_IMAGE=python:3.11-slim", "FROM ${PYTHON_IMAGE}"]


def test_tuning_variables_reach_the_workers_only_when_set():
    unset = _compose_config()["services"]["worker"]["environment"]
    # Pass-through entries: unset in the shell, so absent in the container (compose shows null).
    assert unset.get("EVAL_BATCH_SIZE") is None
    set_ = _compose_config(EVAL_BATCH_SIZE="4")["services"]["worker"]["environment"]
    assert set_["EVAL_BATCH_SIZE"] == "4"


def _raw_compose() -> dict:
    return yaml.safe_load((settings.BASE_DIR / "docker-compose.yml").read_text())


def test_the_web_servers_worker_count_reaches_it_only_when_set():
    # gunicorn.conf.py reads WEB_CONCURRENCY; unset, the container has none and the file's 3 stand.
    assert _compose_config()["services"]["web"]["environment"].get("WEB_CONCURRENCY") is None
    web = _compose_config(WEB_CONCURRENCY="8")["services"]["web"]["environment"]
    assert web["WEB_CONCURRENCY"] == "8"
