"""Reward-model training data from proposal review (docs/exports.md): the labels and the
preference pairs, line by line against a hand-made study; streamed a chunk of contexts at a
time in a fixed number of queries per chunk; through the API (staff only, in the schema), the
command; and the raw per-decision export."""

import csv
import io
import json

import pytest
from django.core.management import CommandError, call_command

from annotation.models import Answer, StudyItem
from annotation.services.assignments import answer_undo
from annotation.services.studies import rater_exclusion_set
from stats import proposal_exports
from tests.proposal_review import answer_all, context, import_contexts
from tests.stats.conftest import create_study, rater_of

pytestmark = pytest.mark.django_db
M, N = "model-m", "model-n"
LABELS_URL = "/api/v1/exports/proposal-labels.jsonl"
PAIRS_URL = "/api/v1/exports/proposal-pairs.jsonl"


@pytest.fixture
def study(make_annotators):
    """k = 3, handed out c1, c2, c3 in this order. c1: a (M) accepted 2–1, b (N) rejected 1–2
    (r3 pressed "reject all"); c2: a (M) rejected 0–3, b (N) accepted 3–0, c (N) accepted 2–1;
    c3: r3 answered it last and undid it, so x (M) is tied 1–1 by r1 and r2."""
    users = make_annotators(3)
    created = import_contexts(
        [
            context("c1", [("a", M, "Total each column"), ("b", N, "Book a call")]),
            context("c2", [("a", M), ("b", N), ("c", N)]),
            context("c3", [("x", M, 'Says "hi"\nthen ☕')]),
        ],
        users,
        name="Suggestions",
    )
    for position, key in enumerate(("c1", "c2", "c3")):
        StudyItem.objects.filter(study=created, key=key).update(position=position)
    plans = [
        {
            "c1": {"a": "accept", "b": "reject"},
            "c2": {"a": "reject", "b": "accept", "c": "accept"},
            "c3": {"x": "accept"},
        },  # fmt: skip
        {
            "c1": {"a": "accept", "b": "accept"},
            "c2": {"a": "reject", "b": "accept", "c": "reject"},
            "c3": {"x": "reject"},
        },  # fmt: skip
        {"c1": None, "c2": {"a": "reject", "b": "accept", "c": "accept"}, "c3": {"x": "accept"}},
    ]
    for user, plan in zip(users, plans, strict=True):
        assert answer_all(created, user, lambda key, plan=plan: plan[key]) == 3
    assert answer_undo(rater=rater_of(created, users[2])).item.key == "c3"
    created.users = users
    return created


def lines(what, **kwargs) -> list[dict]:
    text = "".join(proposal_exports.reward_lines(what, **kwargs))
    assert text.endswith("\n") or not text
    return [json.loads(line) for line in text.splitlines()]


def _by_key(rows):
    return {(r["context_id"], r["proposal_id"]): r for r in rows}


def test_the_labels_export_has_each_decided_proposal_with_its_majority_and_votes(study):
    rows = _by_key(lines("labels", study_id=study.pk))
    item = study.items.get(key="c1")
    c1a = rows[("c1", "a")]
    assert list(c1a) == list(proposal_exports.LABEL_KEYS)
    assert c1a == {
        "study_id": study.pk,
        "context_id": "c1",
        "proposal_id": "a",
        "proposal": "Total each column",
        "source": M,
        "label": "accepted",
        "votes": {"accept": 2, "reject": 1},
        "n_annotators": 3,
        "context_reject_all": 1,
        "context": {"events": item.payload["events"]},
    }
    summary = {
        key: (r["label"], r["votes"]["accept"], r["n_annotators"]) for key, r in rows.items()
    }
    assert summary == {
        ("c1", "a"): ("accepted", 2, 3),
        ("c1", "b"): ("rejected", 1, 3),
        ("c2", "a"): ("rejected", 0, 3),
        ("c2", "b"): ("accepted", 3, 3),
        ("c2", "c"): ("accepted", 2, 3),
        ("c3", "x"): ("tied", 1, 2),  # r3's answer was undone: two annotators there
    }
    assert rows[("c3", "x")]["proposal"] == 'Says "hi"\nthen ☕'
    assert rows[("c2", "a")]["context_reject_all"] == 0


def test_the_pairs_export_pairs_each_accepted_with_each_rejected_proposal_of_a_context(study):
    pairs = lines("pairs", study_id=study.pk)
    for pair in pairs:
        assert list(pair) == list(proposal_exports.PAIR_KEYS)
    found = {
        (p["context_id"], p["chosen"]["proposal_id"], p["rejected"]["proposal_id"]) for p in pairs
    }
    labels = _by_key(lines("labels", study_id=study.pk))
    expected = {
        (key, chosen, rejected)
        for (key, chosen), row in labels.items()
        if row["label"] == "accepted"
        for (other, rejected), row2 in labels.items()
        if other == key and row2["label"] == "rejected"
    }
    assert found == expected and ("c1", "a", "b") in found
    c1 = next(p for p in pairs if p["context_id"] == "c1")
    assert c1["chosen"] == {
        "proposal_id": "a",
        "proposal": "Total each column",
        "source": M,
        "votes": {"accept": 2, "reject": 1},
    }
    assert c1["rejected"]["source"] == N and c1["context"] == labels[("c1", "a")]["context"]


def test_excluded_raters_are_left_out_unless_asked(study):
    r1 = rater_of(study, study.users[0])
    rater_exclusion_set(rater=r1, excluded=True, by=study.users[1])
    rows = _by_key(lines("labels", study_id=study.pk))
    assert rows[("c1", "a")]["votes"] == {"accept": 1, "reject": 1}
    assert rows[("c1", "a")]["label"] == "tied"
    counted = _by_key(lines("labels", study_id=study.pk, include_excluded=True))
    assert counted[("c1", "a")]["votes"] == {"accept": 2, "reject": 1}


