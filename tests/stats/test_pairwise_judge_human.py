"""Pairwise judge vs people (``pairwise-judge-human``): the computation against accuracy, κ and
confusion counts worked out by hand; an arena study answered through the real services, its
pairs given to a judge with the real ``run_pairwise_judge`` and the judge's verdicts written as
rows (one comparison stored the other way round), against hand-computed figures with the
inconsistent pairs reported; the service path end to end on the fake vendor server
(``judge_pairs --pairs study=ID``, a judge that always picks the second reply); the surfaces;
and the demo's arena study, whose pairs the demo judges compared."""

import csv
import io
import json
import math
import re
from collections import Counter

import numpy as np
import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.urls import reverse

from annotation.models import Study
from annotation.selectors import study_unit_pairs
from annotation.services.assignments import assignment_next
from benchmark.evaluation.pairwise import run_pairwise_judge
from benchmark.models import AuditVia, ModelEndpoint, PairwiseComparison, PairwiseJudgment
from proactweb.celery import app as celery_app
from stats import tables
from stats.compute.pairwise_consistency import ERROR, NOT_ASKED
from stats.compute.pairwise_judge_human import judge_vs_people, people_labels
from stats.selectors import StatsInputError, TableRequest
from tests.fakes.vendor_server import FakeVendorServer
from tests.stats.conftest import (
    BAD,
    TIE,
    A,
    B,
    answer,
    create_study,
    exclude,
    judge_verdicts,
    pick_case,
    rater_of,
)

pytestmark = pytest.mark.django_db

NAME = "pairwise-judge-human"
SWAP = {A: B, B: A, TIE: TIE, BAD: BAD, ERROR: ERROR, NOT_ASKED: NOT_ASKED}


def _by_order(rows) -> dict:
    return {(r["judge"], r["order"]): r for r in rows}


# --- The computation, by hand -----------------------------------------------------------------

# Per pair: people's label counts (A, B, tie, both bad), and the judge's (A first, B first).
HAND = [
    ((2, 0, 0, 0), (A, A)),  # people A; consistent A
    ((0, 2, 0, 0), (A, B)),  # people B; flips: A when A is first, B when B is first
    ((0, 0, 1, 1), (BAD, BAD)),  # tie and both bad: people tie; consistent both bad = tie
    ((1, 1, 0, 0), (A, A)),  # split: no people's label
    ((1, 0, 1, 0), (B, B)),  # split (A against a tie): none
    ((0, 0, 0, 0), (A, A)),  # unanswered: none
    ((2, 1, 0, 0), (B, B)),  # people A (k = 3); consistent B
    ((0, 1, 0, 1), (A, A)),  # split (B against both bad = tie): none
    ((0, 0, 2, 0), (TIE, BAD)),  # people tie; flips between two ties: inconsistent
    ((0, 2, 0, 0), (ERROR, B)),  # people B; an error with A first
    ((2, 0, 0, 0), (NOT_ASKED, NOT_ASKED)),  # people A; never asked
]


def test_people_labels_fold_both_bad_into_tie_and_drop_splits():
    labels = people_labels(np.array([h for h, _ in HAND]))
    assert labels.tolist() == [0, 1, 2, -1, -1, -1, 0, -1, 2, 1, 0]


def test_agreement_by_hand():
    people = people_labels(np.array([h for h, _ in HAND]))
    ab, ba = (np.array(column) for column in zip(*(j for _, j in HAND), strict=True))
    both, first_a, first_b = judge_vs_people(people, ab, ba, judge="j", resamples=2000)
    # 7 pairs have a people's label. Both orders: A→A, tie→tie, A→B; pairs 1 and 8 flip; 9
    # and 10 lack a verdict in an order. κ: p_o 2/3, margins people (2, 0, 1), judge
    # (1, 1, 1): p_e 3/9, κ = (2/3 − 1/3) / (2/3) = 1/2.
    assert (both.order, both.agreement.n, both.n_inconsistent, both.n_no_verdict) == (
        "both",
        3,
        2,
        2,
    )
    assert both.agreement.confusion.tolist() == [[1, 1, 0], [0, 0, 0], [0, 0, 1]]
    assert both.agreement.accuracy == pytest.approx(2 / 3)
    assert both.agreement.kappa == pytest.approx(0.5)
    # A first: A→A, B→A, tie→tie, A→B, tie→tie (9: error, 10: never asked). p_o 3/5, margins
    # people (2, 1, 2), judge (2, 1, 2): p_e 9/25, κ = (0.6 − 0.36) / 0.64 = 0.375.
    assert (first_a.agreement.n, first_a.n_inconsistent, first_a.n_no_verdict) == (5, 2, 2)
    assert first_a.agreement.confusion.tolist() == [[1, 1, 0], [1, 0, 0], [0, 0, 2]]
    assert first_a.agreement.accuracy == pytest.approx(0.6)
    assert first_a.agreement.kappa == pytest.approx(0.375)
    # B first: A→A, B→B, tie→tie, A→B, tie→tie, B→B. p_o 5/6, margins people (2, 2, 2), judge
    # (1, 3, 2): p_e 12/36, κ = (5/6 − 1/3) / (2/3) = 0.75.
    assert (first_b.agreement.n, first_b.n_no_verdict) == (6, 1)
    assert first_b.agreement.confusion.tolist() == [[1, 1, 0], [0, 2, 0], [0, 0, 2]]
    assert first_b.agreement.accuracy == pytest.approx(5 / 6)
    assert first_b.agreement.kappa == pytest.approx(0.75)
    for row in (both, first_a, first_b):
        low, high = row.agreement.accuracy_ci
        assert low <= row.agreement.accuracy <= high
    # Seeded by judge and order: the same figures again, other ones for another judge.
    again = judge_vs_people(people, ab, ba, judge="j", resamples=2000)
    assert [r.agreement.kappa_ci for r in again] == [
        r.agreement.kappa_ci for r in (both, first_a, first_b)
    ]
    other = judge_vs_people(people, ab, ba, judge="k", resamples=2000)
    assert other[2].agreement.kappa_ci != first_b.agreement.kappa_ci


