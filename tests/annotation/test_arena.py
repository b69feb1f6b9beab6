"""The arena kind: pairs of any two reply sources (run × model × condition) at the same
triggers — what a selection makes of them, the pair schedule's balance, de-swapped answers,
the creation form, and the storage contract the battles and the ranking tables read."""

import random
from collections import Counter
from itertools import combinations, count

import pytest
from django.db.models import Max
from django.urls import reverse

from annotation.kinds import arena
from annotation.kinds.arena import ArenaAnswerForm, pair_schedule
from annotation.models import Answer, Assignment, Study
from annotation.services.assignments import AnswerInput, answer_submit, assignment_next
from annotation.services.studies import ItemDraft, StudyInputError, check_study_text
from benchmark.models import (
    Condition,
    EvaluationRun,
    EvaluationUnit,
    ModelEndpoint,
    RunSource,
    RunStatus,
    Trigger,
    UnitState,
)
from benchmark.vocabulary import BATTLE_SWAPPED, BATTLE_TIES, BattleWinner
from tests.annotation.conftest import MODELS, rater
from tests.annotation.test_workspace_pages import HTMX, key_of, token_of

pytestmark = pytest.mark.django_db

TRIGGERS = 12  # build_run: four dialogues, triggers at turns 1, 4 and 8
ZEPHYR, QUARTZ = (name for name, _, _ in MODELS)


def second_run(run, *, name="Second run", models=(ZEPHYR,)) -> EvaluationRun:
    """Another finished run over the same triggers: the given models, vanilla only, each reply
    its own text (naming nothing)."""
    other = EvaluationRun.objects.create(
        name=name,
        source=RunSource.IMPORTED,
        status=RunStatus.DONE,
        conditions=[Condition.VANILLA],
        primary_judge=run.primary_judge,
    )
    endpoints = list(ModelEndpoint.objects.filter(name__in=models))
    other.endpoints.set(endpoints)
    other.dialogues.set(run.dialogues.all())
    # Ids after the first run's (which no page number could be mistaken for; a blinding test
    # looks for every unit id).
    pks = count(EvaluationUnit.objects.aggregate(top=Max("pk"))["top"] + 1)
    EvaluationUnit.objects.bulk_create(
        EvaluationUnit(
            pk=next(pks),
            run=other,
            trigger=trigger,
            endpoint=endpoint,
            condition=Condition.VANILLA,
            state=UnitState.DONE,
            reply=f"Another reply, number {n}: ship the lamp ahead.",
        )
        for n, (trigger, endpoint) in enumerate(
            (trigger, endpoint) for trigger in Trigger.objects.all() for endpoint in endpoints
        )
    )
    return other


def pairs_of(study) -> Counter:
    return Counter(
        (item.payload["sources"]["A"], item.payload["sources"]["B"]) for item in study.items.all()
    )


# --- Selection and the storage contract -------------------------------------------------------


def test_every_pair_of_sources_meets_at_every_trigger_with_labels_naming_the_condition(
    run, make_study
):
    study = make_study("arena", runs=[run])
    labels = [f"{m} · {c}" for m in (QUARTZ, ZEPHYR) for c in ("vanilla", "rubric-injected")]
    assert pairs_of(study) == {pair: TRIGGERS for pair in combinations(labels, 2)}
    assert study.run == run and study.selection["runs"] == []
    for item in study.items.select_related("unit__endpoint", "unit_b__endpoint", "trigger__turn"):
        payload = item.payload
        assert sorted(payload["sides"]) == ["A", "B"]
        for side, unit in (("A", item.unit), ("B", item.unit_b)):
            condition = Condition(unit.condition).label.lower()
            assert payload["sources"][side] == f"{unit.endpoint.name} · {condition}"
            assert unit.trigger_id == item.trigger_id and unit.sample_index == 0
        assert payload["question_id"] == item.trigger.turn.dialogue.unique_id_eval
        assert payload["turn"] == item.trigger.turn.index
        assert item.key == (
            f"{payload['question_id']}#t{payload['turn']}#"
            f"{payload['sources']['A']} vs {payload['sources']['B']}"
        )


def test_one_condition_labels_sources_by_the_model_alone(run, make_study):
    study = make_study("arena", runs=[run], conditions=[Condition.VANILLA])
    assert pairs_of(study) == {(QUARTZ, ZEPHYR): TRIGGERS}
    vanilla = set(EvaluationUnit.objects.filter(condition="vanilla").values_list("pk", flat=True))
    assert all({i.unit_id, i.unit_b_id} <= vanilla for i in study.items.all())


