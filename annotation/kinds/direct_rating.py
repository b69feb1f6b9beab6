"""Direct rating (the release's Study 1): a person scores one reply against its trigger's
rubric — Pass, Partial or Fail, with a confidence and a rationale. If the study says so
(``Study.reveal_judge_verdict``, off by default: it can anchor the next ratings), they then see
the run's primary judge's verdict, and the answer it follows becomes final (no undo)."""

from __future__ import annotations

from annotation.forms import confidence_field
from annotation.kinds.base import Shortcut, StudyKind
from annotation.kinds.registry import register
from annotation.kinds.selection import endpoint_names, run_units, unit_key
from annotation.kinds.verdicts import VerdictAnswerForm, verdict_initial, verdict_shortcut
from annotation.selectors import known_facts, last_answer, reply_context, rubric
from annotation.services.assignments import answer_verdict_reveal
from annotation.services.studies import ItemDraft
from benchmark.models import Judgment, JudgmentState
from benchmark.vocabulary import VERDICT_ORDER


class DirectAnswerForm(VerdictAnswerForm):
    note_label = "Rationale"
    confidence = confidence_field()


class DirectRating(StudyKind):
    key = "direct_rating"
    label = "Direct rating"
    order = 40
    labels = VERDICT_ORDER  # worst to best: an ordinal scale
    ordinal = True
    answer_form = DirectAnswerForm
    template = "annotation/items/direct_rating.html"
    shortcuts = (verdict_shortcut(""), Shortcut("Shift+1…5", "confidence 1–5"))
    selection_fields = ("run", "endpoints", "trigger_type", "condition", "reveal_judge_verdict")
    always_requires_reason = True

    def select(self, spec) -> list[ItemDraft]:
        units = run_units(spec)
        if spec.condition:
            units = units.filter(condition=spec.condition)
        return [
            ItemDraft(
                key=unit_key(u),
                dialogue_id=u.trigger.turn.dialogue_id,
                trigger_id=u.trigger_id,
                unit_id=u.pk,
                names=endpoint_names(u.endpoint),
            )
            for u in units
        ]

    def item_view(self, assignment, study) -> dict:
        item = assignment.item
        context = reply_context(item)
        return {
            "conversation": context.conversation,
            "reply": context.replies.get(item.unit_id, ""),
            "rubric": rubric(context.trigger),
            "known": known_facts(context.trigger),
        }

    def form_initial(self, answer, assignment) -> dict:
        return verdict_initial(super().form_initial(answer, assignment), answer)

    def feedback(self, study, rater, shown_item_id) -> dict | None:
        """After submission only, and only in a study that reveals it: the run's primary judge
        on the reply just rated (for an imported study, the release's judge_score). Recorded on
        the answer before it is shown, which makes that answer final."""
        if not study.reveal_judge_verdict:
            return None
        answer = last_answer(rater=rater)
        if answer is None or answer.assignment.item_id == shown_item_id:
            return None
        item = answer.assignment.item
        judgment = (
            Judgment.objects.filter(
                unit_id=item.unit_id,
                judge_id=study.run.primary_judge_id,
                state=JudgmentState.DONE,
            ).first()
            if study.run_id and item.unit_id
            else None
        )
        verdict = judgment.verdict if judgment else item.payload.get("judge_score", "").upper()
        if not verdict or not answer_verdict_reveal(answer_id=answer.pk):
            return None
        return {
            "yours": answer.label,
            "judge": verdict,
            "rationale": judgment.rationale
            if judgment
            else item.payload.get("judge_rationale", ""),
            "agree": verdict == answer.label,
        }


KIND = register(DirectRating())