# --- An arena study through the services, the judge's verdicts as rows -------------------------

# Per item, in hand-out position: what its two raters say (by side), and the judge's verdict
# with the item's side A shown first and with side B shown first.
PEOPLE = [("A", "A"), ("B", "B"), ("tie", "bothbad"), ("A", "B"), ("A", "A"), ("B", "B")]
JUDGE = [(A, A), (A, B), (TIE, BAD), (A, A), (B, B), (A, B)]
TURNED = 5  # this item's comparison is stored with its sides the other way round


def _by_side(side: str):
    def decide(assignment) -> dict:
        order = assignment.display["order"]  # sides on screen
        choice = side if side in ("tie", "bothbad") else str(order.index(side) + 1)
        return {"choice": choice, "confidence": 3}

    return decide


@pytest.fixture
def judged_arena(study_run, make_annotators):
    users = make_annotators(2)
    study = create_study(None, "arena", users, runs=[study_run], per_pair=1, name="Arena")
    items = list(study.items.order_by("position"))
    assert len(items) == len(PEOPLE)  # 4 sources: 6 pairs, one item each
    position = {item.pk: p for p, item in enumerate(items)}
    for r, user in enumerate(users):
        rater = rater_of(study, user)
        while (assignment := assignment_next(rater=rater)) is not None:
            answer(rater, assignment, _by_side(PEOPLE[position[assignment.item_id]][r]))
    turned = items[TURNED]
    PairwiseComparison.objects.create(
        run=study_run, trigger=turned.trigger, unit_a=turned.unit_b, unit_b=turned.unit
    )
    judge = ModelEndpoint.objects.create(
        name="pj-table", display_name="PJ", provider="replay", model_name="pj-table"
    )
    outcome = run_pairwise_judge(
        run_id=study_run.pk,
        judges=[judge],
        pairs=[(item.unit_id, item.unit_b_id) for item in items],
        via=AuditVia.COMMAND,
    )
    assert (outcome.chosen, outcome.created) == (6, 5)  # the turned one was there already
    for p, item in enumerate(items):
        comparison = PairwiseComparison.objects.get(
            unit_a__in=(item.unit_id, item.unit_b_id), unit_b__in=(item.unit_id, item.unit_b_id)
        )
        ab, ba = JUDGE[p]
        if comparison.unit_a_id == item.unit_b_id:
            # Stored turned: its side A is the item's B, so its "A shown first" is the item's
            # "B shown first", and a win of its A one of the item's B.
            ab, ba = SWAP[ba], SWAP[ab]
        judge_verdicts([comparison], "pj-table", [(ab, ba)])
    # Another judge's verdict on a pair no item has is not this table's.
    other = study_run.units.exclude(
        pk__in=[i.unit_id for i in items] + [i.unit_b_id for i in items]
    )
    first, second = other.filter(trigger=other.first().trigger)[:2]
    elsewhere = PairwiseComparison.objects.create(
        run=study_run, trigger=first.trigger, unit_a=first, unit_b=second
    )
    judge_verdicts([elsewhere], "pj-elsewhere", [(A, A)])
    study.users = users
    return study


