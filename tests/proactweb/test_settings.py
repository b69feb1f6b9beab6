import os
import re
import subprocess
import sys

from django.conf import settings

PRODUCTION_ENV = {
    "DEBUG": "0",
    "SECRET_KEY": "a-long-production-secret-key-with-enough-entropy-0123456789-abcdefghij",
    "ALLOWED_HOSTS": "workbench.example.org",
    "SECURE_SSL_REDIRECT": "1",
    "SECURE_HSTS_PRELOAD": "1",
}


def _manage(*args, env_overrides: dict) -> subprocess.CompletedProcess:
    env = {**os.environ, **env_overrides}
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_check_deploy_is_clean_with_production_variables():
    result = _manage("check", "--deploy", "--fail-level", "WARNING", env_overrides=PRODUCTION_ENV)
    assert result.returncode == 0, result.stderr + result.stdout
    assert "System check identified no issues" in result.stdout


def test_check_deploy_warns_about_a_debug_server():
    result = _manage(
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        env_overrides={**PRODUCTION_ENV, "DEBUG": "1"},
    )
    assert result.returncode != 0
    assert "DEBUG" in result.stderr + result.stdout


def test_malformed_variable_fails_loudly():
    result = _manage("check", env_overrides={"DEBUG": "maybe"})
    assert result.returncode != 0
    assert "DEBUG='maybe' is not a boolean" in result.stderr


def test_a_count_or_limit_below_one_fails_loudly_by_name():
    # EVAL_BATCH_SIZE=0 had divided by zero while the settings loaded (the worker's batches);
    # a limit of 0 bytes would refuse every file as too large.
    for name in ("EVAL_BATCH_SIZE", "PROACTBENCH_MAX_FILE_BYTES"):
        result = _manage("check", env_overrides={name: "0"})
        assert result.returncode != 0
        assert f"{name}='0' is below its minimum, 1." in result.stderr


def test_embedded_default_is_sqlite_in_wal_mode_unless_database_url_is_set():
    if os.environ.get("DATABASE_URL"):
        assert settings.DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql"
    else:
        options = settings.DATABASES["default"]["OPTIONS"]
        assert settings.DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3"
        assert "journal_mode=WAL" in options["init_command"]


def test_defaults_are_not_insecure():
    assert "*" not in settings.ALLOWED_HOSTS
    result = _manage(
        "shell",
        "-c",
        "from django.conf import settings; print(settings.DEBUG)",
        env_overrides={"DEBUG": ""},
    )
    assert result.stdout.strip().splitlines()[-1] == "False"


def test_the_turn_image_storage_is_private_by_default_and_misconfiguration_fails_loudly():
    options = settings.STORAGES["turn_images"]["OPTIONS"]
    assert settings.STORAGES["turn_images"]["BACKEND"].endswith("FileSystemStorage")
    assert str(options["location"]).startswith(str(settings.VAR_DIR))
    assert not str(options["location"]).startswith(str(settings.STATIC_ROOT))
    result = _manage("check", env_overrides={"PROACTBENCH_IMAGE_STORAGE": "ftp"})
    assert result.returncode != 0
    assert "PROACTBENCH_IMAGE_STORAGE='ftp'" in result.stderr
    result = _manage("check", env_overrides={"PROACTBENCH_IMAGE_STORAGE": "s3"})
    assert result.returncode != 0
    assert "needs PROACTBENCH_IMAGE_S3_BUCKET" in result.stderr


def _worker_concurrency(**env: str) -> str:
    """The batches a worker process started with ``env`` runs at once (Celery reads its
    ``worker_concurrency`` from the settings when no ``--concurrency`` is given)."""
    probe = (
        "import django; django.setup(); from proactweb.celery import app; "
        "print(app.conf.worker_concurrency)"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=settings.BASE_DIR,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "proactweb.settings", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_a_worker_runs_twice_the_batches_that_fill_its_call_slots_unless_told():
    """A batch has at most one call in flight per unit: 2 batches of 32 left a third of 64 slots
    idle (bench/pipeline.py, issue #20)."""
    assert _worker_concurrency(EVAL_MAX_CALLS_IN_FLIGHT="64", EVAL_BATCH_SIZE="32") == "4"
    assert _worker_concurrency(EVAL_MAX_CALLS_IN_FLIGHT="128", EVAL_BATCH_SIZE="32") == "8"
    assert _worker_concurrency(EVAL_MAX_CALLS_IN_FLIGHT="100", EVAL_BATCH_SIZE="32") == "8"
    assert (
        _worker_concurrency(
            EVAL_MAX_CALLS_IN_FLIGHT="128", EVAL_BATCH_SIZE="32", CELERY_WORKER_CONCURRENCY="3"
        )
        == "3"
    )


def test_every_variable_the_settings_read_is_in_the_readme_configuration_table():
    readers = ("proactweb/settings.py", "gunicorn.conf.py")
    read = {
        name
        for path in readers
        for name in re.findall(
            r"\benv_\w+\(\s*\"([A-Z][A-Z0-9_]*)\"", (settings.BASE_DIR / path).read_text()
        )
    }
    readme = (settings.BASE_DIR / "README.md").read_text()
    table = readme.split("## Configuration", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"^\|[^\n]*", table, re.MULTILINE))
    missing = sorted(name for name in read if not any(f"`{name}`" in row for row in listed))
    assert len(read) > 40 and "WEB_CONCURRENCY" in read
    assert not missing, f"not in the README's configuration table: {missing}"
