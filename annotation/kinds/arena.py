"""Arena (Chatbot Arena style): two replies at the same trigger from any two reply sources —
a source is (run, model, condition) — double-blind; which one helps the user more?

Staff choose one or more runs, the models and the conditions; every pair of the resulting
sources meets at the triggers where both have a finished reply (sample 0). With many sources
the items are sampled so that every pair gets about as many comparisons (``sample``: rounds
over the pairs; docs/annotation.md, "Arena: the pair schedule").

Blind as the pairwise kind: an item's two sides, ``A`` and ``B``, are shown in a random order
that rotates between its raters (``StudyKind.display``); the page only ever knows "Response 1"
and "Response 2". An answer is stored de-swapped as a ``BattleWinner`` value for side A
against side B, with the screen position clicked in ``details["choice"]``.

Storage contract (``selectors.study_battles`` and the ranking tables read exactly this): an
item's ``payload`` holds ``sides`` (A and B, in the item's base screen order) and ``sources``
(``{"A": <label>, "B": <label>}``, server-only, never rendered), and ``question_id`` /
``turn`` where known (the dialogue's unique_id_eval and the trigger turn). A source's label is
the endpoint's handle, with `` · <condition>`` when the study compares more than one condition
and `` · <run name>`` when it draws on more than one run (``selection.source_label``), so labels
are unique within a study. Its ``unit`` is side A's reply, ``unit_b`` side B's.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from itertools import combinations
from random import Random

from django import forms

from annotation.forms import AnswerForm, confidence_field
from annotation.kinds.base import BattleSides, Shortcut, StudyKind, SummaryLine
from annotation.kinds.pairwise import CHOICE_KEYS, PairChoice
from annotation.kinds.registry import register
from annotation.kinds.selection import endpoint_names, source_label
from annotation.selectors import reply_context
from annotation.services.assignments import AnswerInput
from annotation.services.studies import ItemDraft, StudySpec
from benchmark.models import Condition, EvaluationUnit, ModelEndpoint, UnitState
from benchmark.vocabulary import BattleWinner

SIDES = ("A", "B")
# Side A / side B won (the sides are the item's, never screen positions).
SIDE_WINS = {"A": BattleWinner.MODEL_A.value, "B": BattleWinner.MODEL_B.value}
BOTH_BAD = "bothbad"
# What the annotator clicks, by screen position: the pairwise kind's three, and "both bad".
CHOICES = [
    (PairChoice.FIRST.value, PairChoice.FIRST.label),
    (PairChoice.SECOND.value, PairChoice.SECOND.label),
    (PairChoice.TIE.value, "Tie (both good)"),
    (BOTH_BAD, "Both bad"),
]
CHOICE_LABELS = dict(CHOICES)
ARENA_KEYS: dict[str, tuple[str, ...]] = {**CHOICE_KEYS, BOTH_BAD: ("b",)}
# A tie chosen on screen is the same tie for the sources.
SCREEN_TIES = {PairChoice.TIE.value: BattleWinner.TIE.value, BOTH_BAD: BattleWinner.TIE_BOTHBAD}
# Gold lines are "KEY EXPECTED", split at the last space: "tie (bothbad)" is written "bothbad".
LABEL_ALIASES = {"bothbad": BattleWinner.TIE_BOTHBAD.value}
# The schedule looks for the least-used trigger among this many of a pair's remaining ones
# (shuffled): enough to spread the pairs over the triggers, and bounded work per item.
TRIGGER_WINDOW = 64


class ArenaAnswerForm(AnswerForm):
    """A choice arrives as a screen position and is mapped back to side A / B here, on the
    server, from the order this annotator was shown."""

    choice = forms.ChoiceField(
        choices=CHOICES,
        widget=forms.RadioSelect,
        error_messages={
            "required": "Choose Response 1, Response 2, Tie or Both bad (keys 1, 2, 0, b)."
        },
    )
    confidence = confidence_field()
    keys = {"choice": ARENA_KEYS}

    def to_input(self) -> AnswerInput:
        choice = self.cleaned_data["choice"]
        order = self.assignment.display["order"]  # e.g. ["B", "A"]: Response 1 is side B
        label = SCREEN_TIES.get(choice) or SIDE_WINS[order[int(choice) - 1]]
        return AnswerInput(
            label=str(label),
            confidence=self.cleaned_data["confidence"],
            note=self.cleaned_data["note"].strip(),
            details={"choice": choice},
        )


@dataclass(frozen=True)
class Source:
    """One reply source of the selection: a model's replies in one condition of one run."""

    run_id: int
    run_name: str
    endpoint_id: int
    condition: str