def test_an_answered_arena_study_against_its_judge_by_hand(judged_arena):
    table = tables.build(NAME, TableRequest(study=judged_arena.pk))
    rows = _by_order(table.rows)
    assert set(rows) == {("pj-table", order) for order in ("both", "ab", "ba")}
    assert [r["order"] for r in table.rows] == ["both", "ab", "ba"]
    # Items 0, 1, 2, 4, 5 have a people's label (A, B, tie, A, B); item 3 is split.
    both, first_a, first_b = (
        rows["pj-table", "both"],
        rows["pj-table", "ab"],
        rows["pj-table", "ba"],
    )
    # Both orders: item 0 A→A, item 4 A→B; items 1, 2 and 5 flip. κ: p_o 1/2 = p_e: 0.
    assert (both["n"], both["n_inconsistent"], both["n_no_verdict"]) == (2, 3, 0)
    assert both["accuracy"] == pytest.approx(0.5) and both["kappa"] == pytest.approx(0.0)
    assert (both["human_A_judge_A"], both["human_A_judge_B"]) == (1, 1)
    # A first: A→A, B→A, tie→tie, A→B, B→A (item 5, turned back). p_o 2/5; margins people
    # (2, 2, 1), judge (3, 1, 1): p_e 9/25; κ = 0.04 / 0.64.
    assert first_a["n"] == 5 and first_a["accuracy"] == pytest.approx(0.4)
    assert first_a["kappa"] == pytest.approx(0.0625)
    assert (first_a["human_B_judge_A"], first_a["human_A_judge_B"]) == (2, 1)
    assert first_a["human_tie_judge_tie"] == 1
    # B first: A→A, B→B, tie→tie (both bad), A→B, B→B. p_o 4/5; margins people (2, 2, 1),
    # judge (1, 3, 1): p_e 9/25; κ = 0.44 / 0.64.
    assert first_b["n"] == 5 and first_b["accuracy"] == pytest.approx(0.8)
    assert first_b["kappa"] == pytest.approx(0.6875)
    assert (first_b["human_B_judge_B"], first_b["human_A_judge_B"]) == (2, 1)
    notes = " ".join(table.notes)
    assert "6 pairs of replies in the study, 6 answered" in notes
    assert "both bad counted as a tie" in notes
    assert "1 of the answered pairs, 5 with a label" in notes
    assert "10,000 resamples" in notes


def test_an_excluded_rater_leaves_single_labels_and_comes_back_on_request(judged_arena, researcher):
    second = rater_of(judged_arena, judged_arena.users[1])
    exclude(second, researcher)
    table = tables.build(NAME, TableRequest(study=judged_arena.pk))
    # One rater left: every item has its label, item 3 (A) included.
    assert _by_order(table.rows)["pj-table", "ab"]["n"] == 6
    assert f"left out: {judged_arena.users[1].username}" in " ".join(table.notes)
    counted = tables.build(NAME, TableRequest(study=judged_arena.pk, include_excluded=True))
    assert _by_order(counted.rows)["pj-table", "ab"]["n"] == 5


def test_the_release_tie_rule_is_refused_for_these_labels(judged_arena):
    with pytest.raises(StatsInputError, match="this study's labels are A, B, tie; use majority"):
        tables.build(NAME, TableRequest(study=judged_arena.pk, majority="release"))


def test_a_study_without_llm_verdicts_on_its_pairs_says_how_to_get_them(study_run, make_annotators):
    study = create_study(None, "arena", make_annotators(2), runs=[study_run], per_pair=1)
    table = tables.build(NAME, TableRequest(study=study.pk))
    assert table.rows == []
    assert "judge_pairs RUN --judge JUDGE --pairs study=ID" in table.notes[-1]
    with pytest.raises(StatsInputError, match="choose one whose answers are battles, pairwise "):
        tables.build(NAME, TableRequest())
    rating = create_study(study_run, "direct_rating", make_annotators(1), overlap=1)
    with pytest.raises(StatsInputError, match="direct rating study: the pairwise-judge-human"):
        tables.build(NAME, TableRequest(study=rating.pk))


def test_surfaces(judged_arena, client_for, researcher, annotator):
    client = client_for(researcher)
    url = reverse("stats_api:table", args=[NAME])
    body = client.get(url, {"study": judged_arena.pk}).json()
    assert body["rows"] == tables.build(NAME, TableRequest(study=judged_arena.pk)).as_json()["rows"]
    response = client.get(url, {"study": judged_arena.pk, "format": "csv"})
    header, *rows = csv.reader(io.StringIO(response.content.decode(), newline=""))
    assert header == body["columns"] and len(rows) == 3
    assert [int(r[header.index("n")]) for r in rows] == [2, 5, 5]
    out = io.StringIO()
    call_command(
        "export_stats", NAME, "--study", str(judged_arena.pk), "--format", "json", stdout=out,
        stderr=io.StringIO(),
    )  # fmt: skip
    assert json.loads(out.getvalue())["rows"] == body["rows"]
    release = client.get(url, {"study": judged_arena.pk, "majority": "release"})
    assert release.status_code == 400 and "use majority=drop" in release.json()["detail"]
    html = client.get(reverse("stats:dashboard"), {"study": judged_arena.pk}).content.decode()
    section = re.search(rf'<section class="card" id="{NAME}">.*?</section>', html, re.S)
    assert section and "Pairwise judge vs people" in section.group(0)
    assert "A shown first" in section.group(0) and "B→A 2" in section.group(0)
    assert client_for(annotator).get(url, {"study": judged_arena.pk}).status_code == 404


