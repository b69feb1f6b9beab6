"""Launching a run that would evaluate nothing is refused, saying why and what to choose (the
admin's form and buttons, ``run_eval``), instead of ending at once as "done, 0 / 0 units"; and
the run page's buttons follow the run's state as the page polls it."""

import io
import re

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from benchmark.corpus.importer import corpus_import
from benchmark.evaluation import runs
from benchmark.models import (
    Dialogue,
    DialogueStatus,
    EvaluationRun,
    EvaluationUnit,
    ModelEndpoint,
    RunAuditEvent,
    Trigger,
)
from tests.factories import jsonl_bytes, records_for, stream

pytestmark = pytest.mark.django_db

BUTTON = re.compile(r'<button class="button" data-action="(\w+)"( disabled)?>')


@pytest.fixture
def endpoints():
    """Two dialogues (drafts, as imported) and replay endpoints: nothing is called anywhere."""
    corpus_import(stream=stream(jsonl_bytes(records_for(2))))
    return [
        ModelEndpoint.objects.create(
            name=name, display_name=name.upper(), provider="replay", model_name=name
        )
        for name in ("m", "j")
    ]


def _add_run(client, endpoints, dialogues=()):
    model, judge = endpoints
    return client.post(
        reverse("admin:benchmark_evaluationrun_add"),
        {
            "name": "admin run",
            "dialogues": [d.pk for d in dialogues],
            "endpoints": [model.pk],
            "judges": [judge.pk],
            "primary_judge": judge.pk,
            "conditions": ["vanilla"],
            "samples": 1,
            "use_cache": "on",
            "lease_seconds": 900,
            "notes": "",
        },
    )


def _press(client, run, action):
    return client.post(
        reverse("admin:benchmark_evaluationrun_action", args=[run.pk, action]), follow=True
    )


# --- the admin ------------------------------------------------------------------------------


def test_a_run_with_the_default_dialogues_and_none_accepted_is_refused_on_the_field(
    client_for, admin_user, endpoints
):
    response = _add_run(client_for(admin_user), endpoints)

    assert response.status_code == 200
    assert response.context["adminform"].form.errors["dialogues"] == [
        "No accepted dialogues: accept some in Dialogues, or choose dialogues here."
    ]
    assert not EvaluationRun.objects.exists()


def test_a_run_with_the_default_dialogues_evaluates_the_accepted_ones(
    client_for, admin_user, endpoints
):
    accepted = Dialogue.objects.order_by("pk").first()
    Dialogue.objects.filter(pk=accepted.pk).update(status=DialogueStatus.ACCEPTED)

    assert _add_run(client_for(admin_user), endpoints).status_code == 302
    assert list(EvaluationRun.objects.get().dialogues.all()) == [accepted]


def test_launching_a_run_with_no_dialogues_is_refused_and_says_why(
    client_for, admin_user, endpoints, django_capture_on_commit_callbacks
):
    model, judge = endpoints
    run = runs.run_create(name="empty", endpoints=[model], judges=[judge])  # none accepted
    client = client_for(admin_user)

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        page = _press(client, run, "launch").content.decode()
        listed = client.post(
            reverse("admin:benchmark_evaluationrun_changelist"),
            {"action": "launch_runs", "_selected_action": [run.pk]},
            follow=True,
        ).content.decode()

    refusal = (
        "Empty: not launched: the run has no dialogues, so there is nothing to evaluate: "
        "choose some on the run."
    )
    assert refusal in page and refusal in listed
    assert "Launching" not in page + listed
    assert callbacks == []
    run.refresh_from_db()
    assert run.status == "queued" and not run.units.exists()
    assert not RunAuditEvent.objects.exists()


