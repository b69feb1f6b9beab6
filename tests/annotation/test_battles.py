"""Battles: ``selectors.study_battles`` for the arena and the pairwise kind, and the public
Chatbot Arena battle format both ways — ``import_battles`` (closed arena study, every bad line
named, nothing written), ``export_battles`` and ``/api/v1/exports/battles.jsonl`` (the same
lines), and the round trip."""

import io
import json
from collections import Counter
from datetime import datetime

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.urls import reverse

from annotation import kinds
from annotation.kinds.arena import SCREEN_TIES
from annotation.kinds.pairwise import CASE_WINNERS
from annotation.models import (
    Answer,
    Assignment,
    Rater,
    RetractionReason,
    Study,
    StudyItem,
    StudySource,
    StudyStatus,
)
from annotation.selectors import study_battle_counts, study_battles
from annotation.services import battles
from annotation.services.assignments import answer_submit, answer_undo, assignment_next
from annotation.services.battles import BATTLE_FIELDS, battles_import
from annotation.services.importer import StudyImportError, study_import
from annotation.services.studies import rater_exclusion_set
from benchmark.models import Condition
from benchmark.vocabulary import BATTLE_SWAPPED, BattleWinner
from tests.annotation.conftest import rater
from tests.release import release_file

pytestmark = pytest.mark.django_db

ARENA_CHOICES = ("1", "2", "tie", "bothbad")


def answer_all(study, users, choices) -> None:
    """Each user answers every item they are handed, cycling through ``choices`` (screen
    positions), through the services, with the kind's own form mapping."""
    form_class = kinds.get(study.kind).answer_form
    for u, user in enumerate(users):
        r = rater(study, user)
        n = 0
        while (assignment := assignment_next(rater=r)) is not None:
            choice = choices[(n + u) % len(choices)]
            key = f"answer-{study.pk}-{user.pk}-{n:04d}"
            form = form_class(
                {"idempotency_key": key, "choice": choice, "confidence": "3"},
                study=study,
                assignment=assignment,
            )
            assert form.is_valid(), form.errors
            answer_submit(
                rater=r,
                item_token=assignment.item.token,
                answer=form.to_input(),
                idempotency_key=key,
            )
            n += 1


