"""Schemathesis against the project's own OpenAPI schema (drf-spectacular, /api/v1/schema/),
in-process through the WSGI application (no server): every operation, with generated query
parameters (valid and not), as a researcher with a token. No 5xx, and every response conforms
to the schema — status code, content type, headers and body.

One default check is left out, positive_data_acceptance ("schema-valid data gets a 2xx"): two
answers are a documented 400 for data no static schema can rule out — a verdict source that
names no judge of the chosen run, and the human-study tables while no annotation study exists.
"""

import pytest
import schemathesis
from django.core import signals
from django.db import close_old_connections
from hypothesis import HealthCheck, given, settings
from rest_framework.authtoken.models import Token

from proactweb.wsgi import application

pytestmark = pytest.mark.django_db

EXAMPLES_PER_OPERATION = 25


@pytest.fixture
def token_headers(demo_run, researcher):
    token = Token.objects.create(user=researcher)
    return {"Authorization": f"Token {token.key}"}


@pytest.fixture
def wsgi_keeps_the_test_connection():
    """As Django's test client does: a request through the WSGI handler would otherwise close
    the test's database connection (and with it the test's transaction) when it finishes."""
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


def test_every_api_operation_conforms_to_the_schema(token_headers, wsgi_keeps_the_test_connection):
    schema = schemathesis.openapi.from_wsgi("/api/v1/schema/", application, headers=token_headers)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 11, [op.label for op in operations]  # 10 tables + exports
    failures: dict[str, str] = {}
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(
            max_examples=EXAMPLES_PER_OPERATION,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def conforms(case):
            case.call_and_validate(
                headers=token_headers,
                excluded_checks=[schemathesis.checks.positive_data_acceptance],
            )

        try:
            conforms()
        except (Exception, BaseExceptionGroup) as exc:  # one report: each operation's failure
            failures[operation.label] = str(exc)[:1500]
    assert not failures, "\n\n".join(f"{label}:\n{text}" for label, text in failures.items())
