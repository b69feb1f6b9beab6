"""Dialogue audit (SPEC 2.6, HALO's scenario audit): two auditors check a curated dialogue
against the protocol, row by row, and decide pass or fail; when they split, a third (an
adjudicator) decides, seeing both audits. The outcome sets the dialogue's status: accepted,
rejected, or in audit while undecided."""

from __future__ import annotations

from django import forms
from django.db import models

from annotation.forms import AnswerForm
from annotation.kinds.base import Shortcut, StudyKind, SummaryLine
from annotation.kinds.registry import register
from annotation.models import Answer, AssignmentRole
from annotation.services.assignments import AnswerInput, live_answers
from annotation.services.studies import ItemDraft
from benchmark.models import Dialogue, DialogueStatus
from benchmark.selectors import dialogue_for_reading


class AuditDecision(models.TextChoices):
    PASS = "pass", "Pass"
    FAIL = "fail", "Fail"


DECISION_KEYS: dict[str, tuple[str, ...]] = {AuditDecision.PASS: ("p",), AuditDecision.FAIL: ("f",)}
# The checklist's keys: they answer the current row (then move on), and move between rows.
CHECK_KEYS: dict[str, tuple[str, ...]] = {"yes": ("y",), "no": ("n",)}
ROW_KEYS = {"next": ("j", "arrowdown"), "previous": ("k", "arrowup")}
MOVE_KEYS = f"{ROW_KEYS['next'][0]} / {ROW_KEYS['previous'][0]}"
ANSWER_KEYS = " / ".join(keys[0] for keys in CHECK_KEYS.values())

# The checklist (HALO-style scenario audit, SPEC 2.6 and 3): key → question.
AUDIT_CHECKS = (
    ("anchor_drip", "Anchor-drip respected: each user turn discloses at most one new anchor."),
    ("no_rubric_leakage", "No rubric leakage: no user turn hints at what a good reply would do."),
    ("style_fidelity", "Style fidelity: the user writes in the stated communication style."),
    ("trigger_windows", "Triggers sit inside their phase windows (E 1–3, C 4–7, R 8–10)."),
    ("rubric_gradeable", "Every rubric is clear and gradeable (Pass / Partial / Fail separable)."),
    ("assistant_cold", "The assistant is plausibly cold: it uses nothing the user has not said."),
)
AUDIT_CHECK_KEYS = tuple(key for key, _ in AUDIT_CHECKS)
AUDITORS = 2  # per dialogue; a third only when they split


class AuditAnswerForm(AnswerForm):
    note_label = "Overall note"
    decision = forms.ChoiceField(
        choices=AuditDecision.choices,
        widget=forms.RadioSelect,
        label="Overall",
        error_messages={"required": "Overall: choose Pass or Fail (keys p, f)."},
    )
    keys = {"decision": DECISION_KEYS, **{f"check_{key}": CHECK_KEYS for key in AUDIT_CHECK_KEYS}}
    row_keys = {way: " ".join(keys) for way, keys in ROW_KEYS.items()}
    checklist_hint = f"{MOVE_KEYS} to move, {ANSWER_KEYS} to answer"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for key, question in AUDIT_CHECKS:
            self.fields[f"check_{key}"] = forms.ChoiceField(
                choices=(("yes", "Yes"), ("no", "No")),
                widget=forms.RadioSelect,
                label=question,
                error_messages={"required": f"{question.split(':')[0]}: answer yes or no."},
            )
            self.fields[f"note_{key}"] = forms.CharField(
                required=False, max_length=2000, label="Note"
            )

    def check_rows(self):
        return [(self[f"check_{key}"], self[f"note_{key}"]) for key, _ in AUDIT_CHECKS]

    def to_input(self) -> AnswerInput:
        data = self.cleaned_data
        checks = {
            key: {"ok": data[f"check_{key}"] == "yes", "note": data[f"note_{key}"].strip()}
            for key, _ in AUDIT_CHECKS
        }
        return AnswerInput(
            label=data["decision"], note=data["note"].strip(), details={"checks": checks}
        )