def sources_of(spec: StudySpec) -> dict[Source, str]:
    """The selection's sources, each with its label, in a fixed order (run, model handle,
    condition): every chosen model (all of a run's when none is chosen) the run evaluated, in
    every chosen condition (all of its conditions when none is chosen) the run has."""
    runs = sorted(spec.selected_runs, key=lambda run: run.pk)
    chosen = {e.pk for e in spec.endpoints}
    names = Counter(run.name for run in runs)
    found: list[tuple[Source, str]] = []
    for run in runs:
        endpoints = run.endpoints.order_by("name").values_list("pk", "name")
        for endpoint_id, endpoint in endpoints:
            if chosen and endpoint_id not in chosen:
                continue
            for condition in Condition.values:
                if condition in run.conditions and (
                    not spec.conditions or condition in spec.conditions
                ):
                    # Two runs of the same name are told apart by their ids.
                    run_name = run.name if names[run.name] == 1 else f"{run.name} #{run.pk}"
                    found.append((Source(run.pk, run_name, endpoint_id, condition), endpoint))
    several_runs = len({s.run_id for s, _ in found}) > 1
    several_conditions = len({s.condition for s, _ in found}) > 1
    return {
        source: source_label(
            endpoint,
            condition=source.condition if several_conditions else "",
            run=source.run_name if several_runs else "",
        )
        for source, endpoint in found
    }


def pair_of(draft: ItemDraft) -> tuple[str, str]:
    return draft.payload["sources"]["A"], draft.payload["sources"]["B"]


def pair_schedule(
    drafts: list[ItemDraft], *, rng: Random, per_pair: int | None, total: int | None
) -> list[ItemDraft]:
    """The drafts to use, in hand-out order: rounds over the pairs of sources (in a new random
    order each round), each pair taking one more item per round — at the trigger, among its
    remaining ones, that the items so far use least (ties broken at random) — until a pair has
    ``per_pair`` items or no trigger left, and all stop at ``total`` items. So after every
    round, and within one at most by one, each pair has as many items as any other that still
    had a trigger left, a pair's items are at distinct triggers, and the triggers are used
    about equally often."""
    remaining: dict[tuple[str, str], list[ItemDraft]] = defaultdict(list)
    for draft in drafts:
        remaining[pair_of(draft)].append(draft)
    for pair in sorted(remaining):
        rng.shuffle(remaining[pair])
    used: Counter[int | None] = Counter()
    taken: Counter[tuple[str, str]] = Counter()
    chosen: list[ItemDraft] = []
    while remaining and (total is None or len(chosen) < total):
        order = sorted(remaining)
        rng.shuffle(order)
        for pair in order:
            if total is not None and len(chosen) >= total:
                break
            candidates = remaining[pair]
            window = range(min(len(candidates), TRIGGER_WINDOW))
            best = min(window, key=lambda i: used[candidates[i].trigger_id])
            draft = candidates.pop(best)
            used[draft.trigger_id] += 1
            taken[pair] += 1
            chosen.append(draft)
            if not candidates or (per_pair is not None and taken[pair] >= per_pair):
                del remaining[pair]
    return chosen


