"""The curation task: ids in, one service call, retries only for transient provider errors."""

import types

import pytest

from benchmark.curation import tasks
from benchmark.curation.loop import CurationError
from benchmark.curation.services import DialogueExistsError
from benchmark.providers.base import ProviderError
from tests.benchmark.curation import scripted

pytestmark = pytest.mark.django_db


@pytest.fixture
def args():
    scenario = scripted.make_scenario()
    planner, user, assistant = scripted.make_endpoints()
    return (scenario.id, scripted.style().id, planner.id, user.id, assistant.id)


@pytest.fixture
def service(monkeypatch):
    """Replaces the service with a script of outcomes (an exception to raise, or a dialogue id)."""
    calls = []

    def install(*outcomes):
        def dialogue_curate(**kwargs):
            calls.append(kwargs)
            outcome = outcomes[len(calls) - 1]
            if isinstance(outcome, Exception):
                raise outcome
            return types.SimpleNamespace(id=outcome)

        monkeypatch.setattr(tasks, "dialogue_curate", dialogue_curate)
        return calls

    return install


def test_the_task_loads_by_id_and_returns_the_dialogue_id(args, service):
    calls = service(41)
    assert tasks.curate_dialogue_task.apply(args=args).get() == 41
    (call,) = calls
    assert call["spec"].unique_id_eval.endswith(f"__style12__{scripted.PERSONA_UUID}")
    assert call["planner_endpoint"].name == "planner-ep"
    assert call["user_endpoint"].name == "user-ep"
    assert call["assistant_endpoint"].name == "assistant-ep"


def test_retryable_provider_errors_are_retried(args, service):
    calls = service(ProviderError("rate limited", status=429, retryable=True), 7)
    assert tasks.curate_dialogue_task.apply(args=args).get() == 7
    assert len(calls) == 2


@pytest.mark.parametrize(
    "error",
    [ProviderError("bad key", status=401), CurationError("turn 2: the Planner gave up")],
)
def test_other_failures_are_not_retried(args, service, error):
    calls = service(error, 7)
    result = tasks.curate_dialogue_task.apply(args=args)
    assert result.failed()
    assert result.result is error
    assert len(calls) == 1


def test_an_existing_dialogue_is_returned_without_curating_again(args, service):
    service(DialogueExistsError("BP_X__style12__u", 5))
    assert tasks.curate_dialogue_task.apply(args=args).get() == 5


def test_backoff_grows_and_is_capped():
    assert all(0 <= tasks.retry_countdown(0) <= 30 for _ in range(50))
    assert all(0 <= tasks.retry_countdown(2) <= 120 for _ in range(50))
    assert all(tasks.retry_countdown(20) <= tasks.MAX_BACKOFF_S for _ in range(50))
    assert len({round(tasks.retry_countdown(3), 6) for _ in range(20)}) > 1
