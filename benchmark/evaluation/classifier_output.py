"""Strict parsing of a failure-mode classifier's reply: a JSON object with the failure mode, a
verbatim quote from the reply and a rationale.

``parse_classifier_output`` raises only ``ClassifierOutputError`` (with a message fit to send
back to the classifier when asking again); it never guesses a label.
"""

from dataclasses import dataclass

from benchmark.evaluation.evidence import quote_in_reply
from benchmark.evaluation.judge_output import JudgeOutputError, json_object
from benchmark.vocabulary import FAILURE_MODES


class ClassifierOutputError(ValueError):
    """The classifier's output could not be used; the message says why."""


@dataclass(frozen=True)
class FailureModeLabel:
    failure_mode: str
    quote: str
    rationale: str


def parse_classifier_output(text: str, *, reply: str) -> FailureModeLabel:
    try:
        data = json_object(text)
    except JudgeOutputError as exc:
        raise ClassifierOutputError(str(exc)) from None
    missing = [k for k in ("failure_mode", "quote", "rationale") if k not in data]
    if missing:
        raise ClassifierOutputError(f"missing key(s): {', '.join(missing)}")
    mode, quote, rationale = data["failure_mode"], data["quote"], data["rationale"]
    if not all(isinstance(v, str) for v in (mode, quote, rationale)):
        raise ClassifierOutputError("failure_mode, quote and rationale must be strings")
    mode = mode.strip().lower()
    if mode not in FAILURE_MODES:
        raise ClassifierOutputError(
            f"failure_mode must be one of {', '.join(FAILURE_MODES)} (got {data['failure_mode']!r})"
        )
    if not quote.strip():
        raise ClassifierOutputError("the quote is empty")
    if not quote_in_reply(quote, reply):
        raise ClassifierOutputError(
            "the quote is not a verbatim passage of the reply; copy an exact passage"
        )
    return FailureModeLabel(mode, quote.strip(), rationale.strip())