def test_one_model_in_two_conditions_and_the_trigger_type(run, make_study):
    quartz = ModelEndpoint.objects.get(name=QUARTZ)
    study = make_study("arena", runs=[run], endpoints=[quartz], trigger_type="RECOVERY")
    assert pairs_of(study) == {(f"{QUARTZ} · vanilla", f"{QUARTZ} · rubric-injected"): 4}
    assert set(study.items.values_list("trigger__type", flat=True)) == {"RECOVERY"}


def test_two_runs_name_their_runs_and_the_study_records_both(run, make_study):
    other = second_run(run)
    study = make_study("arena", runs=[run, other], conditions=[Condition.VANILLA])
    # Side A is the source earlier in (run, model, condition) order.
    assert set(pairs_of(study)) == {
        (f"{QUARTZ} · Test run", f"{ZEPHYR} · Test run"),
        (f"{QUARTZ} · Test run", f"{ZEPHYR} · Second run"),
        (f"{ZEPHYR} · Test run", f"{ZEPHYR} · Second run"),
    }
    assert set(pairs_of(study).values()) == {TRIGGERS}
    assert study.run is None and study.selection["runs"] == sorted([run.pk, other.pk])
    # A second run of the same name: the labels tell them apart by id.
    twin = second_run(run, name="Test run", models=(QUARTZ,))
    study = make_study("arena", runs=[run, twin], conditions=[Condition.VANILLA], name="Twins")
    labels = {label for pair in pairs_of(study) for label in pair}
    assert labels == {
        f"{QUARTZ} · Test run #{run.pk}",
        f"{ZEPHYR} · Test run #{run.pk}",
        f"{QUARTZ} · Test run #{twin.pk}",
    }


def test_only_finished_sample_zero_replies_count(run, make_study):
    quartz = ModelEndpoint.objects.get(name=QUARTZ)
    broken = EvaluationUnit.objects.filter(endpoint=quartz, condition="vanilla").order_by("pk")
    broken_triggers = {u.trigger_id for u in broken[:2]}
    EvaluationUnit.objects.filter(pk=broken[0].pk).update(state=UnitState.ERROR)
    EvaluationUnit.objects.filter(pk=broken[1].pk).update(reply="")
    extra = EvaluationUnit.objects.get(pk=broken[2].pk)
    extra.pk, extra.sample_index = None, 1
    extra.save()
    study = make_study("arena", runs=[run], endpoints=[quartz], conditions=[])
    assert study.items.count() == TRIGGERS - 2
    assert not study.items.filter(trigger_id__in=broken_triggers).exists()
    assert not study.items.filter(unit_id=extra.pk).exists()
    assert not study.items.filter(unit_b_id=extra.pk).exists()


@pytest.mark.parametrize(
    ("fields", "field", "fragment"),
    [
        ({"runs": [], "run": None}, "runs", "Choose the evaluation run"),
        ({"conditions": ["vanilla"], "endpoints": "one"}, "endpoints", "this selection has 1"),
        ({"conditions": ["shaken"]}, "conditions", "Unknown condition 'shaken'"),
        ({"per_pair": 0}, "per_pair", "from 1 to 1,000,000"),
        ({"endpoints": "judge"}, "endpoints", "Not a model of this run: oracle-judge-alpha"),
        ({"name": "Zephyr or not?"}, "name", "must not reveal"),
    ],
)
def test_a_bad_selection_is_refused_on_its_field(run, make_study, fields, field, fragment):
    if fields.get("endpoints") == "one":
        fields["endpoints"] = [ModelEndpoint.objects.get(name=QUARTZ)]
    elif fields.get("endpoints") == "judge":
        fields["endpoints"] = [ModelEndpoint.objects.get(name="oracle-judge-alpha")]
    with pytest.raises(StudyInputError) as refused:
        make_study("arena", **{"runs": [run], **fields})
    assert fragment in " ".join(refused.value.errors[field]), refused.value.errors
    assert not Study.objects.exists()


