"""Each endpoint's calls and the limits in force, as the run's and the curation job's pages show
them (benchmark/providers/activity.py): the counts from the recorded calls, the configured
limits from the endpoint, the learnt ones and the calls in flight from the shared limiter in a
real Redis, and what the page says when it cannot read them."""

import uuid
from datetime import timedelta
from decimal import Decimal

import pytest
from django.urls import reverse
from django.utils import timezone

from benchmark.evaluation.runs import run_endpoint_activity, run_progress
from benchmark.models import CallPurpose, EvaluationRun, ModelEndpoint, ProviderCall
from benchmark.providers.activity import (
    CONFIGURED,
    LEARNT,
    CallCounts,
    Limit,
    activity_lines,
    endpoint_activity,
)
from benchmark.providers.factory import provider_for
from tests.benchmark.providers.conftest import REDIS_URL, hello
from tests.fakes.vendor_server import FakeVendorServer, RateLimits

pytestmark = pytest.mark.django_db


def _endpoint(name: str, provider: str = "openai-compatible", **params) -> ModelEndpoint:
    return ModelEndpoint.objects.create(
        name=name,
        display_name=name.upper(),
        provider=provider,
        model_name=name,
        base_url="http://127.0.0.1:9/v1",
        default_params=params,
    )


def _call(run, endpoint, *, ok=True, attempts=1, latency_s=1.0, age_s=0.0):
    call = ProviderCall.objects.create(
        run=run,
        endpoint=endpoint,
        purpose=CallPurpose.REPLY,
        cache_key=uuid.uuid4().hex,
        ok=ok,
        error="" if ok else "HTTP 500",
        attempts=attempts,
        latency_s=latency_s,
        input_tokens=100,
        output_tokens=20,
        cost_usd=Decimal("0.001"),
    )
    if age_s:
        ProviderCall.objects.filter(pk=call.pk).update(
            created_at=timezone.now() - timedelta(seconds=age_s)
        )
    return call


@pytest.fixture
def no_redis(settings):
    settings.REDIS_URL = None


def test_each_endpoint_s_calls_with_their_failures_retries_pace_and_latency(no_redis):
    model, judge, idle = _endpoint("model"), _endpoint("judge"), _endpoint("idle")
    run = EvaluationRun.objects.create(name="r", primary_judge=judge)
    run.endpoints.set([model, idle])
    other_run = EvaluationRun.objects.create(name="other")
    _call(run, model, latency_s=1.0)
    _call(run, model, latency_s=3.0, attempts=3)  # answered after two 429s
    _call(run, model, ok=False, attempts=5, latency_s=0.0, age_s=120)
    _call(run, model, latency_s=2.0, age_s=90)
    _call(run, judge, latency_s=0.5)
    _call(other_run, model)  # another run's: not counted

    activity = run_endpoint_activity(run=run)

    rows = {row.endpoint.name: row for row in activity.endpoints}
    assert list(rows) == ["idle", "judge", "model"]  # by display name; idle has no call yet
    m = rows["model"].counts
    assert (m.calls, m.failed, m.retried, m.recent) == (3, 1, 2, 2)
    assert m.mean_latency_s == pytest.approx(2.0)  # of the answered calls only
    assert (m.input_tokens, m.output_tokens, m.cost_usd) == (300, 60, Decimal("0.003"))
    assert (rows["judge"].counts.calls, rows["judge"].counts.recent) == (1, 1)
    assert rows["idle"].counts == CallCounts()  # no call yet
    # The run's progress reads the same counts: its totals are theirs.
    progress = run_progress(run=run)
    assert (progress.calls, progress.input_tokens, progress.cost_usd) == (
        4,
        400,
        Decimal("0.004"),
    )


def test_an_endpoint_with_calls_that_the_run_no_longer_lists_is_shown(no_redis):
    kept, dropped = _endpoint("kept"), _endpoint("dropped")
    run = EvaluationRun.objects.create(name="r")
    run.endpoints.set([kept])
    _call(run, dropped)

    activity = run_endpoint_activity(run=run)

    rows = [(row.endpoint.name, row.counts.calls) for row in activity.endpoints]

    assert rows == [("dropped", 1), ("kept", 0)]


def test_configured_limits_are_shown_and_a_bad_one_is_named(no_redis):
    limited = _endpoint("limited", rate_limit_rpm=600, max_concurrency=4)
    broken = _endpoint("broken", rate_limit_tpm="lots")

    activity = endpoint_activity({}, [limited, broken])

    rows = {row.endpoint.name: row for row in activity.endpoints}
    assert rows["limited"].rpm == Limit(600, CONFIGURED)
    assert rows["limited"].tpm is None and rows["limited"].max_concurrency == 4
    assert rows["limited"].in_flight is None  # not known without Redis
    assert "rate_limit_tpm must be a positive whole number, not 'lots'" in (
        rows["broken"].settings_error
    )
    assert "No Redis" in activity.shared


def test_an_offline_endpoint_has_no_limits_and_needs_no_redis(no_redis):
    replay = _endpoint("replayed", provider="replay", rate_limit_rpm=5)

    activity = endpoint_activity({}, [replay])

    (row,) = activity.endpoints
    assert row.offline and row.rpm is None and row.in_flight is None
    assert activity.shared == ""  # nothing on the page would need the shared limits


