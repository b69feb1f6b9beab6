"""Settings, read from the environment.

With nothing set you get the *embedded default*: SQLite in WAL mode under ``var/`` and a Celery
broker on the local filesystem (no server to run). ``DATABASE_URL`` and ``REDIS_URL`` switch to
PostgreSQL and Redis. Every variable is listed in the README's configuration table; the helpers
(proactweb/env.py) fail loudly on a malformed value instead of guessing.
"""

import os
import secrets
from datetime import timedelta
from pathlib import Path
from typing import Any

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from proactweb.env import env_bool, env_int, env_list, env_path, env_str

BASE_DIR = Path(__file__).resolve().parent.parent

VAR_DIR = env_path("PROACTWEB_VAR_DIR", BASE_DIR / "var")
VAR_DIR.mkdir(parents=True, exist_ok=True)


def _secret_key() -> str:
    """SECRET_KEY from the environment, else a random key kept in var/ (never committed)."""
    configured = env_str("SECRET_KEY")
    if configured:
        return configured
    key_file = VAR_DIR / "secret_key"
    if not key_file.exists():
        key_file.write_text(secrets.token_urlsafe(50))
        key_file.chmod(0o600)
    return key_file.read_text().strip()


SECRET_KEY = _secret_key()
DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_htmx",
    "template_partials",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "axes",
    "core",
    "benchmark",
    "annotation",
    "stats",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # With DEBUG on, a 404 goes to handler404 too, which keeps the URL list to staff.
    "core.errors.DebugNotFoundMiddleware",
    # An admin page asked with a lookup the database cannot hold is a 400 (core/errors.py).
    "core.errors.AdminBadLookupMiddleware",
    # Last, as django-axes asks: turns a locked-out login into its 429 response.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "proactweb.urls"
WSGI_APPLICATION = "proactweb.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "core.roles.role_context",
            ],
            "builtins": ["template_partials.templatetags.partials"],
        },
    },
]

# --- Database ------------------------------------------------------------------------------
DATABASE_URL = env_str("DATABASE_URL")
DATABASES = {
    "default": dj_database_url.parse(
        DATABASE_URL or f"sqlite:///{VAR_DIR / 'db.sqlite3'}",
        conn_max_age=env_int("DB_CONN_MAX_AGE", 60),
        conn_health_checks=True,
    )
}
# PostgreSQL: the hot paths' own statements (core.rows, the apps' sql.py) are prepared once
# per connection, so that they are not parsed again on every request (core/prepared.py). Each
# run is still planned for its own values: a generic plan, PostgreSQL's own choice after five
# runs, doubled its CPU per answer under the annotation benchmark's load (bench/README.md).
# A read of tables that annotating does not grow asks for PostgreSQL's own choice for itself
# (core.prepared: generic_plan). Only cached plans have a plan to choose — prepared statements
# and PostgreSQL's own foreign-key checks, whose generic plans on a new study's assignments
# read up to 12× the buffers — so the setting changes nothing else.
DB_PREPARE_STATEMENTS = env_bool("DB_PREPARE_STATEMENTS", True)
if DB_PREPARE_STATEMENTS and DATABASES["default"]["ENGINE"].endswith("postgresql"):
    _options = DATABASES["default"].setdefault("OPTIONS", {})
    _options["options"] = (
        _options.get("options", "") + " -c plan_cache_mode=force_custom_plan"
    ).strip()
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets the web server and the Celery worker write side by side; IMMEDIATE transactions
    # take the write lock up front, so two writers queue on the timeout instead of deadlocking.
    DATABASES["default"]["OPTIONS"] = {
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
        "init_command": (
            "PRAGMA journal_mode=WAL;PRAGMA synchronous=NORMAL;PRAGMA foreign_keys=ON;"
        ),
    }
    # A file, not memory, so that a Celery worker started by a test can open the test database
    # (the test passes its path on); one per test process, so two test runs never collide.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / f"test-db-{os.getpid()}.sqlite3")}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
# SQLite has no covering indexes (INCLUDE): there the few that PostgreSQL reads a rater's
# progress from (annotation/models.py) are plain ones, which is all the warnings say.
SILENCED_SYSTEM_CHECKS = ["models.W039", "models.W040"]

# --- Celery --------------------------------------------------------------------------------
REDIS_URL = env_str("REDIS_URL")
if REDIS_URL:
    CELERY_BROKER_URL = REDIS_URL
    CELERY_RESULT_BACKEND = REDIS_URL
