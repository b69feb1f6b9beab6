"""What a study kind declares: the base class every kind module subclasses.

A kind is everything that differs between, say, a pairwise preference study and a dialogue
audit — what its items are made from, what the annotator sees and answers, what an answer
decides and which statistics read it — and nothing else: handing out items, leases, undo,
idempotency, blinding of the page's ids and the raw exports are the same for every kind and
live outside (``services/``, ``selectors.py``, ``views.py``).

An answer's ``label`` is its main categorical value, normalised per kind (one of ``labels``),
so that agreement, gold accuracy and the statistics treat every kind alike.

To add a kind: write ``annotation/kinds/<name>.py`` with a subclass and ``register(...)``, its
item template under ``templates/annotation/items/``, and its tests (docs/architecture.md).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from datetime import datetime
from random import Random
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

from core.turn_images import ZOOM_KEY

if TYPE_CHECKING:
    from django.template import Template

    from annotation.forms import AnswerForm
    from annotation.models import Answer, Assignment, Rater, Study, StudyItem
    from annotation.services.studies import ItemDraft, StudySpec


@dataclass(frozen=True)
class Shortcut:
    """One row of the ``?`` overlay: the keys, and what they do."""

    keys: str
    action: str


@dataclass(frozen=True)
class SummaryLine:
    """A line of the study page's summary: ``label: <strong>value</strong> rest (detail)``."""

    label: str
    value: Any
    rest: str = ""
    detail: str = ""


@dataclass(frozen=True)
class BattleItem:
    """What ``selectors.study_battles`` reads of a study item, for its kind to say which two
    sources met in it and where (``StudyKind.battle_sides``): the payload's ``sources`` and
    ``question_id`` / ``turn`` (an arena item), the model of its reply (the endpoint's handle,
    or an imported release item's ``evaluated_model``), its dialogue and trigger turn, and an
    imported release item's ``recovery_turn``."""

    key: str
    source_a: str | None
    source_b: str | None
    question_id: str | int | None
    turn: int | None
    model: str | None
    dialogue: str | None
    trigger_turn: int | None
    release_turn: int | None


class BattleSides(NamedTuple):
    """Source A's and source B's labels, and where they met (a Chatbot Arena battle's
    ``question_id`` and ``turn``; None where unknown)."""

    source_a: str
    source_b: str
    question_id: str | int | None
    turn: int | None


# The shortcuts every workspace has (the workspace's own keys, in static/js/workspace.js).
COMMON_SHORTCUTS = (
    Shortcut("Enter", "submit the answer (or start / next)"),
    Shortcut("Ctrl+Enter", "submit while typing in a text box"),
    Shortcut(
        "r", "jump to the reason / note box (each item, and a form sent back, starts outside it)"
    ),
    Shortcut("Esc", "leave the text box (shortcuts work again)"),
    Shortcut("u", "undo your last answer in this study"),
    Shortcut("s", "skip this item (optional reason; it goes back to the pool for others)"),
    Shortcut("g", "flag this item for staff: broken, offensive or unclear (not an answer)"),
    Shortcut("h", "my answers: what you have answered and skipped in this study"),
    Shortcut("m", "show the texts raw, as written, or rendered (Markdown)"),
    Shortcut(ZOOM_KEY, "zoom the conversation's latest image (← / → the others; z or Esc closes)"),
    Shortcut("?", "show or hide this list"),
)


