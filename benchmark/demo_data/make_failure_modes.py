"""Write ``failure_modes.jsonl``: the demo failure-mode classifier's recorded output for every
RECOVERY reply of the demo run that its primary judge failed.

The "classifier" is a few transparent keyword rules, not a model: each mode has cues, the first
mode (in the order below) with a cue in the reply wins, and the quote is the sentence of the
reply holding that cue, copied verbatim. A reply with no cue is ``other``. Run it again after
editing the recordings::

    python benchmark/demo_data/make_failure_modes.py
"""

from __future__ import annotations

import json
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
PRIMARY_JUDGE = "demo-judge-primary"
CLASSIFIER = "demo-classifier"

# (mode, cues, rationale): checked in this order, the first cue found decides.
RULES = (
    (
        "deliverable_repetition",
        ("recap", "summary", "summarise", "here is your", "don't forget your"),
        "The reply hands back the plan it already gave, as a list, instead of adding "
        "anything for what comes after the conversation.",
    ),
    (
        "ungrounded_suggestion",
        ("next steps", "remember to", "take it slow", "drink plenty"),
        "It looks ahead, but with advice that would suit anyone; none of it uses what "
        "the user told us earlier.",
    ),
    (
        "premature_closure",
        ("you're all set", "you are all set", "everything is in place"),
        "It declares the work finished while the user still has an open risk the "
        "conversation raised.",
    ),
    (
        "generic_closing",
        ("good luck", "feel free", "let me know", "best of luck", "enjoy", "you've got this"),
        "A friendly sign-off with well-wishes and an open offer of help, nothing tied "
        "to this user's situation.",
    ),
)
OTHER_RATIONALE = "None of the cue phrases appears; the failure fits no listed mode."

SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


def sentence_with(reply: str, position: int) -> str:
    """The sentence (or line) of ``reply`` around ``position``, verbatim."""
    start = 0
    for match in SENTENCE_END.finditer(reply):
        if match.end() > position:
            return reply[start : match.start()].strip()
        start = match.end()
    return reply[start:].strip()


def classify(reply: str) -> tuple[str, str, str]:
    """(mode, quote, rationale) for one failed reply."""
    lowered = reply.lower()
    for mode, cues, rationale in RULES:
        found = [lowered.find(cue) for cue in cues if cue in lowered]
        if found:
            return mode, sentence_with(reply, min(found)), rationale
    return "other", "", OTHER_RATIONALE


def recovery_turns() -> set[tuple[str, int]]:
    out = set()
    for line in (HERE / "dialogues.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        for trigger in record["trigger_points"]:
            if trigger["evaluation_rubric"]["type"] == "RECOVERY":
                out.add((record["unique_id_eval"], trigger["turn"]))
    return out


def records() -> list[dict]:
    recovery = recovery_turns()
    replies = {}
    for line in (HERE / "replies.jsonl").read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        replies[(r["unique_id_eval"], r["turn"], r["model"], r["condition"])] = r["reply"]
    out = []
    for line in (HERE / "judgments.jsonl").read_text(encoding="utf-8").splitlines():
        j = json.loads(line)
        key = (j["unique_id_eval"], j["turn"], j["model"], j["condition"])
        if j["judge"] != PRIMARY_JUDGE or j["verdict"] != "FAIL" or key[:2] not in recovery:
            continue
        mode, quote, rationale = classify(replies[key])
        assert quote in replies[key], key  # verbatim, always
        out.append(
            dict(zip(("unique_id_eval", "turn", "model", "condition"), key, strict=True))
            | {"classifier": CLASSIFIER, "failure_mode": mode, "quote": quote}
            | {"rationale": rationale}
        )
    return out


def main() -> None:
    lines = [json.dumps(r, ensure_ascii=False) for r in records()]
    (HERE / "failure_modes.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {len(lines)} classifications to {HERE / 'failure_modes.jsonl'}")


if __name__ == "__main__":
    main()