def test_a_context_from_a_run_exports_its_conversation(study_run, make_annotators):
    users = make_annotators(1)
    created = create_study(
        study_run, "proposal_review", users, overlap=1, condition="vanilla", max_items=2
    )
    answer_all(created, users[0], lambda key: {"p1": "accept", "p2": "reject"})
    rows = lines("labels", study_id=created.pk)
    assert len(rows) == 4
    item = created.items.get(key=rows[0]["context_id"])
    assert rows[0]["context"] == {"conversation": item.payload["conversation"]}
    assert len(lines("pairs", study_id=created.pk)) == 2


def test_the_export_streams_a_chunk_of_contexts_at_a_time_from_two_queries(
    study, monkeypatch, django_assert_num_queries
):
    monkeypatch.setattr(proposal_exports, "CHUNK", 1)
    with django_assert_num_queries(0):  # nothing is read before the first chunk is asked for
        chunks = proposal_exports.reward_lines("labels", study_id=study.pk)
    with django_assert_num_queries(2):  # the contexts, their answers: read as they go
        first = next(chunks)
    assert first.count("\n") == len(study.items.order_by("pk").first().payload["proposals"])
    with django_assert_num_queries(0):  # the same two queries, read further
        rest = list(chunks)
    assert len(rest) == 2


def test_the_api_streams_both_exports_to_staff_only(study, client_for, researcher, annotator):
    client = client_for(researcher)
    response = client.get(LABELS_URL, {"study": study.pk})
    assert response.status_code == 200 and response.streaming
    assert response["Content-Type"] == "application/jsonl; charset=utf-8"
    assert 'filename="proposal-labels.jsonl"' in response["Content-Disposition"]
    body = b"".join(response.streaming_content).decode()
    assert body == "".join(proposal_exports.reward_lines("labels", study_id=study.pk))
    pairs = b"".join(client.get(PAIRS_URL, {"study": study.pk}).streaming_content).decode()
    assert pairs == "".join(proposal_exports.reward_lines("pairs", study_id=study.pk))
    everything = b"".join(client.get(LABELS_URL).streaming_content).decode()
    assert everything == body  # one proposal-review study: every study is this one
    assert client.get(LABELS_URL, {"study": 999999}).status_code == 404
    assert client.get(LABELS_URL, {"study": "x"}).status_code == 400
    assert client.get(LABELS_URL, {"include_excluded": "maybe"}).status_code == 400
    assert client.get("/api/v1/exports/proposal-labels.csv").status_code == 404
    assert client_for(annotator).get(LABELS_URL).status_code == 404
    client.logout()
    assert client.get(LABELS_URL).status_code == 401


def test_another_kind_of_study_is_refused(study_run, make_annotators, client_for, researcher):
    other = create_study(study_run, "pairwise", make_annotators(2))
    response = client_for(researcher).get(LABELS_URL, {"study": other.pk})
    assert response.status_code == 400
    assert "reads proposal-review studies" in response.json()["detail"]
    raw = client_for(researcher).get(
        "/api/v1/exports/proposal-votes.csv", {"study": other.pk}
    )  # the raw per-decision export checks its study before streaming, too
    assert raw.status_code == 400 and "reads proposal-review studies" in raw.json()["detail"]
    with pytest.raises(CommandError, match="reads proposal-review studies"):
        call_command("export_proposals", "labels", "--study", str(other.pk))
    with pytest.raises(CommandError, match="no study 999999"):
        call_command("export_proposals", "pairs", "--study", "999999")


def test_the_schema_documents_the_exports(db, client_for, researcher):
    schema = client_for(researcher).get("/api/v1/schema/", {"format": "json"}).json()
    operation = schema["paths"]["/api/v1/exports/{name}.jsonl"]["get"]
    parameters = {p["name"]: p for p in operation["parameters"]}
    assert parameters["name"]["schema"]["enum"] == ["proposal-labels", "proposal-pairs"]
    assert {"study", "include_excluded"} <= set(parameters)
    assert "application/jsonl" in operation["responses"]["200"]["content"]


def test_the_command_writes_the_same_lines(study, tmp_path):
    out = io.StringIO()
    call_command("export_proposals", "labels", "--study", str(study.pk), stdout=out)
    assert out.getvalue() == "".join(proposal_exports.reward_lines("labels", study_id=study.pk))
    path = tmp_path / "pairs.jsonl"
    call_command("export_proposals", "pairs", "--study", str(study.pk), "--out", str(path))
    assert path.read_text(encoding="utf-8") == "".join(
        proposal_exports.reward_lines("pairs", study_id=study.pk)
    )


def test_the_raw_export_has_one_row_per_decision(study, client_for, researcher):
    response = client_for(researcher).get("/api/v1/exports/proposal-votes.csv", {"study": study.pk})
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    answers = Answer.objects.filter(assignment__item__study=study)
    assert len(rows) == sum(len(a.details["decisions"]) for a in answers)  # undone one too
    retracted = [r for r in rows if r["retracted"] == "true"]
    assert retracted and {r["retraction_reason"] for r in retracted} == {"undo"}
    reject_all = [r for r in rows if r["reject_all"] == "true"]
    assert {(r["context_id"], r["decision"]) for r in reject_all} == {("c1", "reject")}
    for row in rows:
        answer = answers.get(pk=int(row["answer_id"]))
        pid = row["proposal_id"]
        assert answer.details["decisions"][pid] == row["decision"]
        assert answer.display["order"][int(row["position"]) - 1] == pid
        assert row["source"] == (M if pid in ("a", "x") else N)