class StudyKind(ABC):
    """A study kind. Subclasses set the class attributes, implement ``select`` and
    ``item_view`` (a kind without them cannot be instantiated) and override the other hooks
    they need; one instance per kind is registered (``registry.register``)."""

    # --- Identity ------------------------------------------------------------------------
    key: ClassVar[str]  # stored in Study.kind (at most 20 characters)
    label: ClassVar[str]  # shown to staff and annotators
    order: ClassVar[int] = 100  # place in menus (smaller first)

    # --- Answers -------------------------------------------------------------------------
    labels: ClassVar[tuple[str, ...]]  # every value an answer's label may take, in scale order
    ordinal: ClassVar[bool] = False  # whether ``labels`` are ordered (ordinal agreement)
    answer_form: ClassVar[type[AnswerForm]]
    # The item's part of the workspace: a template name, or a Template object.
    template: ClassVar[str | Template]
    shortcuts: ClassVar[tuple[Shortcut, ...]] = ()  # the kind's own keys, for the overlay

    # --- Creation ------------------------------------------------------------------------
    # The creation form's selection fields this kind uses (``StudyCreateForm`` shows only
    # these); see ``StudySpec`` for what each means.
    selection_fields: ClassVar[tuple[str, ...]] = ("run", "endpoints", "trigger_type")
    # Items are a run's replies (a run is required, models and conditions are blinded in the
    # name and instructions); otherwise the corpus's dialogues.
    from_run: ClassVar[bool] = True
    empty_selection: ClassVar[str] = "The run has no finished reply matching this selection."
    empty_selection_field: ClassVar[str] = "run"
    always_requires_reason: ClassVar[bool] = False
    # Whether a third rater (an adjudicator) decides when the first two split.
    has_adjudicators: ClassVar[bool] = False
    overlap_note: ClassVar[str] = ""  # after "Annotators per item: k" on the study page
    # k offered when the kind is chosen on the creation form (any k from 1 to 20 may be given).
    default_overlap: ClassVar[int] = 2

    # --- Statistics ----------------------------------------------------------------------
    tables: ClassVar[tuple[str, ...]] = ("human-agreement",)
    # Imported release items: the payload field holding the judge's verdict on the item.
    release_judge_field: ClassVar[str] = "judge_score"
    # Whether answers record a screen position (``details["choice"]`` "1" / "2" / "tie"):
    # the study page then shows each rater's share of "Response 1" (position bias).
    has_positions: ClassVar[bool] = False
    # Whether each answer is a battle between two reply sources: ``selectors.study_battles``
    # reads such a study (``battle_sides``, ``battle_winner``), and so do the battles export
    # (the Chatbot Arena format) and the ranking tables.
    battles: ClassVar[bool] = False

    def __repr__(self) -> str:
        return f"<study kind {self.key}>"

    # --- Labels --------------------------------------------------------------------------
    def normalise_label(self, raw: str) -> str | None:
        """A label as typed by a person (any case) → its stored form, or None if not one."""
        wanted = raw.strip().lower()
        return next((label for label in self.labels if label.lower() == wanted), None)

    def answer_shown(self, answer: Answer) -> str:
        """The answer as its annotator saw it (the workspace's "Your answer")."""
        return answer.label.title()

    def expected_shown(self, expected: str, assignment: Assignment) -> str:
        """A gold item's expected label as this rater saw the choices (a practice item's
        feedback): by default as ``answer_shown`` shows an answer with that label. A kind whose
        answers are screen positions maps it through ``assignment.display``, so the feedback
        names no side's condition or source."""
        return expected.title()

    def all_shortcuts(self) -> tuple[Shortcut, ...]:
        return (*self.shortcuts, *COMMON_SHORTCUTS)

    # --- Creation ------------------------------------------------------------------------
    def check(self, spec: StudySpec, errors: dict[str, list[str]]) -> None:
        """Add the kind's own problems with ``spec`` to ``errors``, by field. The common
        checks (name, overlap, annotators, a run for ``from_run`` kinds, …) have run."""
        return None  # by default: nothing of its own

    @abstractmethod
    def select(self, spec: StudySpec) -> list[ItemDraft]:
        """The items ``spec`` selects, unsampled and in any order."""

    def sample(
        self, drafts: list[ItemDraft], *, spec: StudySpec, gold: dict[str, str], rng: Random
    ) -> list[ItemDraft]:
        """The items the study is created with, in hand-out order (an item's place in it is
        its ``position``): by default a seeded random sample of ``spec.max_items`` of the
        regular drafts, the gold ones (keys of ``gold``) added, all in random order."""
        rng.shuffle(drafts)
        regular = [d for d in drafts if d.key not in gold]
        if spec.max_items is not None:
            regular = regular[: spec.max_items]
        chosen = regular + [d for d in drafts if d.key in gold]
        rng.shuffle(chosen)  # gold items anywhere, not at the end
        return chosen

    def after_create(self, study: Study, drafts: list[ItemDraft]) -> None:
        """Called in the creating transaction once the study's items exist."""
        return None  # by default: nothing of its own

    # --- Handing out and showing ---------------------------------------------------------
    def display(self, item: StudyItem, slot: int) -> dict:
        """What the rater in place ``slot`` (0, 1, …) is shown, fixed when the item is first
        handed to them: the item's base side order rotated by ``slot``, so sides alternate
        between an item's raters."""
        sides = item.payload.get("sides") or []
        if not sides:
            return {}
        shift = slot % len(sides)
        return {"order": sides[shift:] + sides[:shift]}

    @abstractmethod
    def item_view(self, assignment: Assignment, study: Study) -> dict:
        """What the workspace shows for this assignment: blinded — nothing in it may name a
        model, a judge, a condition or a unit (tests/annotation/test_blinding.py)."""

    def form_initial(self, answer: Answer | None, assignment: Assignment) -> dict:
        """Initial form values: an undone ``answer`` as it was given (else the defaults)."""
        if answer is None:
            return {}
        return {"note": answer.note, "confidence": answer.confidence}

    def feedback(self, study: Study, rater: Rater, shown_item_id: int | None) -> dict | None:
        """Something to tell the rater about their last answer once it is submitted (shown
        above the next item), or None."""
        return None

    # --- What answers decide -------------------------------------------------------------
    def decide(self, item: StudyItem, study: Study, now: datetime) -> None:
        """Update ``item`` (outcome, needs_adjudication, required_answers) and whatever it
        decides elsewhere from its live answers. Called with the item's row locked, after
        every answer and undo; the caller saves the item's fields."""
        return None  # by default: nothing of its own

    def summary(self, items: dict, counted: list) -> list[SummaryLine]:
        """Extra lines for the study page: ``items`` are the item counts of
        ``selectors.study_overview`` (total, complete, gold, and ``outcomes``: decided outcome
        → items), ``counted`` the live votes (``annotation.metrics.Vote``) of raters not
        excluded."""
        return []

    # --- Battles -------------------------------------------------------------------------
    def battle_sides(self, item: BattleItem) -> BattleSides:
        """The item's two sources and where they met (a kind with ``battles``)."""
        raise NotImplementedError(f"{self.key} answers are not battles")

    def battle_winner(self, label: str) -> str:
        """An answer's label as a ``BattleWinner`` value, for source A against source B."""
        raise NotImplementedError(f"{self.key} answers are not battles")

    # --- Exports -------------------------------------------------------------------------
    def vote_values(self, details: dict, display: dict) -> dict[str, Any]:
        """The votes export's kind-specific columns for one answer (``stats/exports.py``:
        position_chosen, injected_on_left, suggested, suggestion_changed)."""
        return {}