def test_created_from_the_staff_page_with_its_own_fields(
    run, make_annotators, client_for, researcher
):
    staff = client_for(researcher)
    form = staff.get(reverse("annotation:study_new"), {"kind": "arena"}, headers=HTMX)
    html = form.content.decode()
    for field in ("runs", "endpoints", "conditions", "trigger_type", "per_pair"):
        assert f'id="field-{field}"' in html, field
    assert 'id="field-run"' not in html and 'id="field-condition"' not in html
    people = make_annotators(2)
    response = staff.post(
        reverse("annotation:study_new"),
        {
            "kind": "arena",
            "name": "Which reply is better?",
            "overlap": "2",
            "lease_minutes": "30",
            "annotators": [str(p.pk) for p in people],
            "runs": [str(run.pk)],
            "conditions": ["vanilla", "rubric_injected"],
            "per_pair": "3",
            "seed": "5",
        },
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    study = Study.objects.get()
    assert study.kind == "arena" and study.items.count() == 6 * 3
    assert set(pairs_of(study).values()) == {3}
    assert study.selection["per_pair"] == 3
    assert study.selection["conditions"] == ["vanilla", "rubric_injected"]


# --- The pair schedule ------------------------------------------------------------------------


def test_a_per_pair_budget_gives_every_pair_as_many_items_at_distinct_triggers(run, make_study):
    study = make_study("arena", runs=[run], per_pair=2)
    assert pairs_of(study) == {pair: 2 for pair in pairs_of(study)} and len(pairs_of(study)) == 6
    by_pair = {}
    for item in study.items.all():
        pair = (item.payload["sources"]["A"], item.payload["sources"]["B"])
        by_pair.setdefault(pair, []).append(item.trigger_id)
    assert all(len(set(t)) == len(t) for t in by_pair.values())
    # Twelve items over twelve triggers: the least-used trigger first, so each once.
    assert set(Counter(study.items.values_list("trigger_id", flat=True)).values()) == {1}


def test_the_hand_out_order_is_balanced_after_every_round(run, make_study):
    study = make_study("arena", runs=[run], max_items=20, seed=3)
    items = list(study.items.order_by("position"))
    assert len(items) == 20
    counts: Counter = Counter()
    for n, item in enumerate(items, start=1):
        counts[(item.payload["sources"]["A"], item.payload["sources"]["B"])] += 1
        if n % 6 == 0:  # a round: every pair once more
            assert set(counts.values()) == {n // 6} and len(counts) == 6
    assert max(counts.values()) - min(counts.values()) <= 1


def test_the_schedule_is_seeded(run, make_study):
    one = make_study("arena", runs=[run], per_pair=3, seed=11, name="One")
    two = make_study("arena", runs=[run], per_pair=3, seed=11, name="Two")
    three = make_study("arena", runs=[run], per_pair=3, seed=12, name="Three")

    def keys(study):
        return list(study.items.order_by("position").values_list("key", flat=True))

    assert keys(one) == keys(two) != keys(three)


def _draft(a: str, b: str, trigger: int) -> ItemDraft:
    return ItemDraft(
        key=f"{trigger}#{a} vs {b}", trigger_id=trigger, payload={"sources": {"A": a, "B": b}}
    )


@pytest.mark.parametrize("seed", range(5))
def test_many_sources_with_uneven_coverage_stay_within_one_of_each_other(seed):
    """Eight sources, 28 pairs over 40 triggers where each reply is missing now and then: every
    pair gets its budget or all the triggers it has, and the others stay within one."""
    rng = random.Random(seed)
    sources = [f"s{n}" for n in range(8)]
    present = {(s, t): rng.random() > 0.3 for s in sources for t in range(40)}
    drafts = [
        _draft(a, b, t)
        for t in range(40)
        for a, b in combinations(sources, 2)
        if present[(a, t)] and present[(b, t)]
    ]
    available = Counter((d.payload["sources"]["A"], d.payload["sources"]["B"]) for d in drafts)
    chosen = pair_schedule(drafts, rng=random.Random(seed), per_pair=None, total=200)
    assert len(chosen) == 200
    got = Counter((d.payload["sources"]["A"], d.payload["sources"]["B"]) for d in chosen)
    full = max(got.values())
    for pair, n in available.items():
        assert got[pair] == n or got[pair] >= full - 1, (pair, n, got[pair])
    assert len({d.key for d in chosen}) == 200  # no item twice
    budget = pair_schedule(drafts, rng=random.Random(seed), per_pair=4, total=None)
    per = Counter((d.payload["sources"]["A"], d.payload["sources"]["B"]) for d in budget)
    assert all(per[pair] == min(4, n) for pair, n in available.items())


# --- Answers: de-swapped, by screen position -------------------------------------------------


@pytest.mark.parametrize(
    ("order", "choice", "label"),
    [
        (["A", "B"], "1", BattleWinner.MODEL_A),
        (["A", "B"], "2", BattleWinner.MODEL_B),
        (["B", "A"], "1", BattleWinner.MODEL_B),
        (["B", "A"], "2", BattleWinner.MODEL_A),
        (["B", "A"], "tie", BattleWinner.TIE),
        (["B", "A"], "bothbad", BattleWinner.TIE_BOTHBAD),
    ],
)
def test_a_screen_choice_is_stored_as_the_winner_of_side_a_or_b(order, choice, label):
    study = Study(kind="arena", name="s", reason_required=False)
    form = ArenaAnswerForm(
        {"idempotency_key": "abcdefgh12", "choice": choice, "confidence": "4"},
        study=study,
        assignment=Assignment(display={"order": order}),
    )
    assert form.is_valid(), form.errors
    answer = form.to_input()
    assert (answer.label, answer.details, answer.confidence) == (label, {"choice": choice}, 4)


def test_every_battle_outcome_can_be_chosen_on_screen():
    assert set(arena.SCREEN_TIES.values()) == set(BATTLE_TIES)
    assert set(arena.SIDE_WINS.values()) | set(BATTLE_TIES) == set(BattleWinner.values)
    assert {BATTLE_SWAPPED[BATTLE_SWAPPED[w]] for w in BattleWinner.values} == set(
        BattleWinner.values
    )
    assert arena.KIND.normalise_label("bothbad") == BattleWinner.TIE_BOTHBAD
    assert arena.KIND.normalise_label("MODEL_A") == BattleWinner.MODEL_A
    assert arena.KIND.normalise_label("model_c") is None


def test_answers_through_the_pages_are_deswapped_and_sides_alternate(
    run, make_study, make_annotators, client
):
    users = make_annotators(2)
    study = make_study("arena", runs=[run], annotators=users, per_pair=1)
    choices = ("1", "2", "tie", "bothbad", "1", "2")
    for user in users:
        client.force_login(user)
        response = client.post(reverse("annotation:next", args=[study.pk]), headers=HTMX)
        for choice in choices:
            response = client.post(
                reverse("annotation:answer", args=[study.pk, token_of(response)]),
                {"idempotency_key": key_of(response), "choice": choice, "confidence": "2"},
                headers=HTMX,
            )
            assert response.status_code == 200
    answers = list(Answer.objects.select_related("assignment__item"))
    assert len(answers) == 12
    for answer in answers:
        choice, order = answer.details["choice"], answer.display["order"]
        expected = arena.SCREEN_TIES.get(choice) or arena.SIDE_WINS[order[int(choice) - 1]]
        assert answer.label == expected
    # Each item's two raters saw its sides in opposite orders.
    by_item: dict[int, list] = {}
    for answer in answers:
        by_item.setdefault(answer.assignment.item_id, []).append(answer.display["order"])
    assert all(one == two[::-1] for one, two in by_item.values())


def test_gold_items_are_placed_among_the_schedule_and_read_bothbad(run, make_study):
    first = make_study("arena", runs=[run], per_pair=1, name="Keys")
    key = first.items.order_by("position").first().key
    study = make_study(
        "arena", runs=[run], per_pair=1, n_annotators=3, gold=f"{key} bothbad", name="Gold"
    )
    gold = study.items.get(is_gold=True)
    assert gold.expected == BattleWinner.TIE_BOTHBAD and gold.required_answers == 3
    assert study.items.filter(is_gold=False).count() == 6  # the schedule, plus the gold item


def test_the_study_page_sums_up_the_battles(
    run, make_study, make_annotators, client_for, researcher
):
    users = make_annotators(2)
    study = make_study("arena", runs=[run], annotators=users, per_pair=1, overlap=1)
    for user, label, choice in zip(
        users, (BattleWinner.MODEL_A, BattleWinner.TIE_BOTHBAD), ("1", "bothbad"), strict=True
    ):
        r = rater(study, user)
        assignment = assignment_next(rater=r)
        answer_submit(
            rater=r,
            item_token=assignment.item.token,
            answer=AnswerInput(label=label, confidence=3, details={"choice": choice}),
            idempotency_key=f"k-{user.pk}",
        )
    html = client_for(researcher).get(reverse("annotation:study_detail", args=[study.pk]))
    text = html.content.decode()
    assert "Battles with a winner: <strong>1</strong> of 2" in text
    assert "(ties 0, both bad 1)" in text and "Response 1" in text


def test_an_edit_naming_a_model_of_any_of_its_runs_is_refused(run, make_study):
    """A study over several runs has no one run: the blinding rule for a later edit of its name
    reads every run its selection recorded."""
    umber = ModelEndpoint.objects.create(
        name="umber-only-second", display_name="Umber Only", provider="replay", model_name="u-1"
    )
    other = second_run(run, models=(ZEPHYR, umber.name))
    study = make_study("arena", runs=[run, other], conditions=[Condition.VANILLA])
    assert study.run is None
    errors = check_study_text(study=study, name="Umber or not?", instructions="")
    assert "must not reveal" in " ".join(errors["name"]) and "umber" in " ".join(errors["name"])
    assert check_study_text(study=study, name="Which is better?", instructions="") == {}