def test_launching_a_run_whose_dialogues_have_no_triggers_is_refused(
    client_for, admin_user, endpoints
):
    model, judge = endpoints
    run = runs.run_create(
        name="no triggers", endpoints=[model], judges=[judge], dialogues=Dialogue.objects.all()
    )
    Trigger.objects.all().delete()

    for action in ("launch", "resume"):  # resuming a queued run launches it
        page = _press(client_for(admin_user), run, action).content.decode()
        assert "the run&#x27;s dialogues have no trigger turns" in page
    run.refresh_from_db()
    assert run.status == "queued"


# --- run_eval ---------------------------------------------------------------------------------


def _run_eval(*args):
    call_command(
        "run_eval",
        "--name",
        "cli",
        "--models",
        "m",
        "--judges",
        "j",
        "--no-wait",
        *args,
        stdout=io.StringIO(),
        stderr=io.StringIO(),
    )


def test_run_eval_with_the_default_dialogues_and_none_accepted_says_what_to_choose(endpoints):
    with pytest.raises(CommandError) as caught:
        _run_eval()

    assert str(caught.value) == (
        "No accepted dialogues: accept some in Dialogues, or choose dialogues with "
        "--dialogues all or --dialogues ID,ID (unique_id_eval values)."
    )
    assert not EvaluationRun.objects.exists()


def test_run_eval_keeps_no_run_that_would_evaluate_nothing(endpoints):
    Trigger.objects.all().delete()

    with pytest.raises(CommandError, match="Not launched: the run's dialogues have no trigger"):
        _run_eval("--dialogues", "all")

    assert not EvaluationRun.objects.exists()


# --- the buttons follow the run's state -------------------------------------------------------


def _run_in(endpoints, status, unit_states=()):
    model, judge = endpoints
    run = runs.run_create(
        name=f"run {status}", endpoints=[model], judges=[judge], dialogues=Dialogue.objects.all()
    )
    runs.run_units_create(run=run)
    units = list(run.units.order_by("pk"))
    for unit, state in zip(units, unit_states, strict=False):
        EvaluationUnit.objects.filter(pk=unit.pk).update(state=state)
    EvaluationRun.objects.filter(pk=run.pk).update(status=status)
    return run


def _enabled(html: str) -> set[str]:
    buttons = BUTTON.findall(html)
    assert [action for action, _ in buttons] == ["launch", "cancel", "resume", "retry"]
    return {action for action, disabled in buttons if not disabled}


@pytest.mark.parametrize(
    ("status", "unit_states", "enabled"),
    [
        ("queued", (), {"launch", "cancel"}),
        ("running", ("done", "running"), {"cancel", "resume"}),
        ("cancelling", ("running",), {"resume"}),
        ("cancelled", ("done", "error"), {"resume", "retry"}),
        ("done", ("done",) * 6, set()),
        ("done", ("done",) * 5 + ("error",), {"retry"}),
        ("failed", (), {"resume"}),
    ],
)
def test_the_polled_progress_carries_the_buttons_of_the_run_s_state(
    client_for, admin_user, endpoints, status, unit_states, enabled
):
    run = _run_in(endpoints, status, unit_states)
    client = client_for(admin_user)

    polled = client.get(
        reverse("admin:benchmark_evaluationrun_progress", args=[run.pk]), HTTP_HX_REQUEST="true"
    ).content.decode()
    page = client.get(reverse("admin:benchmark_evaluationrun_change", args=[run.pk]))

    assert '<li id="run-actions" hx-swap-oob="true">' in polled
    assert _enabled(polled) == enabled
    assert _enabled(page.content.decode()) == enabled


def test_the_buttons_change_with_the_state_between_two_polls(client_for, admin_user, endpoints):
    run = _run_in(endpoints, "queued")
    client = client_for(admin_user)
    url = reverse("admin:benchmark_evaluationrun_progress", args=[run.pk])
    assert _enabled(client.get(url).content.decode()) == {"launch", "cancel"}

    runs.run_cancel(run_id=run.pk)

    assert _enabled(client.get(url).content.decode()) == {"resume"}