else:
    _broker_dir = VAR_DIR / "celery-broker"
    _results_dir = VAR_DIR / "celery-results"
    for _folder in (
        _broker_dir / "queue",
        _broker_dir / "processed",
        _broker_dir / "control",
        _broker_dir / "broken",
        _results_dir,
    ):
        _folder.mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_URL = "filesystem://"
    # kombu's filesystem transport, with atomic writes and undecodable files set aside
    # (core/broker.py): a half-written message once stopped the embedded worker.
    CELERY_BROKER_TRANSPORT = "core.broker:Transport"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir / "queue"),
        "data_folder_out": str(_broker_dir / "queue"),
        "processed_folder": str(_broker_dir / "processed"),
        "store_processed": False,
        "control_folder": str(_broker_dir / "control"),  # else kombu writes ./control
        "broken_folder": str(_broker_dir / "broken"),  # messages that cannot be decoded
        # kombu polls the folder; its default of 1 s would cap a worker at a few tasks a second.
        "polling_interval": 0.05,
    }
    CELERY_RESULT_BACKEND = f"file://{_results_dir}"
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Celery's Django fixup closes a task's database connections after every task unless told to
# reuse them: a fresh PostgreSQL connection per batch cost ~1 % of a worker's CPU and a backend
# start on the server (bench/pipeline.py). Each thread's connection is reused for about this many
# tasks; a connection that failed is closed by the task's own error path (engine, tasks.py).
CELERY_DB_REUSE_MAX = env_int("CELERY_DB_REUSE_MAX", 100, minimum=1)
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_RESULT_EXPIRES = 3600
CELERY_TASK_SOFT_TIME_LIMIT = env_int("CELERY_TASK_SOFT_TIME_LIMIT", 600, minimum=1)
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 660, minimum=1)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_DEFAULT_QUEUE = env_str("CELERY_TASK_DEFAULT_QUEUE", "celery")
# The sweeps (benchmark.sweep_runs, benchmark.sweep_curation_jobs) re-dispatch evaluation units and
# curation targets whose lease lapsed; beat runs them, embedded in a worker (`celery worker -B`, as
# `manage.py devserver` does) or as its own process (the compose file's `beat`). An interval is
# all they need, so the schedule is kept in memory.
CELERY_BEAT_SCHEDULER = "celery.beat:Scheduler"
_SWEEP_INTERVAL_S = float(env_int("EVAL_SWEEP_INTERVAL_S", 30, minimum=1))
CELERY_BEAT_SCHEDULE = {
    "sweep-runs": {"task": "benchmark.sweep_runs", "schedule": _SWEEP_INTERVAL_S},
    "sweep-curation-jobs": {"task": "benchmark.sweep_curation_jobs", "schedule": _SWEEP_INTERVAL_S},
}