def lines_of(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def without_study(records: list[dict]) -> list[dict]:
    return [{k: r[k] for k in BATTLE_FIELDS} for r in records]


def export_command(study_id: int, *extra: str) -> str:
    out = io.StringIO()
    call_command("export_battles", "--study", str(study_id), *extra, stdout=out)
    return out.getvalue()


def import_text(text: str, **fields) -> Study:
    return battles_import(stream=io.BytesIO(text.encode()), **fields).study


def jsonl(*records: dict) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


# --- study_battles ----------------------------------------------------------------------------


def test_arena_battles_are_the_answers_labels_for_the_items_sources(
    run, make_study, make_annotators
):
    users = make_annotators(2)
    study = make_study("arena", runs=[run], annotators=users, per_pair=2)
    answer_all(study, users, ARENA_CHOICES)
    got = list(study_battles(study=study))
    answers = {
        (a.assignment.item_id, a.assignment.rater_id): a
        for a in Answer.objects.select_related("assignment__item", "assignment__rater__user")
    }
    assert len(got) == len(answers) == 24
    for battle in got:
        answer = answers[(battle.item_id, battle.rater_id)]
        item = answer.assignment.item
        assert (battle.source_a, battle.source_b) == (
            item.payload["sources"]["A"],
            item.payload["sources"]["B"],
        )
        assert battle.winner == answer.label
        assert (battle.question_id, battle.turn) == (
            item.payload["question_id"],
            item.payload["turn"],
        )
        assert battle.judge == answer.assignment.rater.user.username
        assert battle.shown_swapped == (answer.display["order"][0] == "B")
        assert battle.tstamp == answer.submitted_at.timestamp()
        assert battle.item_key == item.key
    assert [b.rater_id for b in got] == [
        a.assignment.rater_id for a in Answer.objects.order_by("id").select_related("assignment")
    ]


def test_pairwise_battles_are_vanilla_against_rubric_injected(run, make_study, make_annotators):
    users = make_annotators(2)
    study = make_study(annotators=users, overlap=2, trigger_type="RECOVERY")
    answer_all(study, users, ("1", "2", "tie"))
    answers = {
        (a.assignment.item_id, a.assignment.rater_id): a
        for a in Answer.objects.select_related(
            "assignment__item__unit__endpoint", "assignment__item__trigger__turn__dialogue"
        )
    }
    got = list(study_battles(study=study))
    assert len(got) == len(answers) == 2 * study.items.count()
    for battle in got:
        answer = answers[(battle.item_id, battle.rater_id)]
        item = answer.assignment.item
        model = item.unit.endpoint.name
        assert (battle.source_a, battle.source_b) == (
            f"{model} · vanilla",
            f"{model} · rubric-injected",
        )
        assert item.unit.condition == Condition.VANILLA
        assert battle.winner == CASE_WINNERS[answer.label]
        assert battle.question_id == item.trigger.turn.dialogue.unique_id_eval
        assert battle.turn == item.trigger.turn.index
    assert {b.winner for b in got} == {"model_a", "model_b", "tie"}


def test_undone_answers_and_excluded_raters_are_left_out_unless_asked(
    run, make_study, make_annotators, researcher
):
    users = make_annotators(2)
    study = make_study("arena", runs=[run], annotators=users, per_pair=1)
    answer_all(study, users, ARENA_CHOICES)
    assert answer_undo(rater=rater(study, users[0])) is not None  # retracted, reopened
    live = Answer.objects.filter(retracted_at__isnull=True).count()
    assert len(list(study_battles(study=study))) == live == 11
    rater_exclusion_set(rater=rater(study, users[1]), excluded=True, by=researcher)
    assert {b.judge for b in study_battles(study=study)} == {users[0].username}
    assert len(list(study_battles(study=study, include_excluded=True))) == 11


def test_a_study_of_another_kind_has_no_battles(run, make_study):
    study = make_study("direct_rating", overlap=1)
    with pytest.raises(ValueError, match="no battles"):
        next(study_battles(study=study))


def _counted(battles, gold_items=frozenset()) -> Counter:
    return Counter((b.source_a, b.source_b, b.winner, b.item_id in gold_items) for b in battles)


def _counts(study, **options) -> Counter:
    return Counter(
        {(c.source_a, c.source_b, c.winner, c.gold): c.count
         for c in study_battle_counts(study=study, **options)}
    )  # fmt: skip


def test_battle_counts_are_study_battles_counted_by_the_database(
    run, make_study, make_annotators, researcher
):
    """The ranking's read: per sources, winner and gold or not, as many as study_battles gives
    — undone answers and excluded raters left out alike, gold items told apart."""
    first = make_study("arena", runs=[run], per_pair=1, name="Keys")
    key = first.items.order_by("position").first().key
    users = make_annotators(3)
    study = make_study(
        "arena", runs=[run], annotators=users, per_pair=2, gold=f"{key} bothbad", name="Gold"
    )
    answer_all(study, users, ARENA_CHOICES)
    answer_undo(rater=rater(study, users[0]))
    rater_exclusion_set(rater=rater(study, users[2]), excluded=True, by=researcher)
    gold = frozenset(study.items.filter(is_gold=True).values_list("pk", flat=True))
    assert len(gold) == 1
    for include_excluded in (False, True):
        battles = list(study_battles(study=study, include_excluded=include_excluded))
        counts = _counts(study, include_excluded=include_excluded)
        assert counts == _counted(battles, gold)
        assert sum(counts.values()) == len(battles) > 0
    assert any(gold for *_, gold in _counts(study)) and len(_counts(study)) > 4
    rows = study_battle_counts(study=study)
    assert rows == sorted(rows, key=lambda c: (c.source_a, c.source_b, c.winner, c.gold))


def test_battle_counts_of_pairwise_and_imported_studies(run, make_study, make_annotators):
    users = make_annotators(2)
    pairwise = make_study(annotators=users, overlap=2, trigger_type="RECOVERY")
    answer_all(pairwise, users, ("1", "2", "tie"))
    imported = import_text(jsonl(*SAMPLE))
    for study in (pairwise, imported):
        assert _counts(study) == _counted(study_battles(study=study)), study.kind
    assert sum(_counts(pairwise).values()) == 2 * pairwise.items.count()
    # By hand: the file's two q1 lines are one item (gpt-4 side A): each side won once.
    assert _counts(imported)[("gpt-4", "vicuna-13b", "model_a", False)] == 1
    assert _counts(imported)[("gpt-4", "vicuna-13b", "model_b", False)] == 1
    assert sum(_counts(imported).values()) == len(SAMPLE)


def test_a_study_of_another_kind_has_no_battle_counts(run, make_study):
    with pytest.raises(ValueError, match="no battles"):
        study_battle_counts(study=make_study("direct_rating", overlap=1))


# --- Export -----------------------------------------------------------------------------------


def test_the_export_is_oriented_as_shown_and_the_command_and_api_agree(
    run, make_study, make_annotators, client_for, researcher
):
    users = make_annotators(2)
    study = make_study("arena", runs=[run], annotators=users, per_pair=2)
    answer_all(study, users, ARENA_CHOICES)
    text = export_command(study.pk)
    records = lines_of(text)
    api = client_for(researcher).get(
        reverse("stats_api:raw-export", args=["battles", "jsonl"]), {"study": study.pk}
    )
    assert api.status_code == 200
    assert b"".join(api.streaming_content).decode() == text
    assert list(records[0]) == [*BATTLE_FIELDS, "study_id"]
    answers = list(Answer.objects.order_by("id").select_related("assignment__item"))
    for record, answer in zip(records, answers, strict=True):
        order = answer.display["order"]
        shown = [answer.assignment.item.payload["sources"][side] for side in order]
        assert [record["model_a"], record["model_b"]] == shown  # model_a: Response 1
        choice = answer.details["choice"]
        expected = SCREEN_TIES.get(choice) or ("model_a" if choice == "1" else "model_b")
        assert record["winner"] == expected
        assert record["study_id"] == study.pk
    # CSV too, one row per battle.
    csv = client_for(researcher).get(
        reverse("stats_api:raw-export", args=["battles", "csv"]), {"study": study.pk}
    )
    assert b"".join(csv.streaming_content).decode().count("\r\n") == len(records) + 1


def test_the_export_command_writes_a_file_and_refuses_what_is_not_a_battle_study(
    run, make_study, make_annotators, tmp_path
):
    users = make_annotators(2)
    study = make_study("arena", runs=[run], annotators=users, per_pair=1)
    answer_all(study, users, ARENA_CHOICES)
    out = tmp_path / "battles.jsonl"
    call_command(
        "export_battles", "--study", str(study.pk), "--out", str(out), stderr=io.StringIO()
    )
    assert out.read_text(encoding="utf-8") == export_command(study.pk)
    assert len(lines_of(out.read_text())) == 12
    audit = make_study("direct_rating", overlap=1, name="Rate")
    with pytest.raises(CommandError, match="is a direct rating study: its answers are not battles"):
        export_command(audit.pk)
    with pytest.raises(CommandError, match="no study 999999"):
        export_command(999999)


def test_the_api_refuses_a_study_that_is_not_a_battle_study(
    run, make_study, client_for, researcher
):
    study = make_study("direct_rating", overlap=1)
    client = client_for(researcher)
    url = reverse("stats_api:raw-export", args=["battles", "jsonl"])
    refused = client.get(url, {"study": study.pk})
    assert refused.status_code == 400 and "not battles" in refused.json()["detail"]
    assert client.get(url, {"study": 999999}).status_code == 404
    everything = client.get(url)  # every battle study: none has answers yet
    assert everything.status_code == 200 and b"".join(everything.streaming_content) == b""


def test_an_annotator_cannot_export_battles(run, make_study, client_for, annotator):
    study = make_study("arena", runs=[run], per_pair=1)
    url = reverse("stats_api:raw-export", args=["battles", "jsonl"])
    assert client_for(annotator).get(url, {"study": study.pk}).status_code == 404


# --- Import -----------------------------------------------------------------------------------

SAMPLE = [
    {"model_a": "gpt-4", "model_b": "vicuna-13b", "winner": "model_a", "judge": "j1",
     "question_id": "q1", "turn": 1, "tstamp": 1682351591.1322, "language": "English"},
    # The same question and pair the other way round, by another judge: the same item.
    {"model_a": "vicuna-13b", "model_b": "gpt-4", "winner": "model_a", "judge": "j2",
     "question_id": "q1", "turn": 1, "tstamp": 1682351600.5},
    {"model_a": "gpt-4", "model_b": "claude-v1", "winner": "tie (bothbad)", "judge": "j1",
     "question_id": 81, "turn": 2, "tstamp": 1682351700},
    # No question: an item of its own; no judge: the default; no tstamp, no turn.
    {"model_a": "claude-v1", "model_b": "vicuna-13b", "winner": "tie"},
    {"model_a": "claude-v1", "model_b": "vicuna-13b", "winner": "model_b"},
]  # fmt: skip


def test_a_battles_file_becomes_a_closed_arena_study():
    result = battles_import(stream=io.BytesIO(jsonl(*SAMPLE).encode()), source_name="b.jsonl")
    study = result.study
    assert (result.battles, result.items, result.judges, result.superseded) == (5, 4, 3, 0)
    assert study.kind == "arena" and study.status == StudyStatus.CLOSED
    assert study.source == StudySource.IMPORTED and study.name == "Battles: b.jsonl (imported)"
    assert set(study.raters.values_list("external_id", flat=True)) == {"j1", "j2", "anonymous"}
    assert study.overlap == 2
    q1 = study.items.get(payload__question_id="q1")
    assert q1.payload == {
        "sides": ["A", "B"],
        "sources": {"A": "gpt-4", "B": "vicuna-13b"},
        "question_id": "q1",
        "turn": 1,
    }
    assert q1.required_answers == q1.completed_answers == 2
    j2 = Answer.objects.get(assignment__item=q1, assignment__rater__external_id="j2")
    # vicuna-13b (side B) was model_a and won: stored de-swapped, shown B first.
    assert j2.label == BattleWinner.MODEL_B and j2.display == {"order": ["B", "A"]}
    assert j2.details["choice"] == "1" and j2.details["source"] == {"file": "b.jsonl", "line": 2}
    assert j2.submitted_at.timestamp() == 1682351600.5
    assert study.items.get(payload__question_id=81).payload["turn"] == 2
    assert study.items.filter(payload__question_id=None).count() == 2


def test_export_then_import_gives_the_same_battles(tmp_path):
    original = import_text(jsonl(*SAMPLE))
    exported = export_command(original.pk)
    assert without_study(lines_of(exported)) == [
        {k: r.get(k, "anonymous" if k == "judge" else None) for k in BATTLE_FIELDS} for r in SAMPLE
    ]
    path = tmp_path / "again.jsonl"
    path.write_text(exported, encoding="utf-8")
    out = io.StringIO()
    call_command("import_battles", str(path), "--name", "Again", stdout=out)
    again = Study.objects.get(pk=int(out.getvalue().splitlines()[-1]))
    assert again.name == "Again"
    assert without_study(lines_of(export_command(again.pk))) == without_study(lines_of(exported))


def test_an_arena_and_a_pairwise_study_round_trip(run, make_study, make_annotators):
    users = make_annotators(2)
    arena = make_study("arena", runs=[run], annotators=users, per_pair=2, name="Arena")
    pairwise = make_study(annotators=users, trigger_type="RECOVERY", name="Pairs")
    answer_all(arena, users, ARENA_CHOICES)
    answer_all(pairwise, users, ("1", "2", "tie"))
    for study in (arena, pairwise):
        exported = without_study(lines_of(export_command(study.pk)))
        again = import_text(jsonl(*exported))
        assert without_study(lines_of(export_command(again.pk))) == exported
        # The same comparisons: an item per (question, turn, pair), a rater per judge.
        assert again.items.count() == study.items.count()
        assert again.raters.count() == study.raters.count()
        original = sorted(
            (b.question_id, b.turn, b.source_a, b.source_b, b.judge, b.winner)
            for b in study_battles(study=study)
        )
        imported = sorted(
            (b.question_id, b.turn, *_canonical(b)) for b in study_battles(study=again)
        )
        assert (
            sorted((q, t, *_canonical_tuple(a, b, j, w)) for q, t, a, b, j, w in original)
            == imported
        )


def _canonical_tuple(a, b, judge, winner):
    if a > b:
        return b, a, judge, BATTLE_SWAPPED[winner]
    return a, b, judge, winner


def _canonical(battle):
    return _canonical_tuple(battle.source_a, battle.source_b, battle.judge, battle.winner)


def test_a_judge_who_judged_an_item_twice_counts_once_the_later_line():
    lines = [
        {"model_a": "a", "model_b": "b", "winner": "model_a", "judge": "j", "question_id": "q"},
        {"model_a": "b", "model_b": "a", "winner": "model_a", "judge": "j", "question_id": "q"},
    ]
    study = import_text(jsonl(*lines))
    answers = Answer.objects.filter(assignment__item__study=study).order_by("id")
    assert [(a.label, a.retraction_reason) for a in answers] == [
        ("model_a", RetractionReason.SUPERSEDED),
        ("model_b", ""),
    ]
    assert [b.winner for b in study_battles(study=study)] == ["model_b"]
    assert lines_of(export_command(study.pk))[0]["model_a"] == "b"


def test_a_repeat_in_a_later_batch_supersedes_too(monkeypatch):
    monkeypatch.setattr(battles, "BATCH", 2)
    line = {"model_a": "a", "model_b": "b", "judge": "j", "question_id": "q"}
    others = [
        {"model_a": "c", "model_b": "d", "winner": "tie", "question_id": f"o{n}"} for n in range(3)
    ]
    study = import_text(jsonl({**line, "winner": "model_a"}, *others, {**line, "winner": "tie"}))
    assert Answer.objects.filter(retraction_reason=RetractionReason.SUPERSEDED).count() == 1
    item = study.items.get(payload__question_id="q")
    assert item.completed_answers == 1
    assert [b.winner for b in study_battles(study=study) if b.item_id == item.pk] == ["tie"]
    assert study.items.count() == 4 and Assignment.objects.count() == 4


BAD_LINES = [
    ('{"model_a": "a", "model_b": "b", "winner": "model_c"}', "winner: must be one of"),
    ('{"model_a": "a", "model_b": "a", "winner": "tie"}', "model_b: the same model as model_a"),
    ('{"model_b": "b", "winner": "tie"}', "model_a: required field is missing"),
    ('{"model_a": 7, "model_b": "b", "winner": "tie"}', "model_a: expected a string (got number)"),
    ('{"model_a": "a", "model_b": "b", "winner": "tie", "turn": 0}', "turn: expected a whole"),
    ('{"model_a": "a", "model_b": "b", "winner": "tie", "turn": true}', "turn: expected a whole"),
    ('{"model_a": "a", "model_b": "b", "winner": "tie", "tstamp": "x"}', "tstamp: expected Unix"),
    ('{"model_a": "a", "model_b": "b", "winner": "tie", "tstamp": -1}', "tstamp: must be from 0"),
    ('{"model_a": "a", "model_b": "b", "winner": "tie", "judge": ""}', "judge: must not be empty"),
    ('{"model_a": "a", "model_b": "b", "winner": "tie", "judge": "' + "j" * 65 + '"}',
     "judge: at most 64"),
    ('{"model_a": "a\\u0000", "model_b": "b", "winner": "tie"}', "model_a: contains a NUL"),
    ('{"model_a": "a", "model_b": "b", "winner": "tie", "question_id": [1]}',
     "question_id: expected a string or an integer (got array)"),
    ('{"model_a": "' + "m" * 101 + '", "model_b": "b", "winner": "tie"}', "model_a: at most 100"),
    ('{"model_a": "a", "model_b": "b", "winner": null}', "winner: must be one of"),
    ("[1, 2]", "expected a JSON object (got array)"),
    ('{"model_a": "a", ', "invalid JSON"),
]  # fmt: skip


def test_every_bad_line_is_named_and_nothing_is_written():
    good = '{"model_a": "a", "model_b": "b", "winner": "tie", "judge": "j"}'
    text = "\n".join([good, *(line for line, _ in BAD_LINES), good]) + "\n"
    with pytest.raises(StudyImportError) as refused:
        import_text(text)
    errors = refused.value.errors
    assert refused.value.total == len(BAD_LINES) == len(errors)
    for number, (_, fragment) in enumerate(BAD_LINES, start=2):
        assert errors[number - 2].startswith(f"line {number}: "), errors[number - 2]
        assert fragment in errors[number - 2], (fragment, errors[number - 2])
    assert not (Study.objects.exists() or StudyItem.objects.exists() or Rater.objects.exists())
    assert not Answer.objects.exists()


def test_a_bad_line_after_batches_were_written_still_rolls_everything_back(monkeypatch):
    monkeypatch.setattr(battles, "BATCH", 10)
    good = [{"model_a": "a", "model_b": "b", "winner": "tie", "question_id": n} for n in range(35)]
    text = jsonl(*good) + '{"model_a": "a", "model_b": "b", "winner": "draw"}\n'
    with pytest.raises(StudyImportError, match="line 36: winner"):
        import_text(text)
    assert not (Study.objects.exists() or Answer.objects.exists() or StudyItem.objects.exists())


def test_errors_beyond_the_shown_ones_are_counted():
    text = '{"model_a": "a", "model_b": "b", "winner": "x"}\n' * 250
    with pytest.raises(StudyImportError) as refused:
        import_text(text)
    assert refused.value.total == 250 and len(refused.value.errors) == 200
    assert "… and 50 more" in str(refused.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [("", "no battles in the file"), ("\n\n", "no battles in the file")],
)
def test_an_empty_file_is_refused(text, message):
    with pytest.raises(StudyImportError, match=message):
        import_text(text)
    assert not Study.objects.exists()


def test_over_long_lines_and_files_are_refused_by_the_caps(settings):
    settings.PROACTBENCH_MAX_RECORD_BYTES = 200
    long = json.dumps({"model_a": "a", "model_b": "b", "winner": "tie", "x": "y" * 300})
    with pytest.raises(StudyImportError, match="line 2: record is longer than 200 bytes"):
        import_text(jsonl(SAMPLE[3]) + long + "\n")
    settings.PROACTBENCH_MAX_RECORD_BYTES = 8 * 1024 * 1024
    settings.PROACTBENCH_MAX_FILE_BYTES = 100
    with pytest.raises(StudyImportError, match="file is larger than 100 bytes"):
        import_text(jsonl(*SAMPLE))
    assert not Study.objects.exists()


def test_the_import_command_names_bad_lines(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"model_a": "a", "model_b": "b"}\n', encoding="utf-8")
    with pytest.raises(CommandError, match="line 1: winner: must be one of"):
        call_command("import_battles", str(path), stdout=io.StringIO())
    with pytest.raises(CommandError, match="No such file"):
        call_command("import_battles", str(tmp_path / "none.jsonl"), stdout=io.StringIO())
    assert not Study.objects.exists()


def test_the_admin_imports_battles_and_lists_bad_lines(client_for, admin_user):
    client = client_for(admin_user)
    url = reverse("admin:annotation_study_import_battles")
    assert (
        "Import battles"
        in client.get(reverse("admin:annotation_study_changelist")).content.decode()
    )
    page = client.get(url)
    assert page.status_code == 200 and "Chatbot Arena format" in page.content.decode()
    bad = SimpleUploadedFile("bad.jsonl", b'{"model_a": "a", "model_b": "a", "winner": "tie"}\n')
    response = client.post(url, {"battles": bad, "name": "Bad"})
    html = response.content.decode()
    assert response.status_code == 200 and "nothing was written" in html
    assert "line 1: model_b: the same model as model_a" in html
    assert not Study.objects.exists()
    good = SimpleUploadedFile("good.jsonl", jsonl(*SAMPLE).encode())
    response = client.post(url, {"battles": good, "name": "Arena battles"})
    study = Study.objects.get()
    assert response.status_code == 302 and response.url.endswith(f"/{study.pk}/change/")
    assert study.name == "Arena battles" and study.created_by == admin_user
    assert Answer.objects.count() == len(SAMPLE)


def test_the_release_pairwise_study_reads_as_the_battles_its_raters_clicked():
    """Study 2 of the release, imported: each live rating is a battle between the item's
    model's vanilla (Case A) and rubric-injected (Case B) reply, exported as its rater saw it —
    model_a the case shown on the left (``ab_swap``), the winner the side clicked."""
    items_path = release_file("pairwise_sample_items.sample.json")
    ratings_path = release_file("pairwise_ratings.sample.jsonl")
    with items_path.open("rb") as items, ratings_path.open("rb") as ratings:
        study = study_import(
            kind="pairwise",
            items=(items_path.name, items),
            ratings=[(ratings_path.name, ratings)],
        )
    items = {i["item_id"]: i for i in json.loads(items_path.read_text(encoding="utf-8"))}
    latest: dict[tuple[str, str], dict] = {}
    for rating in lines_of(ratings_path.read_text(encoding="utf-8")):
        key = (rating["item_id"], rating["annotator_id"])
        if key not in latest or rating["timestamp"] >= latest[key]["timestamp"]:
            latest[key] = rating
    expected = []
    for rating in latest.values():
        item = items[rating["item_id"]]
        vanilla = f"{item['evaluated_model']} · vanilla"
        injected = f"{item['evaluated_model']} · rubric-injected"
        left, right = (injected, vanilla) if rating["ab_swap"] else (vanilla, injected)
        when = datetime.fromisoformat(rating["timestamp"].replace("Z", "+00:00"))
        expected.append(
            {
                "model_a": left,
                "model_b": right,
                "winner": {"left": "model_a", "right": "model_b", "tie": "tie"}[
                    rating["choice_side"]
                ],
                "judge": rating["annotator_id"],
                "question_id": rating["item_id"],  # no dialogue of the corpus: the item's id
                "turn": item["recovery_turn"],
                "tstamp": when.timestamp(),
            }
        )
    exported = without_study(lines_of(export_command(study.pk)))

    def order(record):
        return record["question_id"], record["judge"]

    assert sorted(exported, key=order) == sorted(expected, key=order)
    again = import_text(jsonl(*exported))
    assert without_study(lines_of(export_command(again.pk))) == exported


def test_the_release_pairwise_study_counts_as_its_battles():
    """An imported release item has no reply here: its model is the record's evaluated_model,
    in the counts as in study_battles."""
    items_path = release_file("pairwise_sample_items.sample.json")
    ratings_path = release_file("pairwise_ratings.sample.jsonl")
    with items_path.open("rb") as items, ratings_path.open("rb") as ratings:
        study = study_import(
            kind="pairwise",
            items=(items_path.name, items),
            ratings=[(ratings_path.name, ratings)],
        )
    counts = _counts(study)
    assert counts == _counted(study_battles(study=study))
    models = {json.loads(items_path.read_text())[0]["evaluated_model"]}
    assert {source.split(" · ")[0] for source, *_ in counts} >= models
    assert "unknown" not in {source.split(" · ")[0] for source, *_ in counts}