class Arena(StudyKind):
    key = "arena"
    label = "Arena (any two reply sources)"
    order = 15
    labels = tuple(BattleWinner.values)
    answer_form = ArenaAnswerForm
    # The pairwise kind's page: the conversation, Response 1 and 2, the choice's options (this
    # form's four) with their keys.
    template = "annotation/items/pairwise.html"
    shortcuts = (
        Shortcut("1", "Response 1 is better"),
        Shortcut("2", "Response 2 is better"),
        Shortcut(" or ".join(ARENA_KEYS[PairChoice.TIE]), "tie: both good"),
        Shortcut("b", "both bad"),
        Shortcut("Shift+1…5", "confidence 1–5"),
    )
    selection_fields = ("runs", "endpoints", "conditions", "trigger_type", "per_pair")
    empty_selection = (
        "No trigger of this selection has finished replies (sample 0) from two of its sources."
    )
    empty_selection_field = "runs"
    has_positions = True
    battles = True
    tables = ("arena-ranking", "arena-pairs", "pairwise-judge-human", "human-agreement")

    def normalise_label(self, raw: str) -> str | None:
        return LABEL_ALIASES.get(raw.strip().lower()) or super().normalise_label(raw)

    def answer_shown(self, answer) -> str:
        return CHOICE_LABELS.get(answer.details.get("choice"), answer.label)

    def expected_shown(self, expected, assignment) -> str:
        screen_ties = {label: choice for choice, label in SCREEN_TIES.items()}
        if expected in screen_ties:
            return CHOICE_LABELS[screen_ties[expected]]
        sides = {label: side for side, label in SIDE_WINS.items()}
        order = list(assignment.display.get("order") or [])
        side = sides.get(expected)
        return f"Response {order.index(side) + 1}" if side in order else expected

    def check(self, spec, errors) -> None:
        if not spec.selected_runs:
            return  # the common check says a run is needed
        sources = sources_of(spec)
        if len(sources) < 2:
            errors["endpoints"].append(
                "An arena compares at least two reply sources (model × condition × run); this "
                f"selection has {len(sources)}: choose more models, conditions or runs."
            )

    def select(self, spec) -> list[ItemDraft]:
        sources = sources_of(spec)
        index = {(s.run_id, s.endpoint_id, s.condition): s for s in sources}
        names = {
            endpoint.pk: endpoint_names(endpoint)
            for endpoint in ModelEndpoint.objects.filter(pk__in={s.endpoint_id for s in sources})
        }
        units = EvaluationUnit.objects.filter(
            run__in=spec.selected_runs,
            endpoint_id__in=names,
            state=UnitState.DONE,
            sample_index=0,
        ).exclude(reply="")
        if spec.conditions:
            units = units.filter(condition__in=spec.conditions)
        if spec.trigger_type:
            units = units.filter(trigger__type=spec.trigger_type)
        # Per trigger: where it is, and each source's reply there.
        at: dict[int, tuple[int, str, int]] = {}
        replies: dict[int, dict[Source, int]] = defaultdict(dict)
        for (
            pk,
            run_id,
            endpoint_id,
            condition,
            trigger_id,
            dialogue_id,
            uid,
            turn,
        ) in units.order_by("trigger_id", "pk").values_list(
            "pk",
            "run_id",
            "endpoint_id",
            "condition",
            "trigger_id",
            "trigger__turn__dialogue_id",
            "trigger__turn__dialogue__unique_id_eval",
            "trigger__turn__index",
        ):
            source = index.get((run_id, endpoint_id, condition))
            if source is not None:
                at[trigger_id] = (dialogue_id, uid, turn)
                replies[trigger_id][source] = pk
        order = list(sources)  # side A is the source earlier in this order
        drafts = []
        for trigger_id, by_source in replies.items():
            dialogue_id, uid, turn = at[trigger_id]
            present = [s for s in order if s in by_source]
            for a, b in combinations(present, 2):
                label_a, label_b = sources[a], sources[b]
                drafts.append(
                    ItemDraft(
                        key=f"{uid}#t{turn}#{label_a} vs {label_b}",
                        dialogue_id=dialogue_id,
                        trigger_id=trigger_id,
                        unit_id=by_source[a],
                        unit_b_id=by_source[b],
                        payload={
                            "sources": {"A": label_a, "B": label_b},
                            "question_id": uid,
                            "turn": turn,
                        },
                        names=(*names[a.endpoint_id], *names[b.endpoint_id]),
                        sides=SIDES,
                    )
                )
        return drafts

    def sample(self, drafts, *, spec, gold, rng) -> list[ItemDraft]:
        regular = [d for d in drafts if d.key not in gold]
        chosen = pair_schedule(regular, rng=rng, per_pair=spec.per_pair, total=spec.max_items)
        # Gold items at random places: the schedule's order is kept around them.
        for draft in sorted((d for d in drafts if d.key in gold), key=lambda d: d.key):
            chosen.insert(rng.randrange(len(chosen) + 1), draft)
        return chosen

    def item_view(self, assignment, study) -> dict:
        item = assignment.item
        context = reply_context(item)
        by_side = {
            "A": context.replies.get(item.unit_id, ""),
            "B": context.replies.get(item.unit_b_id, ""),
        }
        return {
            "conversation": context.conversation,
            "responses": [
                {"number": n, "text": by_side[side]}
                for n, side in enumerate(assignment.display["order"], start=1)
            ],
        }

    def form_initial(self, answer, assignment) -> dict:
        initial = super().form_initial(answer, assignment)
        if answer is not None:
            initial["choice"] = answer.details.get("choice")
        return initial

    def summary(self, items, counted) -> list[SummaryLine]:
        outcomes = Counter(v.label for v in counted)
        decided = outcomes[BattleWinner.MODEL_A] + outcomes[BattleWinner.MODEL_B]
        return [
            SummaryLine(
                "Battles with a winner",
                decided,
                rest=f"of {len(counted)}",
                detail=f"(ties {outcomes[BattleWinner.TIE]}, both bad "
                f"{outcomes[BattleWinner.TIE_BOTHBAD]})",
            )
        ]

    def battle_sides(self, item) -> BattleSides:
        return BattleSides(item.source_a or "", item.source_b or "", item.question_id, item.turn)

    def battle_winner(self, label: str) -> str:
        return label

    def vote_values(self, details, display) -> dict:
        return {"position_chosen": details.get("choice", "")}


KIND = register(Arena())
