"""Strict parsing of a judge's reply: a JSON object with verdict, rationale and evidence — or,
for a pairwise judge, with the choice between Response 1 and Response 2 and a rationale.

``parse_judge_output`` and ``parse_pairwise_output`` raise only ``JudgeOutputError`` (with a
message fit to send back to the judge when asking again); they never guess a verdict.
"""

import json
import re
from dataclasses import dataclass

from benchmark.evaluation.evidence import quote_in_reply
from benchmark.vocabulary import BATTLE_SWAPPED, BattleWinner, parse_verdict

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


PAIRWISE_CHOICES = ("1", "2", "tie", "both_bad")
"""What a pairwise judge may answer: a screen position, or a tie (both good / both bad)."""


@dataclass(frozen=True)
class PairwiseVerdict:
    choice: str  # one of PAIRWISE_CHOICES: a screen position, not a side
    rationale: str


def parse_pairwise_output(text: str) -> PairwiseVerdict:
    data = json_object(text)
    missing = [k for k in ("choice", "rationale") if k not in data]
    if missing:
        raise JudgeOutputError(f"missing key(s): {', '.join(missing)}")
    choice, rationale = data["choice"], data["rationale"]
    if isinstance(choice, int) and not isinstance(choice, bool):
        choice = str(choice)  # 1 and 2 as numbers say the same as "1" and "2"
    if not isinstance(choice, str) or not isinstance(rationale, str):
        raise JudgeOutputError("choice and rationale must be strings")
    normalised = choice.strip().lower().replace(" ", "_").replace("-", "_")
    if normalised not in PAIRWISE_CHOICES:
        raise JudgeOutputError(
            f'choice must be one of "1", "2", "tie", "both_bad" (got {data["choice"]!r})'
        )
    if not rationale.strip():
        raise JudgeOutputError("the rationale is empty")
    return PairwiseVerdict(normalised, rationale.strip())


# A screen choice read as if Response 1 were side A.
_AS_SHOWN = {
    "1": BattleWinner.MODEL_A.value,
    "2": BattleWinner.MODEL_B.value,
    "tie": BattleWinner.TIE.value,
    "both_bad": BattleWinner.TIE_BOTHBAD.value,
}


def pairwise_winner(choice: str, *, a_shown_first: bool) -> str:
    """The ``BattleWinner`` a screen choice names: Response 1 is side A when A was shown first,
    side B when the order was swapped (the outcome read the other way round, ``BATTLE_SWAPPED``;
    ties stay ties)."""
    as_shown = _AS_SHOWN[choice]
    return as_shown if a_shown_first else BATTLE_SWAPPED[as_shown]
