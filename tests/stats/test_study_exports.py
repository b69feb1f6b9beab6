"""The raw exports of the annotation app's answers: ``votes`` (every answer of every study,
undone and late ones flagged) and ``audits`` (every audit answer with its checklist). Both
round-trip through Python's csv and json modules to the values in the database, stream in
chunks from one query, filter by study (and run), and are staff-only."""

import csv
import io
import json
import math
import re
from datetime import timedelta

import pytest
from django.conf import settings
from django.urls import reverse
from django.utils import timezone

from annotation.kinds.dialogue_audit import AUDIT_CHECK_KEYS
from annotation.models import Answer, RetractionReason
from annotation.services.assignments import answer_undo, answer_verdict_reveal, assignment_next
from benchmark.models import Condition, ModelEndpoint, TriggerType
from stats import exports
from stats.exports import AUDIT_COLUMNS, VOTE_COLUMNS
from tests.stats.conftest import (
    answer,
    answer_next,
    create_study,
    exclude,
    pick_case,
    rater_of,
    set_primary_verdict,
)

pytestmark = pytest.mark.django_db

TRICKY = 'Says "no"; then, a line break\nand a quote " — ünïcödé ☕'


def _url(name, fmt, **query):
    url = reverse("stats_api:raw-export", args=[name, fmt])
    return url + ("?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else "")


def _csv_value(kind, text):
    if text == "":
        return None if kind != "str" else ""
    return {"int": int, "float": float, "bool": lambda t: t == "true", "str": str}[kind](text)


def _fetch(client, name, columns, **query):
    """The export as CSV and as JSONL, both parsed back to typed records; they must agree."""
    response = client.get(_url(name, "csv", **query))
    assert response.status_code == 200 and response.streaming
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    text = b"".join(response.streaming_content).decode("utf-8")
    assert not text.startswith("\ufeff") and text.endswith("\r\n")
    reader = csv.reader(io.StringIO(text, newline=""))
    assert next(reader) == [c.name for c in columns]
    from_csv = [
        {c.name: _csv_value(c.kind, v) for c, v in zip(columns, row, strict=True)} for row in reader
    ]
    response = client.get(_url(name, "jsonl", **query))
    assert response["Content-Type"] == "application/jsonl; charset=utf-8"
    lines = b"".join(response.streaming_content).decode("utf-8").splitlines()
    from_jsonl = [json.loads(line) for line in lines]
    # JSON keeps "" where CSV cannot tell "" from a missing string: compare modulo that.
    assert [{k: ("" if v is None else v) for k, v in r.items()} for r in from_jsonl] == [
        {k: ("" if v is None else v) for k, v in r.items()} for r in from_csv
    ]
    return from_jsonl


@pytest.fixture
def studies(study_run, make_annotators, researcher):
    """A pairwise study (k = 1, 10-minute leases) with a late answer, an undone one and a tie;
    an audit with a split settled by a third auditor; a failure-mode answer that changed the
    suggestion. ``slow`` is excluded from the pairwise study."""
    users = make_annotators(3)
    model = ModelEndpoint.objects.get(name="zephyr-secret-large")
    pairwise = create_study(
        study_run,
        "pairwise",
        users[:2],
        overlap=1,
        lease_minutes=10,
        endpoints=[model],
        trigger_type=TriggerType.RECOVERY,
    )
    slow, fast = (rater_of(pairwise, u) for u in users[:2])
    held = assignment_next(rater=slow)  # slow takes P1 and walks away
    later = timezone.now() + timedelta(minutes=11)
    answer_next(
        fast, lambda a: {**pick_case("B")(a), "note": TRICKY}, seconds=12.25, now=later
    )  # P1
    late = answer(slow, held, pick_case("A"), now=later)  # stored, retracted as lapsed
    assert late.retraction_reason == "lapsed"
    answer_next(fast, pick_case("A"), now=later)  # P2, undone
    answer_undo(rater=fast, now=later)
    answer_next(fast, pick_case("tie"), now=later)  # P2 again
    exclude(slow, researcher)

    audit = create_study(
        None,
        "dialogue_audit",
        users[:2],
        adjudicators=users[2:],
        max_items=1,
        name="Audit",
    )
    yes = {f"check_{key}": "yes" for key in AUDIT_CHECK_KEYS}
    one, two, third = (rater_of(audit, u) for u in users)
    answer_next(one, lambda a: {**yes, "decision": "pass", "note": "Fine."})
    answer_next(
        two,
        lambda a: {
            **yes,
            "check_no_rubric_leakage": "no",
            "note_no_rubric_leakage": TRICKY,
            "decision": "fail",
        },
    )
    answer_next(third, lambda a: {**yes, "decision": "fail"})

    unit = study_run.units.filter(
        endpoint=model, trigger__type=TriggerType.RECOVERY, condition=Condition.VANILLA
    ).first()
    set_primary_verdict(unit.pk, "FAIL")
    failure = create_study(
        study_run,
        "failure_mode",
        users[:1],
        overlap=1,
        endpoints=[model],
        condition=Condition.VANILLA,
    )
    labeller = rater_of(failure, users[0])

    def other_than_suggested(assignment):
        suggested = assignment.display["suggested"]["label"]
        label = "other" if suggested != "other" else "generic_closing"
        return {"label": label, "note": "None of these."}

    answer_next(labeller, other_than_suggested)
    return pairwise, audit, failure


def test_votes_round_trip_every_answer_with_its_flags(studies, client_for, researcher):
    pairwise, audit, failure = studies
    records = _fetch(client_for(researcher), "votes", VOTE_COLUMNS)
    answers = {
        a.pk: a
        for a in Answer.objects.select_related(
            "assignment__item__study",
            "assignment__item__unit__endpoint",
            "assignment__item__trigger__turn__dialogue",
            "assignment__rater__user",
        )
    }
    assert [r["answer_id"] for r in records] == sorted(answers)
    for record in records:
        answer = answers[record["answer_id"]]
        item, rater = answer.assignment.item, answer.assignment.rater
        study = item.study
        assert record["study_id"] == study.pk and record["study_kind"] == study.kind
        assert record["study_name"] == study.name and record["study_source"] == "created"
        assert record["run_id"] == study.run_id
        assert (record["item_id"], record["item_key"]) == (item.pk, item.key)
        assert record["annotator"] == rater.user.username
        assert record["rater_excluded"] is rater.excluded
        assert record["role"] == answer.assignment.role
        assert record["label"] == answer.label and record["note"] == answer.note
        assert record["confidence"] == answer.confidence
        assert record["time_on_item_s"] == answer.time_on_item_s
        assert record["submitted_at"] == answer.submitted_at.isoformat()
        assert record["retracted"] is (answer.retracted_at is not None)
        assert record["retraction_reason"] == answer.retraction_reason
        assert record["late"] is (answer.retraction_reason == RetractionReason.LAPSED)
        if item.unit_id:
            assert record["unit_id"] == item.unit_id
            assert record["model"] == item.unit.endpoint.name
            assert record["turn"] == item.trigger.turn.index
            assert record["trigger_type"] == item.trigger.type
            assert record["dialogue"] == item.trigger.turn.dialogue.unique_id_eval
        if study.kind == "pairwise":
            order = answer.display["order"]
            assert record["display_order"] == "|".join(order)
            assert record["injected_on_left"] is (order[0] == "B")
            assert record["position_chosen"] == answer.details["choice"]
            assert record["unit_b_id"] == item.unit_b_id
            assert record["condition"] == "vanilla"
        else:
            assert record["injected_on_left"] is None and record["position_chosen"] == ""
    pairs = [r for r in records if r["study_id"] == pairwise.pk]
    assert [(r["label"], r["retraction_reason"], r["late"]) for r in pairs] == [
        ("B", "", False),
        ("A", "lapsed", True),
        ("A", "undo", False),
        ("tie", "", False),
    ]
    assert pairs[0]["note"] == TRICKY and pairs[0]["time_on_item_s"] == 12.25
    assert pairs[1]["rater_excluded"] is True
    (labelled,) = [r for r in records if r["study_id"] == failure.pk]
    assert labelled["suggestion_changed"] is True and labelled["suggested"]
    assert labelled["suggested"] != labelled["label"]
    audits = [r for r in records if r["study_id"] == audit.pk]
    assert [(r["label"], r["role"]) for r in audits] == [
        ("pass", "annotate"),
        ("fail", "annotate"),
        ("fail", "adjudicate"),
    ]


def test_audits_round_trip_with_their_checklist(studies, client_for, researcher):
    _, audit, _ = studies
    records = _fetch(client_for(researcher), "audits", AUDIT_COLUMNS)
    assert [(r["decision"], r["role"]) for r in records] == [
        ("pass", "annotate"),
        ("fail", "annotate"),
        ("fail", "adjudicate"),
    ]
    second = records[1]
    assert second["no_rubric_leakage_ok"] is False
    assert second["no_rubric_leakage_note"] == TRICKY
    assert all(second[f"{key}_ok"] for key in AUDIT_CHECK_KEYS if key != "no_rubric_leakage")
    assert {r["item_outcome"] for r in records} == {"fail"}
    assert {r["dialogue_status"] for r in records} == {"rejected"}
    assert {r["study_id"] for r in records} == {audit.pk}
    item = audit.items.get()
    assert {r["dialogue"] for r in records} == {item.dialogue.unique_id_eval}


def test_exports_filter_by_study_and_run(studies, study_run, client_for, researcher):
    pairwise, audit, failure = studies
    client = client_for(researcher)
    only_pairs = _fetch(client, "votes", VOTE_COLUMNS, study=pairwise.pk)
    assert len(only_pairs) == 4 and {r["study_id"] for r in only_pairs} == {pairwise.pk}
    of_run = _fetch(client, "votes", VOTE_COLUMNS, run=study_run.pk)
    assert {r["study_id"] for r in of_run} == {pairwise.pk, failure.pk}  # audits have no run
    assert _fetch(client, "audits", AUDIT_COLUMNS, study=pairwise.pk) == []
    response = client.get(_url("audits", "csv", run=study_run.pk))
    assert response.status_code == 400 and "cannot be limited by run" in response.json()["detail"]
    assert client.get(_url("judgments", "csv", study=pairwise.pk)).status_code == 400
    assert client.get(_url("votes", "csv", study="x")).status_code == 400
    # Whatever renderer the client picks (?format=any reaches the streaming view), an error is
    # JSON and says so (Schemathesis found "*/*").
    response = client.get(_url("audits", "jsonl", run=study_run.pk, format="any"))
    assert response.status_code == 400 and response["Content-Type"] == "application/json"
    assert "cannot be limited by run" in response.json()["detail"]


def test_votes_stream_in_chunks_from_one_query(
    studies, client_for, researcher, monkeypatch, django_assert_num_queries
):
    monkeypatch.setattr(exports, "CHUNK_ROWS", 2)
    response = client_for(researcher).get(_url("votes", "csv"))
    with django_assert_num_queries(1):  # every row from one query, however many there are
        chunks = list(response.streaming_content)
    total = Answer.objects.count()
    assert len(chunks) == math.ceil(total / 2)  # the header rides with the first rows
    assert b"".join(chunks).count(b"\r\n") >= total + 1


@pytest.mark.parametrize("name", ["votes", "audits"])
def test_annotators_and_outsiders_cannot_reach_the_exports(
    studies, client, client_for, outsider, name
):
    pairwise, _, _ = studies
    assert client.get(_url(name, "csv")).status_code in (401, 403)
    for user in (pairwise.raters.first().user, outsider):
        assert client_for(user).get(_url(name, "csv")).status_code == 404
        assert client_for(user).get(_url(name, "jsonl", study=pairwise.pk)).status_code == 404


def test_every_raw_export_column_is_documented_in_order():
    docs = (settings.BASE_DIR / "docs" / "exports.md").read_text(encoding="utf-8")
    for name, export in exports.RAW_EXPORTS.items():
        section = docs.split(f"## Raw export: `{name}`", 1)[1].split("\n## ", 1)[0]
        documented = re.findall(r"^\| `([a-z_]+)` \|", section, flags=re.M)
        assert documented == export.header, name


def test_votes_show_whether_the_judge_verdict_was_revealed(
    study_run, make_annotators, client_for, researcher
):
    """An answer after which the verdict was shown carries when; an answer given after the
    rater had seen the verdict on that item (possible only in records from before reveals made
    answers final — planted here as such a record reads) is flagged verdict_seen_before."""
    user = make_annotators(1)[0]
    study = create_study(
        study_run, "direct_rating", [user], overlap=1, max_items=2, reveal_judge_verdict=True
    )
    me = rater_of(study, user)

    def rate(verdict):
        return lambda assignment: {"verdict": verdict, "confidence": 3, "note": "ok"}

    first = answer_next(me, rate("PASS"))
    answer_undo(rater=me)  # undone before any reveal: allowed
    later = timezone.now() + timedelta(minutes=2)
    second = answer_next(me, rate("FAIL"), now=later)  # the same item again
    assert second.assignment.item_id == first.assignment.item_id
    assert answer_verdict_reveal(answer_id=second.pk, now=later + timedelta(seconds=5))
    third = answer_next(me, rate("PARTIAL"), now=later)  # the other item, nothing revealed
    records = {r["answer_id"]: r for r in _fetch(client_for(researcher), "votes", VOTE_COLUMNS)}
    second.refresh_from_db()
    assert records[second.pk]["verdict_revealed_at"] == second.verdict_revealed_at.isoformat()
    assert records[first.pk]["verdict_revealed_at"] is None
    assert records[third.pk]["verdict_revealed_at"] is None
    assert not any(r["verdict_seen_before"] for r in records.values())
    # A record as the old rule could leave it: seen after the first answer, then undone.
    Answer.objects.filter(pk=first.pk).update(
        verdict_revealed_at=first.submitted_at + timedelta(minutes=1)
    )
    records = {r["answer_id"]: r for r in _fetch(client_for(researcher), "votes", VOTE_COLUMNS)}
    assert records[second.pk]["verdict_seen_before"] is True
    assert records[first.pk]["verdict_seen_before"] is False
    assert records[third.pk]["verdict_seen_before"] is False
