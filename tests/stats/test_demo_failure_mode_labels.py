"""The demo's closed failure-mode study: after ``load_demo`` the classifier-vs-people table has
data, and its figures equal what the recordings say, computed here on their own."""

import io
import json
import re
from collections import Counter
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.urls import reverse

from annotation.demo import LABELLED_STUDY
from annotation.models import Answer, Rater, Study
from annotation.services.assignments import assignment_next
from benchmark.evaluation.demo_run import DEMO_CLASSIFIER
from benchmark.models import EvaluationRun
from stats import tables
from stats.compute.failure_modes import ALL
from stats.selectors import TableRequest

pytestmark = pytest.mark.django_db

DEMO_DATA = Path(__file__).resolve().parents[2] / "benchmark" / "demo_data"
VS = "failure-modes-llm-vs-human"


def _lines(name: str) -> list[dict]:
    return [json.loads(line) for line in (DEMO_DATA / name).read_text().splitlines()]


def _reference() -> tuple[int, int]:
    """(replies with a majority, of them where the classifier names the majority label)."""
    classifier = {
        (r["unique_id_eval"], r["turn"], r["model"]): r["failure_mode"]
        for r in _lines("failure_modes.jsonl")
        if r["condition"] == "vanilla"
    }
    by_reply: dict[tuple, list[str]] = {}
    for r in _lines("failure_mode_labels.jsonl"):
        by_reply.setdefault((r["unique_id_eval"], r["turn"], r["model"]), []).append(
            r["failure_mode"]
        )
    n = agree = 0
    for reply, labels in by_reply.items():
        (top, count), *rest = Counter(labels).most_common()
        if rest and rest[0][1] == count:
            continue  # tied: no majority
        n += 1
        agree += classifier[reply] == top
    return n, agree


@pytest.fixture
def demo(db):
    call_command("load_demo", stdout=io.StringIO())
    return EvaluationRun.objects.get(failure_mode_classifier__name=DEMO_CLASSIFIER)


def test_the_committed_labels_are_what_the_script_writes():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "make_failure_mode_labels", DEMO_DATA / "make_failure_mode_labels.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.records() == _lines("failure_mode_labels.jsonl")


def test_after_load_demo_the_vs_human_table_has_the_recordings_figures(demo):
    study = Study.objects.get(name=LABELLED_STUDY)
    assert study.status == "closed"
    table = tables.build(VS, TableRequest(run=demo, study=study.pk))
    overall = next(r for r in table.rows if r["category"] == ALL)
    n, agree = _reference()
    assert 0 < agree < n
    assert overall["n"] == n
    assert overall["accuracy"] == pytest.approx(agree / n)
    assert 0 < overall["accuracy"] < 1


def test_load_demo_twice_writes_nothing_new(demo):
    counts = (Study.objects.count(), Answer.objects.count(), get_user_model().objects.count())
    call_command("load_demo", stdout=io.StringIO())
    assert (
        Study.objects.count(),
        Answer.objects.count(),
        get_user_model().objects.count(),
    ) == counts


def test_the_annotators_keep_their_own_study_and_never_see_the_closed_one(demo, client):
    raters = get_user_model().objects.filter(username__startswith="demo-rater-")
    assert raters.count() == 2 and not any(u.is_active or u.has_usable_password() for u in raters)
    annotator = get_user_model().objects.get(username="annotator1")
    assert not Rater.objects.filter(study__name=LABELLED_STUDY, user=annotator).exists()
    open_study = Study.objects.get(run=demo, kind="failure_mode", status="open")
    assert assignment_next(rater=Rater.objects.get(study=open_study, user=annotator)) is not None
    client.force_login(annotator)
    home = client.get(reverse("annotation:home")).content.decode()
    assert open_study.name in home and LABELLED_STUDY not in home


def test_the_dashboard_shows_the_closed_studys_agreement_beside_the_distribution(
    demo, client_for, researcher
):
    study = Study.objects.get(name=LABELLED_STUDY)
    html = (
        client_for(researcher).get(reverse("stats:dashboard"), {"study": study.pk}).content.decode()
    )
    sections = re.findall(r'<section class="card" id="([a-z-]+)"', html)
    assert "failure-modes-llm" in sections and VS in sections
    vs = html.split(f'id="{VS}"', 1)[1].split("</section>", 1)[0]
    n, agree = _reference()
    assert f"{agree / n:.3f}" in vs or f"{100 * agree / n:.1f}" in vs
