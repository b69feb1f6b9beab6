"""What each study kind asks, in one place: its labels, the audit checklist, the failure modes
and their definitions, and the keyboard shortcuts (the workspaces, the ``?`` overlay and
docs/annotation.md all read them from here).

An answer's ``label`` is its main categorical value, normalised per kind so that agreement,
gold accuracy and the statistics can treat every kind alike:

| kind | label values |
| --- | --- |
| pairwise | ``A`` (Case A, vanilla), ``B`` (Case B, rubric-injected), ``tie`` — de-swapped |
| dialogue audit | ``pass``, ``fail`` (the overall decision) |
| judge adjudication, direct rating | ``PASS``, ``PARTIAL``, ``FAIL`` |
| failure-mode labelling | one of ``FailureMode`` |
"""

from django.db import models


class StudyKind(models.TextChoices):
    DIALOGUE_AUDIT = "dialogue_audit", "Dialogue audit"
    PAIRWISE = "pairwise", "Pairwise preference"
    ADJUDICATION = "adjudication", "Judge adjudication"
    DIRECT_RATING = "direct_rating", "Direct rating"
    FAILURE_MODE = "failure_mode", "Failure-mode labelling"


class PairChoice(models.TextChoices):
    """What the annotator clicked, by screen position (never by condition)."""

    FIRST = "1", "Response 1"
    SECOND = "2", "Response 2"
    TIE = "tie", "Tie"


class Case(models.TextChoices):
    """The release's names for the two sides of a pairwise item."""

    A = "A", "Case A (vanilla)"
    B = "B", "Case B (rubric-injected)"
    TIE = "tie", "Tie"


class AuditDecision(models.TextChoices):
    PASS = "pass", "Pass"
    FAIL = "fail", "Fail"


class FailureMode(models.TextChoices):
    GENERIC_CLOSING = "generic_closing", "Generic closing"
    DELIVERABLE_REPETITION = "deliverable_repetition", "Deliverable repetition"
    UNGROUNDED_SUGGESTION = "ungrounded_suggestion", "Ungrounded suggestion"
    PREMATURE_CLOSURE = "premature_closure", "Premature closure"
    OTHER = "other", "Other"


FAILURE_MODE_DEFINITIONS = {
    FailureMode.GENERIC_CLOSING: (
        "Signs off with boilerplate (“let me know if you need anything”, “good luck!”) "
        "instead of offering anything grounded in the conversation."
    ),
    FailureMode.DELIVERABLE_REPETITION: (
        "Restates or summarises the plan, list or answer already given earlier, adding "
        "nothing new for what comes next."
    ),
    FailureMode.UNGROUNDED_SUGGESTION: (
        "Offers a forward-looking step, but one not tied to the details the user disclosed "
        "(generic advice, or facts the user never gave)."
    ),
    FailureMode.PREMATURE_CLOSURE: (
        "Closes the conversation (acknowledges, wraps up) without offering any next step at all."
    ),
    FailureMode.OTHER: "None of the above: describe it in the note.",
}

# The failure-mode keys, in order (1–5).
FAILURE_MODE_KEYS = {mode.value: str(n) for n, mode in enumerate(FailureMode, start=1)}

# The dialogue-audit checklist (HALO-style scenario audit, SPEC 2.6 and 3): key → question.
AUDIT_CHECKS = (
    ("anchor_drip", "Anchor-drip respected: each user turn discloses at most one new anchor."),
    ("no_rubric_leakage", "No rubric leakage: no user turn hints at what a good reply would do."),
    ("style_fidelity", "Style fidelity: the user writes in the stated communication style."),
    ("trigger_windows", "Triggers sit inside their phase windows (E 1–3, C 4–7, R 8–10)."),
    ("rubric_gradeable", "Every rubric is clear and gradeable (Pass / Partial / Fail separable)."),
    ("assistant_cold", "The assistant is plausibly cold: it uses nothing the user has not said."),
)
AUDIT_CHECK_KEYS = tuple(key for key, _ in AUDIT_CHECKS)

VERDICT_KEYS = {"PASS": "p", "PARTIAL": "a", "FAIL": "f"}

# Keyboard shortcuts per workspace: (keys, what they do). Shown by the ``?`` overlay.
COMMON_SHORTCUTS = (
    ("Enter", "submit the answer (or start / next)"),
    ("Ctrl+Enter", "submit while typing in a text box"),
    ("r", "jump to the reason / note box"),
    ("Esc", "leave the text box (shortcuts work again)"),
    ("u", "undo your last answer in this study"),
    ("?", "show or hide this list"),
)
SHORTCUTS = {
    StudyKind.PAIRWISE: (
        ("1", "Response 1 is better"),
        ("2", "Response 2 is better"),
        ("0 or t", "tie"),
        ("Shift+1…5", "confidence 1–5"),
    ),
    StudyKind.DIRECT_RATING: (
        ("p / a / f", "Pass / Partial / Fail"),
        ("Shift+1…5", "confidence 1–5"),
    ),
    StudyKind.ADJUDICATION: (("p / a / f", "final verdict Pass / Partial / Fail"),),
    StudyKind.FAILURE_MODE: tuple(
        (key, f"label: {FailureMode(mode).label}") for mode, key in FAILURE_MODE_KEYS.items()
    ),
    StudyKind.DIALOGUE_AUDIT: (
        ("j / k", "next / previous checklist row"),
        ("y / n", "yes / no for the current row (then the next row)"),
        ("p / f", "overall Pass / Fail"),
    ),
}


def shortcuts_for(kind: str) -> tuple[tuple[str, str], ...]:
    return (*SHORTCUTS.get(kind, ()), *COMMON_SHORTCUTS)


def valid_labels(kind: str) -> tuple[str, ...]:
    """The labels an answer (or a gold item's expected answer) of this kind may carry."""
    if kind == StudyKind.PAIRWISE:
        return tuple(Case.values)
    if kind == StudyKind.DIALOGUE_AUDIT:
        return tuple(AuditDecision.values)
    if kind == StudyKind.FAILURE_MODE:
        return tuple(FailureMode.values)
    return ("PASS", "PARTIAL", "FAIL")


def normalise_label(kind: str, raw: str) -> str | None:
    """A label as typed by a person (any case) → its stored form, or None if not valid."""
    wanted = raw.strip()
    for label in valid_labels(kind):
        if label.lower() == wanted.lower():
            return label
    return None
