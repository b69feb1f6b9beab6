"""What the kinds that ask for a verdict (direct rating, judge adjudication) share: the answer
form's verdict field and its keys."""

from __future__ import annotations

from django import forms

from annotation.forms import AnswerForm
from annotation.kinds.base import Shortcut
from annotation.services.assignments import AnswerInput
from benchmark.vocabulary import Verdict

VERDICT_KEYS: dict[str, tuple[str, ...]] = {
    Verdict.PASS: ("p",),
    Verdict.PARTIAL: ("a",),
    Verdict.FAIL: ("f",),
}


def verdict_shortcut(what: str) -> Shortcut:
    keys = " / ".join(keys[0] for keys in VERDICT_KEYS.values())
    return Shortcut(keys, f"{what}{' / '.join(Verdict.labels)}")


class VerdictAnswerForm(AnswerForm):
    verdict = forms.ChoiceField(
        choices=Verdict.choices,
        widget=forms.RadioSelect,
        error_messages={"required": "Choose Pass, Partial or Fail (keys p, a, f)."},
    )
    keys = {"verdict": VERDICT_KEYS}

    def to_input(self) -> AnswerInput:
        return AnswerInput(
            label=self.cleaned_data["verdict"],
            confidence=self.cleaned_data.get("confidence"),
            note=self.cleaned_data["note"].strip(),
        )


def verdict_initial(initial: dict, answer) -> dict:
    """``initial`` with an undone answer's verdict."""
    if answer is not None:
        initial["verdict"] = answer.label
    return initial