# --- Evaluation engine -----------------------------------------------------------------------
# A run's units are executed in batches (one Celery task each); a worker process keeps at most
# EVAL_MAX_CALLS_IN_FLIGHT provider calls in flight at once, across all its batches.
EVAL_BATCH_SIZE = env_int("EVAL_BATCH_SIZE", 32, minimum=1)
EVAL_MAX_CALLS_IN_FLIGHT = env_int("EVAL_MAX_CALLS_IN_FLIGHT", 64, minimum=1)
# Batches a worker process runs at once (its Celery threads, unless `--concurrency` is given).
# A batch of N units has at most about N calls in flight (a unit's reply comes before its
# judging), and fewer at its tail and while the next batch is claimed; so a process needs
# EVAL_MAX_CALLS_IN_FLIGHT / EVAL_BATCH_SIZE batches to fill its slots, and runs twice that,
# the others' calls queueing for the slots (bench/pipeline.py: 2 batches at 64 in flight
# left a third of the slots idle).
CELERY_WORKER_CONCURRENCY = env_int(
    "CELERY_WORKER_CONCURRENCY", 2 * -(-EVAL_MAX_CALLS_IN_FLIGHT // EVAL_BATCH_SIZE), minimum=1
)

# --- Curation jobs ---------------------------------------------------------------------------
# A curation target's task refreshes its heartbeat at every turn and before every provider call;
# a heartbeat older than this means its worker died, and the target is taken over (by the sweep,
# or by its task delivered again). Keep it above the longest single call with its retries.
CURATION_LEASE_S = env_int("CURATION_LEASE_S", 900, minimum=1)

# Environment variables an endpoint may name as its API key, besides any name ending in
# _API_KEY; the workbench's own secrets are refused even if listed (benchmark/providers/keys.py).
PROACTBENCH_API_KEY_ENV_ALLOWED = env_list("PROACTBENCH_API_KEY_ENV_ALLOWED", [])

# --- Input limits (every import: corpus, results, studies, scores; admin and command line) ---
# One record (a JSON Lines line, a CSV row) longer than this is refused with its line number,
# before it is read into memory; a file larger than PROACTBENCH_MAX_FILE_BYTES is refused
# before its first line is parsed. docs/corpus-format.md lists them.
PROACTBENCH_MAX_RECORD_BYTES = env_int("PROACTBENCH_MAX_RECORD_BYTES", 8 * 1024 * 1024, minimum=1)
PROACTBENCH_MAX_FILE_BYTES = env_int("PROACTBENCH_MAX_FILE_BYTES", 256 * 1024 * 1024, minimum=1)
# A scores CSV (stats, external benchmarks) is a few lines per model: read whole, so small.
PROACTBENCH_MAX_SCORES_FILE_BYTES = env_int(
    "PROACTBENCH_MAX_SCORES_FILE_BYTES", 2 * 1024 * 1024, minimum=1
)
# JSON nested deeper than this (lists/objects; the release's records nest 6 levels) is refused:
# deeper, the code that walks a record could exhaust Python's recursion limit.
PROACTBENCH_MAX_JSON_DEPTH = env_int("PROACTBENCH_MAX_JSON_DEPTH", 64, minimum=1)
# Evidence grading (imported results) and highlighting look for a quote in at most this many of
# a reply's first characters; a quote only beyond it is "not found" (docs/pipeline.md).
PROACTBENCH_EVIDENCE_MAX_CHARS = env_int("PROACTBENCH_EVIDENCE_MAX_CHARS", 1_000_000, minimum=1)
# Texts longer than this (replies, turns) are shown cut, with "show all" (components/long_text).
PROACTBENCH_DISPLAY_MAX_CHARS = env_int("PROACTBENCH_DISPLAY_MAX_CHARS", 20_000, minimum=1)

# --- Caches --------------------------------------------------------------------------------
# "rendered": texts' Markdown renderings shared by the web processes (core/render_cache.py), in
# Redis at RENDER_CACHE_URL (by default REDIS_URL's), each kept RENDER_CACHE_SECONDS after it
# was stored. Without Redis nothing is shared: each process keeps its own renderings.
RENDER_CACHE_URL = env_str("RENDER_CACHE_URL", REDIS_URL)
RENDER_CACHE_SECONDS = env_int("RENDER_CACHE_SECONDS", 6 * 3600)
CACHES: dict[str, dict[str, Any]] = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    "rendered": (
        {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": RENDER_CACHE_URL,
            "TIMEOUT": RENDER_CACHE_SECONDS,
            "KEY_PREFIX": "proactbench",
            # A page waits at most this long for Redis before rendering (then not again for a
            # while: core/render_cache.py).
            "OPTIONS": {"socket_connect_timeout": 0.25, "socket_timeout": 0.25},
        }
        if RENDER_CACHE_URL
        else {"BACKEND": "django.core.cache.backends.dummy.DummyCache"}
    ),
}

# --- Auth ----------------------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# Login throttling (django-axes): after LOGIN_FAILURE_LIMIT failed logins for one username from
# one address, that pair is refused (HTTP 429) for LOGIN_LOCKOUT_MINUTES; the site's login page
# and the admin's alike. A success resets the count. Behind a proxy the address is the proxy's
# unless it passes the client's on: then it is the username alone that is throttled.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    # Django's ModelBackend, its user read in one plain statement (core/sql.py).
    "core.auth.ModelBackend",
]
AXES_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("LOGIN_LOCKOUT_MINUTES", 15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_USERNAME_CALLABLE = "core.login_throttling.throttled_username"
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_VERBOSE = False

# Django's database sessions, read in one plain statement (core/sql.py).
SESSION_ENGINE = "core.sessions"

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

# --- I18N / static -------------------------------------------------------------------------
LANGUAGE_CODE = "en-us"
TIME_ZONE = env_str("TIME_ZONE", "UTC")
# English only: without the translation machinery every template variable, form and message
# skips a language lookup (the annotation load benchmark, bench/README.md). Dates and numbers
# are formatted as before (LANGUAGE_CODE's formats).
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = env_path("STATIC_ROOT", BASE_DIR / "staticfiles")
STORAGES: dict[str, dict[str, Any]] = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "django.contrib.staticfiles.storage.StaticFilesStorage"
            if DEBUG
            else "whitenoise.storage.CompressedStaticFilesStorage"
        )
    },
}
# Turn images (multimodal turns): a private store, never served from a public URL — only the
# view that checks who may see an image reads it (docs/corpus-format.md, "Images").
# PROACTBENCH_IMAGE_STORAGE=s3 keeps them in an S3-compatible bucket instead (django-storages,
# installed separately; credentials from the usual AWS_* environment variables).
_image_storage = env_str("PROACTBENCH_IMAGE_STORAGE", "filesystem")
if _image_storage not in {"filesystem", "s3"}:
    raise ImproperlyConfigured(
        f"PROACTBENCH_IMAGE_STORAGE={_image_storage!r}: use 'filesystem' (default) or 's3'."
    )
