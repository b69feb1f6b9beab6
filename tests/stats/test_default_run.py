"""The run the dashboard opens on, and that the statistics API and export_stats read when none
is named: the pinned run, else the newest finished run, else the newest run."""

import io

import pytest
from django.core.management import call_command
from django.db import IntegrityError, transaction
from django.urls import reverse

from benchmark.evaluation.demo_run import DEMO_IMAGE_RUN_NAME, DEMO_RUN_NAME
from benchmark.evaluation.runs import run_pin
from benchmark.models import EvaluationRun, RunStatus
from stats import selectors

DASHBOARD = reverse("stats:dashboard")


def _run(name: str, status: str = RunStatus.DONE) -> EvaluationRun:
    return EvaluationRun.objects.create(name=name, status=status)


def test_the_pinned_run_else_the_newest_finished_else_the_newest(db):
    assert selectors.default_run() is None
    queued = _run("queued", RunStatus.QUEUED)
    assert selectors.default_run() == queued  # no finished run: the newest
    older, newer = _run("older"), _run("newer")
    _run("running", RunStatus.RUNNING)  # newer still, but not finished
    assert selectors.default_run() == newer
    run_pin(run_id=older.pk)
    assert selectors.default_run() == older
    run_pin(run_id=queued.pk)  # a pin wins whatever the run's state, and moves
    assert selectors.default_run() == queued
    assert list(EvaluationRun.objects.filter(pinned=True)) == [queued]
    run_pin(run_id=queued.pk)  # idempotent
    assert list(EvaluationRun.objects.filter(pinned=True)) == [queued]
    run_pin(run_id=None)
    assert selectors.default_run() == newer
    assert not EvaluationRun.objects.filter(pinned=True).exists()


def test_two_runs_are_never_pinned_at_once(db):
    first, second = _run("first"), _run("second")
    run_pin(run_id=first.pk)
    with pytest.raises(IntegrityError), transaction.atomic():
        EvaluationRun.objects.filter(pk=second.pk).update(pinned=True)
    assert list(EvaluationRun.objects.filter(pinned=True)) == [first]


def test_the_dashboard_opens_on_the_pinned_demo_run_then_on_the_newest_finished(
    db, client_for, researcher
):
    """load_demo pins the text demo run, so the dashboard opens on it although the photo run is
    newer; unpinned, it opens on the photo run, and a second load_demo leaves it unpinned."""
    call_command("load_demo", "--no-users", stdout=io.StringIO())
    demo = EvaluationRun.objects.get(name=DEMO_RUN_NAME)
    photos = EvaluationRun.objects.get(name=DEMO_IMAGE_RUN_NAME)
    assert demo.pinned and not photos.pinned
    assert (photos.created_at, photos.pk) > (demo.created_at, demo.pk)
    client = client_for(researcher)
    assert f"Run {demo.pk} ·".encode() in client.get(DASHBOARD).content
    run_pin(run_id=None)
    assert f"Run {photos.pk} ·".encode() in client.get(DASHBOARD).content
    call_command("load_demo", "--no-users", stdout=io.StringIO())
    assert not EvaluationRun.objects.filter(pinned=True).exists()
    # The API's default run is the same.
    response = client.get(reverse("stats_api:table", args=["leaderboard"]))
    assert response.json()["params"]["run"] == photos.pk
