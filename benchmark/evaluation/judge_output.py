"""Strict parsing of a judge's reply: a JSON object with verdict, rationale and evidence.

``parse_judge_output`` raises only ``JudgeOutputError`` (with a message fit to send back to the
judge when asking again); it never guesses a verdict.
"""

import json
import re
from dataclasses import dataclass

from benchmark.evaluation.evidence import quote_in_reply
from benchmark.vocabulary import parse_verdict

_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)


class JudgeOutputError(ValueError):
    """The judge's output could not be used; the message says why."""


@dataclass(frozen=True)
class JudgeVerdict:
    verdict: str
    rationale: str
    evidence: str


def json_object(text: str) -> dict:
    """The JSON object an LLM step answered with, inside a code fence or not."""
    if not isinstance(text, str) or not text.strip():
        raise JudgeOutputError("the output is empty")
    fenced = _FENCE.match(text)
    body = fenced.group(1) if fenced else text.strip()
    try:
        data = json.loads(body)
    except (ValueError, RecursionError) as exc:
        # ValueError: JSONDecodeError, and also an integer of more than 4,300 digits.
        raise JudgeOutputError(f"the output is not a JSON object ({exc})") from None
    if not isinstance(data, dict):
        raise JudgeOutputError("the output must be a JSON object, not " + type(data).__name__)
    return data


def parse_judge_output(text: str, *, reply: str) -> JudgeVerdict:
    data = json_object(text)
    missing = [k for k in ("verdict", "rationale", "evidence") if k not in data]
    if missing:
        raise JudgeOutputError(f"missing key(s): {', '.join(missing)}")
    verdict, rationale, evidence = data["verdict"], data["rationale"], data["evidence"]
    if not all(isinstance(v, str) for v in (verdict, rationale, evidence)):
        raise JudgeOutputError("verdict, rationale and evidence must be strings")
    if parse_verdict(verdict) is None:
        raise JudgeOutputError(f"verdict must be one of PASS, PARTIAL, FAIL (got {verdict!r})")
    if not rationale.strip():
        raise JudgeOutputError("the rationale is empty")
    if not evidence.strip():
        raise JudgeOutputError("the evidence quote is empty")
    if not quote_in_reply(evidence, reply):
        raise JudgeOutputError(
            "the evidence is not a verbatim quote of the reply; copy an exact passage"
        )
    return JudgeVerdict(verdict.strip().upper(), rationale.strip(), evidence.strip())