# --- The service path end to end: judge_pairs on the fake vendor server ------------------------


def test_a_judge_that_always_picks_the_second_reply_shows_it_against_people(
    study_run, make_annotators, django_capture_on_commit_callbacks
):
    users = make_annotators(2)
    study = create_study(study_run, "pairwise", users, trigger_type="RECOVERY", name="Pairs")
    for user in users:
        rater = rater_of(study, user)
        while (assignment := assignment_next(rater=rater)) is not None:
            answer(rater, assignment, pick_case("B"))  # people: the rubric-injected reply
    n_items = study.items.count()

    def second(body):
        return json.dumps({"choice": "2", "rationale": "The second one acts on the details."})

    with FakeVendorServer(reply=second) as server:
        ModelEndpoint.objects.create(
            name="pj-second",
            display_name="Second",
            provider="openai-compatible",
            model_name="pj-second",
            base_url=server.openai_base_url,
        )
        celery_app.conf.task_always_eager = True
        try:
            with django_capture_on_commit_callbacks(execute=True):
                call_command(
                    "judge_pairs", str(study_run.pk), "--judge", "pj-second", "--pairs",
                    f"study={study.pk}", "--no-wait", stdout=io.StringIO(),
                )  # fmt: skip
        finally:
            celery_app.conf.task_always_eager = False
    assert PairwiseJudgment.objects.filter(judge_name="pj-second", state="done").count() == (
        2 * n_items
    )
    rows = _by_order(tables.build(NAME, TableRequest(study=study.pk)).rows)
    both, first_a, first_b = (rows["pj-second", order] for order in ("both", "ab", "ba"))
    # Every verdict flips: none survives the swap, and every pair is reported, not dropped.
    assert (both["n"], both["n_inconsistent"], both["n_no_verdict"]) == (0, n_items, 0)
    assert math.isnan(both["accuracy"])
    # A (vanilla) shown first, the second reply is B: the people's B every time; B shown
    # first, the second is A: never theirs.
    assert (first_a["n"], first_a["accuracy"], first_a["human_B_judge_B"]) == (
        n_items,
        1.0,
        n_items,
    )
    assert (first_b["n"], first_b["accuracy"], first_b["human_B_judge_A"]) == (
        n_items,
        0.0,
        n_items,
    )
    assert math.isnan(first_a["kappa"])  # one category each side: κ undefined, not 1


# --- The demo ---------------------------------------------------------------------------------


def test_the_demo_arena_study_is_on_the_demo_judges_pairs(db):
    """load_demo's arena study (the three models' vanilla replies) pairs replies the demo
    judges compared in both orders: once its annotators answer, every pair is compared."""
    call_command("load_demo", stdout=io.StringIO())
    study = Study.objects.get(kind="arena")
    assert tables.build(NAME, TableRequest(study=study.pk)).rows[0]["n"] == 0  # no answer yet
    for username in ("annotator1", "annotator2"):
        rater = rater_of(study, User.objects.get(username=username))
        while (assignment := assignment_next(rater=rater)) is not None:
            answer(rater, assignment, _by_side("A"))
    pairs = {frozenset((p.unit_a, p.unit_b)) for p in study_unit_pairs(study_id=study.pk)}
    verdicts: dict = {}
    for judge, a, b, order, winner in PairwiseJudgment.objects.values_list(
        "judge_name", "comparison__unit_a_id", "comparison__unit_b_id", "order", "winner"
    ):
        if frozenset((a, b)) in pairs:
            verdicts.setdefault((judge, frozenset((a, b))), set()).add(winner)
    flips = Counter(judge for (judge, _), winners in verdicts.items() if len(winners) > 1)
    rows = _by_order(tables.build(NAME, TableRequest(study=study.pk)).rows)
    assert {judge for judge, _ in rows} == {"demo-judge-primary", "demo-judge-crossfamily"}
    for judge in ("demo-judge-primary", "demo-judge-crossfamily"):
        assert rows[judge, "ab"]["n"] == rows[judge, "ba"]["n"] == len(pairs) == 15
        assert rows[judge, "both"]["n_inconsistent"] == flips[judge]
        assert rows[judge, "both"]["n"] + flips[judge] == 15
