"""Judge adjudication (SPEC 2.6): where the run's judges disagree on a reply, people decide
its final verdict. The judges are shown as "Judge A", "Judge B", … in an order random per item
and rotated between its raters; their evidence quotes are marked in the reply in their colour.
Once an item has its k answers, their strict majority is the disagreement's final verdict
(``JudgeDisagreement.final_verdict``, which the statistics' "adjudicated" source reads)."""

from __future__ import annotations

from collections import Counter

from annotation.highlight import highlight
from annotation.kinds.base import StudyKind, SummaryLine
from annotation.kinds.registry import register
from annotation.kinds.selection import endpoint_names, unit_key
from annotation.kinds.verdicts import VerdictAnswerForm, verdict_initial, verdict_shortcut
from annotation.selectors import reply_context, rubric
from annotation.services.assignments import live_answers
from annotation.services.studies import ItemDraft
from benchmark.models import JudgeDisagreement, Judgment, JudgmentState
from benchmark.vocabulary import VERDICT_ORDER

JUDGE_LETTERS = "ABCDEFGH"


class AdjudicationAnswerForm(VerdictAnswerForm):
    note_label = "Note"


class Adjudication(StudyKind):
    key = "adjudication"
    label = "Judge adjudication"
    order = 30
    labels = VERDICT_ORDER  # worst to best: an ordinal scale
    ordinal = True
    answer_form = AdjudicationAnswerForm
    template = "annotation/items/adjudication.html"
    shortcuts = (verdict_shortcut("final verdict "),)
    selection_fields = ("run", "endpoints", "trigger_type", "condition")
    empty_selection = "The run has no unresolved judge disagreement matching this selection."

    def select(self, spec) -> list[ItemDraft]:
        disagreements = JudgeDisagreement.objects.filter(
            unit__run=spec.run, final_verdict=""
        ).select_related("unit__endpoint", "unit__trigger__turn__dialogue")
        if spec.endpoints:
            disagreements = disagreements.filter(unit__endpoint__in=spec.endpoints)
        if spec.trigger_type:
            disagreements = disagreements.filter(unit__trigger__type=spec.trigger_type)
        if spec.condition:
            disagreements = disagreements.filter(unit__condition=spec.condition)
        judge_names = tuple(
            name
            for judge in spec.run.judges.all()
            for name in (judge.name, judge.display_name, judge.model_name)
        )
        drafts = []
        for d in disagreements.order_by("id"):
            unit = d.unit
            drafts.append(
                ItemDraft(
                    key=unit_key(unit),
                    dialogue_id=unit.trigger.turn.dialogue_id,
                    trigger_id=unit.trigger_id,
                    unit_id=unit.pk,
                    disagreement_id=d.pk,
                    names=endpoint_names(unit.endpoint) + judge_names + tuple(d.verdicts),
                    sides=tuple(sorted(d.verdicts)),
                )
            )
        return drafts

    def item_view(self, assignment, study) -> dict:
        item = assignment.item
        context = reply_context(item)
        by_judge = {
            j.judge_name: j
            for j in Judgment.objects.filter(unit_id=item.unit_id, state=JudgmentState.DONE)
        }
        judges = []
        for letter, name in zip(JUDGE_LETTERS, assignment.display.get("order", []), strict=False):
            judgment = by_judge.get(name)
            if judgment is None:
                continue
            judges.append(
                {
                    "letter": letter,
                    "css": f"judge-{letter.lower()}",
                    "verdict": judgment.get_verdict_display(),
                    "rationale": judgment.rationale,
                    "evidence": judgment.evidence,
                }
            )
        reply = context.replies.get(item.unit_id, "")
        return {
            "conversation": context.conversation,
            "rubric": rubric(context.trigger),
            "judges": judges,
            "reply_html": highlight(
                reply, [(j["css"], j["evidence"]) for j in judges if j["evidence"]]
            ),
        }

    def form_initial(self, answer, assignment) -> dict:
        return verdict_initial(super().form_initial(answer, assignment), answer)

    def decide(self, item, study, now) -> None:
        """Once the item has its k answers, their majority is the disagreement's final verdict
        (the authoritative one for statistics); no majority, or an undo, leaves it unresolved."""
        answers = live_answers(item)
        verdict = ""
        if len(answers) >= item.required_answers:
            counts = Counter(a.label for a in answers).most_common()
            if len(counts) == 1 or counts[0][1] > counts[1][1]:
                verdict = counts[0][0]
        item.outcome = verdict
        if verdict:
            deciders = [a for a in answers if a.label == verdict]
            JudgeDisagreement.objects.filter(pk=item.disagreement_id).update(
                final_verdict=verdict,
                resolved_by_id=deciders[-1].user_id,
                resolved_at=now,
                resolution_note="\n\n".join(a.note for a in deciders if a.note),
            )
        else:
            JudgeDisagreement.objects.filter(pk=item.disagreement_id).update(
                final_verdict="", resolved_by=None, resolved_at=None, resolution_note=""
            )

    def summary(self, items, counted) -> list[SummaryLine]:
        return [SummaryLine("Resolved", sum(items["outcomes"].values()))]


KIND = register(Adjudication())