if _image_storage == "s3":
    if not env_str("PROACTBENCH_IMAGE_S3_BUCKET"):
        raise ImproperlyConfigured(
            "PROACTBENCH_IMAGE_STORAGE=s3 needs PROACTBENCH_IMAGE_S3_BUCKET."
        )
    STORAGES["turn_images"] = {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": env_str("PROACTBENCH_IMAGE_S3_BUCKET"),
            "endpoint_url": env_str("PROACTBENCH_IMAGE_S3_ENDPOINT_URL", "") or None,
            "location": "turn-images",
            "default_acl": "private",
            "querystring_auth": True,
            "file_overwrite": False,
        },
    }
else:
    STORAGES["turn_images"] = {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": VAR_DIR / "turn-images", "base_url": "/no-public-url/"},
    }
# An image larger than this (bytes, as stored) or with more pixels (width × height: Pillow's
# decompression-bomb guard, checked before the pixels are decoded) is refused, as is a turn
# with more images; so is any type but PNG, JPEG, WebP and GIF.
PROACTBENCH_IMAGE_MAX_BYTES = env_int("PROACTBENCH_IMAGE_MAX_BYTES", 5 * 1024 * 1024, minimum=1)
PROACTBENCH_IMAGE_MAX_PIXELS = env_int("PROACTBENCH_IMAGE_MAX_PIXELS", 25_000_000, minimum=1)
PROACTBENCH_IMAGE_MAX_PER_TURN = env_int("PROACTBENCH_IMAGE_MAX_PER_TURN", 8, minimum=1)
# Uploads above this size are streamed to a temporary file rather than held in memory.
FILE_UPLOAD_MAX_MEMORY_SIZE = 2_621_440
DATA_UPLOAD_MAX_MEMORY_SIZE = 10_485_760

# --- Security (production values unless DEBUG) ----------------------------------------------
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", not DEBUG)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", not DEBUG)
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", False)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0 if DEBUG else 31_536_000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", not DEBUG)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
# The error report (the DEBUG page, the error e-mails) masks URL passwords (DATABASE_URL,
# REDIS_URL, broker URLs) in settings and the environment as well as secret-named settings.
DEFAULT_EXCEPTION_REPORTER_FILTER = "core.errors.ExceptionReporterFilter"
DEFAULT_EXCEPTION_REPORTER = "core.errors.ExceptionReporter"  # and what is left in the text
if env_bool("BEHIND_TLS_PROXY", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# --- REST API ------------------------------------------------------------------------------
# A token (``manage.py drf_create_token USER``) for scripts, the session for the browser; each
# view states who may read it (researchers and admins). Token first, so that a request without
# credentials gets 401 with ``WWW-Authenticate: Token``.
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "ProactBench Workbench API",
    "DESCRIPTION": "Statistics tables (JSON or CSV) and raw exports for researchers.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI from the sidecar package: nothing is fetched from a CDN. (Not Redoc: its page
    # loads Google Fonts.)
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    # One statistics operation per registered table, though one route serves them all.
    "PREPROCESSING_HOOKS": ["stats.api.table_operations"],
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    # One line per HTTP request to a model provider is noise at INFO; failures still show.
    # (django-axes logs every successful login's reset of its counter at INFO.)
    "loggers": {name: {"level": "WARNING"} for name in ("httpx", "httpx2", "httpcore", "axes")},
}
