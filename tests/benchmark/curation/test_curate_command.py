"""``manage.py curate`` end to end, with scripted providers behind a stand-in provider factory."""

import re
import sys
import types
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from benchmark.curation.tasks import curate_dialogue_task
from benchmark.models import Dialogue, ModelEndpoint
from benchmark.providers.base import ProviderError
from tests.benchmark.curation import scripted

pytestmark = pytest.mark.django_db

OTHER_PERSONA = "decaf000decaf000decaf000decaf000"


@pytest.fixture
def factory(monkeypatch):
    """Stands in for benchmark.providers.factory: a scripted provider per endpoint, whose script
    repeats so that one provider serves several dialogues. Returns the providers handed out."""
    handed_out: list[scripted.ScriptedProvider] = []
    scripts = {"planner-ep": "PLANNER", "user-ep": "USER", "assistant-ep": "ASSISTANT"}

    def provider_for(endpoint: ModelEndpoint) -> scripted.ScriptedProvider:
        script = getattr(scripted, scripts[endpoint.name])  # read late: tests may swap one
        provider = scripted.ScriptedProvider(script * 3, name=endpoint.name)
        handed_out.append(provider)
        return provider

    module = types.ModuleType("benchmark.providers.factory")
    module.provider_for = provider_for  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "benchmark.providers.factory", module)
    return handed_out


@pytest.fixture
def corpus():
    scripted.make_scenario()
    scripted.make_scenario(persona_uuid=OTHER_PERSONA)
    scripted.make_endpoints()


ENDPOINTS = ["--planner", "planner-ep", "--user-agent", "user-ep", "--assistant", "assistant-ep"]


def curate(*args: str) -> str:
    out = StringIO()
    call_command("curate", *args, stdout=out)
    return out.getvalue()


def test_curates_and_prints_the_new_dialogue(corpus, factory):
    out = curate(
        "--scenario", "TEST_PROFESSIONAL_01", "--persona", scripted.PERSONA_UUID,
        "--style", "12", *ENDPOINTS,
    )  # fmt: skip
    dialogue = Dialogue.objects.get()
    assert dialogue.persona.external_id == scripted.PERSONA_UUID
    assert dialogue.status == "draft"
    assert f"Dialogue {dialogue.id}: {dialogue.unique_id_eval} (8 turns; triggers " in out
    assert "triggers EMERGENT 1, CRITICAL 1, RECOVERY 1)" in out
    assert "Curated 1 of 1 dialogue(s) as drafts; tokens planner " in out
    assert [p.name for p in factory] == ["planner-ep", "user-ep", "assistant-ep"]


def test_count_picks_personas_without_a_dialogue_in_this_style(corpus, factory):
    curate("--scenario", "TEST_PROFESSIONAL_01", "--style", "12", "--count", "2", *ENDPOINTS)
    assert len(factory) == 3  # one provider per agent, shared by both dialogues
    assert sorted(Dialogue.objects.values_list("uuid", flat=True)) == sorted(
        [scripted.PERSONA_UUID, OTHER_PERSONA]
    )
    with pytest.raises(CommandError, match="only 0 of the 2 scenario\\(s\\)"):
        curate("--scenario", "TEST_PROFESSIONAL_01", "--style", "12", *ENDPOINTS)


def test_a_failed_curation_is_reported_and_saves_nothing(corpus, monkeypatch, factory):
    monkeypatch.setattr(scripted, "PLANNER", ["not json"] * 4)
    with pytest.raises(CommandError) as caught:
        curate("--scenario", "TEST_PROFESSIONAL_01", "--style", "12", *ENDPOINTS)
    assert "1 of 1 curation(s) failed" in str(caught.value)
    assert "turn 1: the Planner gave no acceptable decision in 4 attempt(s)" in str(caught.value)
    assert not Dialogue.objects.exists()


def test_enqueue_queues_one_task_per_dialogue(corpus, monkeypatch):
    queued = []

    def delay(*args):
        queued.append(args)
        return types.SimpleNamespace(id=f"task-{len(queued)}")

    monkeypatch.setattr(curate_dialogue_task, "delay", delay)
    out = curate(
        "--scenario", "TEST_PROFESSIONAL_01", "--style", "12", "--count", "2", "--enqueue",
        *ENDPOINTS,
    )  # fmt: skip
    assert len(queued) == 2
    planner = ModelEndpoint.objects.get(name="planner-ep")
    assert all(args[2] == planner.id for args in queued)
    assert "as task task-2" in out
    assert "Queued 2 curation task(s)." in out
    assert not Dialogue.objects.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--scenario", "NOPE", "--style", "12"], "Unknown scenario 'NOPE'."),
        (["--scenario", "TEST_PROFESSIONAL_01", "--style", "25"], "Unknown style 25"),
        (
            ["--scenario", "TEST_PROFESSIONAL_01", "--style", "12", "--persona", "ghost"],
            "Unknown persona 'ghost'.",
        ),
        (
            ["--scenario", "TEST_PROFESSIONAL_01", "--style", "12", "--count", "0"],
            "--count must be at least 1.",
        ),
    ],
)
def test_unknown_inputs_are_clear_errors(corpus, args, message):
    with pytest.raises(CommandError, match=re.escape(message)):
        curate(*args, *ENDPOINTS)


def test_unknown_or_inactive_endpoint_is_a_clear_error(corpus):
    args = ["--scenario", "TEST_PROFESSIONAL_01", "--style", "12"]
    with pytest.raises(CommandError, match="Unknown model endpoint 'gpt-x' for --planner. Active"):
        curate(*args, "--planner", "gpt-x", *ENDPOINTS[2:])
    ModelEndpoint.objects.filter(name="user-ep").update(is_active=False)
    with pytest.raises(
        CommandError, match=r"Model endpoint 'user-ep' \(--user-agent\) is inactive"
    ):
        curate(*args, *ENDPOINTS)


def test_an_endpoint_that_cannot_work_is_a_clear_error(corpus, monkeypatch):
    def provider_for(endpoint):
        raise ProviderError(f"environment variable X_KEY is not set for endpoint {endpoint.name}")

    module = types.ModuleType("benchmark.providers.factory")
    module.provider_for = provider_for  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "benchmark.providers.factory", module)
    with pytest.raises(CommandError, match="X_KEY is not set for endpoint planner-ep"):
        curate("--scenario", "TEST_PROFESSIONAL_01", "--style", "12", *ENDPOINTS)
    assert not Dialogue.objects.exists()