class DialogueAudit(StudyKind):
    key = "dialogue_audit"
    label = "Dialogue audit"
    order = 20
    labels = tuple(AuditDecision.values)
    answer_form = AuditAnswerForm
    template = "annotation/items/dialogue_audit.html"
    shortcuts = (
        Shortcut(MOVE_KEYS, "next / previous checklist row"),
        Shortcut(ANSWER_KEYS, "yes / no for the current row (then the next row)"),
        Shortcut(" / ".join(k[0] for k in DECISION_KEYS.values()), "overall Pass / Fail"),
    )
    selection_fields = ("dialogue_status", "adjudicators")
    from_run = False
    empty_selection = "No dialogue has the chosen status."
    empty_selection_field = "dialogue_status"
    has_adjudicators = True
    overlap_note = " (a third when the two split)"

    def answer_shown(self, answer) -> str:
        if answer.label in AuditDecision.values:
            return AuditDecision(answer.label).label
        return super().answer_shown(answer)

    def expected_shown(self, expected, assignment) -> str:
        if expected in AuditDecision.values:
            return str(AuditDecision(expected).label)
        return super().expected_shown(expected, assignment)

    def check(self, spec, errors) -> None:
        if spec.overlap != AUDITORS:
            errors["overlap"].append(
                "A dialogue audit has two auditors per dialogue (a third only when they split)."
            )
        annotators = set(spec.annotators)
        if annotators and len(annotators | set(spec.adjudicators)) < AUDITORS + 1:
            errors["adjudicators"].append(
                "Someone must be able to decide when the two auditors split: choose at least "
                "three people in all (annotators and adjudicators)."
            )

    def select(self, spec) -> list[ItemDraft]:
        dialogues = Dialogue.objects.order_by("id")
        if spec.dialogue_status:
            dialogues = dialogues.filter(status=spec.dialogue_status)
        return [ItemDraft(key=d.unique_id_eval, dialogue_id=d.pk) for d in dialogues]

    def after_create(self, study, drafts) -> None:
        Dialogue.objects.filter(
            pk__in=[d.dialogue_id for d in drafts], status=DialogueStatus.DRAFT
        ).update(status=DialogueStatus.IN_AUDIT)

    def item_view(self, assignment, study) -> dict:
        dialogue = dialogue_for_reading(pk=assignment.item.dialogue_id)
        findings: dict[int | None, list[dict]] = {}
        for finding in dialogue.findings:
            findings.setdefault(finding.get("turn"), []).append(finding)
        view = {
            "dialogue": dialogue,
            "turns": [
                {
                    "turn": turn,
                    # None where the turn has none: looked up in the template, the missing
                    # reverse one-to-one raised (and was silenced) four times a turn.
                    "trigger": getattr(turn, "trigger", None),
                    "findings": findings.get(turn.index, []),
                }
                for turn in dialogue.turns.all()
            ],
            "dialogue_findings": findings.get(None, []),
            "adjudicating": assignment.role == AssignmentRole.ADJUDICATE,
            "audits": [],
        }
        if view["adjudicating"]:
            questions = dict(AUDIT_CHECKS)
            earlier = Answer.objects.filter(
                assignment__item_id=assignment.item_id,
                assignment__role=AssignmentRole.ANNOTATE,
                retracted_at__isnull=True,
            ).order_by("submitted_at", "id")
            view["audits"] = [
                {
                    "number": n,
                    "decision": answer.label,
                    "note": answer.note,
                    "checks": [
                        (questions.get(key, key), check.get("ok"), check.get("note", ""))
                        for key, check in (answer.details.get("checks") or {}).items()
                    ],
                }
                for n, answer in enumerate(earlier, start=1)
            ]
        return view

    def form_initial(self, answer, assignment) -> dict:
        initial = super().form_initial(answer, assignment)
        if answer is not None:
            initial["decision"] = answer.label
            for key, check in (answer.details.get("checks") or {}).items():
                initial[f"check_{key}"] = "yes" if check.get("ok") else "no"
                initial[f"note_{key}"] = check.get("note", "")
        return initial

    def decide(self, item, study, now) -> None:
        """Two auditors agree → their decision; they split → a third (an adjudicator) decides.
        The dialogue's status follows: accepted, rejected, or in audit while undecided."""
        answers = live_answers(item)
        regular = [a.label for a in answers if a.role == AssignmentRole.ANNOTATE]
        third = [a.label for a in answers if a.role == AssignmentRole.ADJUDICATE]
        if len(regular) >= AUDITORS:
            split = regular[0] != regular[1]
            item.needs_adjudication = split
            item.outcome = (third[0] if third else "") if split else regular[0]
        else:
            item.needs_adjudication = bool(third)
            item.outcome = ""
        base = item.required_answers if item.is_gold else study.overlap
        item.required_answers = max(base, study.overlap + 1) if item.needs_adjudication else base
        status = {
            AuditDecision.PASS: DialogueStatus.ACCEPTED,
            AuditDecision.FAIL: DialogueStatus.REJECTED,
        }.get(item.outcome, DialogueStatus.IN_AUDIT)
        Dialogue.objects.filter(pk=item.dialogue_id).update(status=status)

    def summary(self, items, counted) -> list[SummaryLine]:
        outcomes = items["outcomes"]
        accepted = outcomes.get(AuditDecision.PASS, 0)
        return [SummaryLine("Decided", sum(outcomes.values()), detail=f"({accepted} accepted)")]


KIND = register(DialogueAudit())
