"""Write ``pairwise_verdicts.jsonl``: the two demo judges' recorded pairwise verdicts at every
trigger of the demo run, in both orders, on every two demo models in each condition (the pairs
``judge_pairs --pairs models`` makes) and on each model's vanilla reply against its
rubric-injected one (``--pairs conditions``), so that every source is compared with every other
through some chain of pairs.

The "pairwise judge" is transparent rules, not a model: each judge prefers the reply it scored
higher in its own recorded verdicts (``judgments.jsonl``; Pass > Partial > Fail), calls two
equal Passes or Partials a tie and two Fails both bad, and answers in screen positions ("1" is
the reply shown first). Position bias is planted: for a fixed share of its pairs (chosen by a
hash, so the file is the same on every machine) a judge answers "1" in both orders, so its
verdict flips with the swap — about 8 % of the primary judge's pairs and 25 % of the
cross-family judge's. Run it again after editing the recordings::

    python benchmark/demo_data/make_pairwise_verdicts.py
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
BIASED_PERCENT = {"demo-judge-primary": 8, "demo-judge-crossfamily": 25}
SCORES = {"PASS": 2, "PARTIAL": 1, "FAIL": 0}
CONDITIONS = ("vanilla", "rubric_injected")  # side A's condition first, as the pairs have it
RATIONALES = {
    "1": "Response 1 draws on what the user disclosed and meets more of the rubric; "
    "Response 2 stays closer to the literal request.",
    "2": "Response 2 draws on what the user disclosed and meets more of the rubric; "
    "Response 1 stays closer to the literal request.",
    "tie": "Both responses meet the rubric to about the same degree.",
    "both_bad": "Neither response reaches the rubric's partial level; both answer only the "
    "literal request.",
}


def biased(*key: object) -> bool:
    """Is this (pair, judge) one of the judge's planted position-biased pairs?"""
    judge = str(key[-1])
    digest = hashlib.sha256("|".join(map(str, key)).encode()).hexdigest()
    return int(digest, 16) % 100 < BIASED_PERCENT[judge]


def outcome(score_a: int, score_b: int) -> str:
    """The side that wins ("A", "B"), or "tie" / "both_bad"."""
    if score_a != score_b:
        return "A" if score_a > score_b else "B"
    return "both_bad" if score_a == 0 else "tie"


def choice(result: str, *, a_first: bool) -> str:
    if result in ("tie", "both_bad"):
        return result
    return "1" if (result == "A") == a_first else "2"


def records() -> tuple[list[dict], Counter]:
    verdicts: dict[tuple, str] = {}
    for line in (HERE / "judgments.jsonl").read_text(encoding="utf-8").splitlines():
        j = json.loads(line)
        key = (j["unique_id_eval"], j["turn"], j["model"], j["condition"], j["judge"])
        verdicts[key] = j["verdict"]
    sources: dict[tuple, list[tuple[str, str]]] = {}
    for line in (HERE / "replies.jsonl").read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        sources.setdefault((r["unique_id_eval"], r["turn"]), []).append(
            (r["model"], r["condition"])
        )
    out: list[dict] = []
    flips: Counter[str] = Counter()
    for (uid, turn), replies in sorted(sources.items()):
        # Side A: the model sorting first (models pairs), the vanilla reply (conditions pairs).
        replies.sort(key=lambda source: (source[0], CONDITIONS.index(source[1])))
        for a, b in itertools.combinations(replies, 2):
            if a[0] != b[0] and a[1] != b[1]:
                continue  # neither a models pair nor a conditions pair
            for judge in BIASED_PERCENT:
                score_a = SCORES[verdicts[(uid, turn, *a, judge)]]
                score_b = SCORES[verdicts[(uid, turn, *b, judge)]]
                result = outcome(score_a, score_b)
                position_biased = biased(uid, turn, *a, *b, judge)
                flips[judge] += position_biased
                for first, second in ((a, b), (b, a)):
                    said = "1" if position_biased else choice(result, a_first=first == a)
                    out.append(
                        {
                            "unique_id_eval": uid,
                            "turn": turn,
                            "first_model": first[0],
                            "first_condition": first[1],
                            "second_model": second[0],
                            "second_condition": second[1],
                            "judge": judge,
                            "choice": said,
                            "rationale": RATIONALES[said],
                        }
                    )
    return out, flips


def main() -> None:
    rows, flips = records()
    lines = [json.dumps(r, ensure_ascii=False, separators=(",", ":")) for r in rows]
    (HERE / "pairwise_verdicts.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    planted = ", ".join(f"{judge} {n}" for judge, n in sorted(flips.items()))
    print(f"wrote {len(lines)} pairwise verdicts; planted position-biased pairs: {planted}")


if __name__ == "__main__":
    main()