def test_learnt_limits_and_calls_in_flight_come_from_the_shared_limiter(
    settings, redis_client, monkeypatch, client_for, admin_user
):
    """A real call through the OpenAI SDK to a server that sends the vendor's rate-limit
    headers: what the worker learnt is what the page reads, from Redis."""
    settings.REDIS_URL = REDIS_URL
    monkeypatch.setenv("TEST_API_KEY", "k")
    name = f"learning-{uuid.uuid4().hex[:12]}"
    with FakeVendorServer(rate_limits=RateLimits(rpm=500, tpm=2_000_000)) as server:
        endpoint = ModelEndpoint.objects.create(
            name=name,
            display_name="Learning",
            provider="openai",
            model_name="m",
            base_url=server.openai_base_url,
            api_key_env="TEST_API_KEY",
            # The tokens are configured: only the requests are learnt.
            default_params={"rate_limit_tpm": 90_000, "max_concurrency": 3},
        )
        try:
            provider = provider_for(endpoint)
            provider.complete(hello("m"))
            first, second = provider._limiter.acquire(10), provider._limiter.acquire(10)

            (row,) = endpoint_activity({}, [endpoint]).endpoints
            assert row.rpm == Limit(500, LEARNT)
            assert row.tpm == Limit(90_000, CONFIGURED)
            assert (row.in_flight, row.max_concurrency) == (2, 3)
            page = client_for(admin_user).get(
                reverse("admin:benchmark_modelendpoint_change", args=[endpoint.pk])
            )
            assert (
                "requests/min 500 (learnt), tokens/min 90000 (configured), in flight 2 of 3"
                in page.content.decode()
            )

            first.release()
            second.release()
            # A lease whose worker died and whose expiry has passed holds no slot.
            redis_client.zadd(f"proactbench:limits:{name}:leases", {"lapsed": 1})
            (row,) = endpoint_activity({}, [endpoint]).endpoints
            assert row.in_flight == 0
        finally:
            keys = list(redis_client.scan_iter(f"proactbench:limits:{name}:*"))
            if keys:
                redis_client.delete(*keys)


def test_a_redis_that_does_not_answer_is_said_and_the_counts_still_shown(settings):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    endpoint = _endpoint("unreachable", max_concurrency=2)
    run = EvaluationRun.objects.create(name="r")
    run.endpoints.set([endpoint])
    _call(run, endpoint)

    activity = run_endpoint_activity(run=run)

    (row,) = activity.endpoints
    assert row.counts.calls == 1 and row.in_flight is None and row.rpm is None
    assert activity.shared.startswith("Redis did not answer")


def test_the_run_page_shows_the_endpoints_table(client_for, admin_user, no_redis):
    model = _endpoint("model", rate_limit_rpm=60, max_concurrency=8)
    replay = _endpoint("replayed", provider="replay")
    run = EvaluationRun.objects.create(name="r")
    run.endpoints.set([model, replay])
    _call(run, model, attempts=2)
    _call(run, model, ok=False)

    html = (
        client_for(admin_user)
        .get(reverse("admin:benchmark_evaluationrun_progress", args=[run.pk]))
        .content.decode()
    )

    assert 'id="endpoint-activity"' in html
    row = html.split('data-endpoint="model"')[1].split("</tr>")[0]
    cells = [cell.split(">", 1)[1].split("</td")[0] for cell in row.split("<td")[1:]]
    # answered, failed, retried, last minute, mean latency, cost (of the answered call)
    assert cells[:6] == ["1", "1", "1", "2", "1.00 s", "$0.0010"]
    assert '60 <span class="help">configured</span>' in row and "? of 8" in row
    assert "offline: no limits apply" in html.split('data-endpoint="replayed"')[1]
    assert "No Redis (the embedded default)" in html


def test_the_commands_text_says_the_same_as_the_table(no_redis):
    model = _endpoint("model", rate_limit_rpm=60, max_concurrency=8)
    broken = _endpoint("broken", max_concurrency=0)
    replay = _endpoint("replayed", provider="replay")
    run = EvaluationRun.objects.create(name="r")
    run.endpoints.set([model, broken, replay])
    _call(run, model, attempts=2, latency_s=1.5)
    _call(run, model, ok=False)

    lines = activity_lines(run_endpoint_activity(run=run))

    assert lines == [
        "  broken: 0 answered, 0 failed, 0 retried, 0 in the last minute; endpoint broken: "
        "max_concurrency must be a positive whole number, not 0",
        "  model: 1 answered, 1 failed, 1 retried, 2 in the last minute, mean latency 1.50 s, "
        "cost $0.0010; requests/min 60 (configured), in flight ? of 8",
        "  replayed: 0 answered, 0 failed, 0 retried, 0 in the last minute; "
        "offline: no limits apply",
        "  (No Redis (the embedded default): each worker keeps its limiter to itself, so "
        "learnt limits and calls in flight are not shown here.)",
    ]


def test_the_endpoint_s_page_says_its_limits(client_for, admin_user, no_redis):
    endpoint = _endpoint("limited", rate_limit_rpm=60, max_concurrency=8)
    client = client_for(admin_user)

    html = client.get(
        reverse("admin:benchmark_modelendpoint_change", args=[endpoint.pk])
    ).content.decode()
    add = client.get(reverse("admin:benchmark_modelendpoint_add")).content.decode()

    assert "Limits in force" in html
    assert "requests/min 60 (configured), in flight ? of 8. No Redis (the embedded" in html
    assert "the rest is learnt once it is called" in add
