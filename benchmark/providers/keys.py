"""Which environment variables an endpoint may name as its API key.

An endpoint's key is sent, as ``Authorization`` or ``x-api-key``, to the endpoint's base URL,
which whoever may edit endpoints can point at their own server. So the variable an endpoint
names is a choice of what to send anywhere, and only provider keys may be chosen:

- a name ending in ``_API_KEY`` (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``), or one listed in
  ``settings.PROACTBENCH_API_KEY_ENV_ALLOWED`` (for a vendor whose variable is named otherwise,
  e.g. ``HF_TOKEN``);
- never one of the workbench's own secrets (``APP_SECRETS``), even if it is listed: those would
  give away the database, the broker or the session signing key.

``ModelEndpoint.clean`` shows the refusal on the form's field, and the factory refuses again at
call time, so that an endpoint saved before this rule, or written by the ORM, a fixture or an
import, still cannot send such a variable. A leaf module: ``benchmark.models`` imports it.
"""

from __future__ import annotations

import re

from django.conf import settings

ENV_NAME_PATTERN = r"^[A-Z_][A-Z0-9_]*$"
"""What an environment variable's name looks like (the field's validator)."""

ALLOWED_SUFFIX = "_API_KEY"

APP_SECRETS = frozenset(
    {
        "SECRET_KEY",
        "DATABASE_URL",
        "REDIS_URL",
        "CELERY_BROKER_URL",
        "CELERY_RESULT_BACKEND",
        "PGPASSWORD",
    }
)
"""The variables that hold the workbench's own credentials (settings.py reads the first three;
Celery and libpq read the others on their own)."""


def api_key_env_refusal(name: str) -> str | None:
    """Why ``name`` may not be an endpoint's key variable, or ``None`` if it may. The message
    names the variable, so it is only asked about a string that is a variable's name (a key
    pasted into the field must not be echoed back)."""
    if name in APP_SECRETS:
        return f"{name} holds one of the workbench's own secrets: it is never sent to a provider."
    if name.endswith(ALLOWED_SUFFIX) or name in settings.PROACTBENCH_API_KEY_ENV_ALLOWED:
        return None
    return (
        f"{name} is not an allowed key variable: use a name ending in {ALLOWED_SUFFIX}, "
        "or list it in PROACTBENCH_API_KEY_ENV_ALLOWED."
    )


def is_env_name(value: str) -> bool:
    return re.fullmatch(ENV_NAME_PATTERN, value) is not None
