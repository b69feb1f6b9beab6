"""Write ``failure_mode_labels.jsonl``: two demo raters' failure-mode labels for the demo run's
failed vanilla RECOVERY replies (the ones ``failure_modes.jsonl`` classifies), which
``load_demo`` loads as a closed, answered failure-mode study, so the classifier-vs-people table
(``failure-modes-llm-vs-human``) has data after ``make run``.

Written for this project, not collected from people. Each rater takes the classifier's label
unless ``OVERRIDES`` says otherwise; the overrides are where a reader of the whole conversation
sees what a keyword rule cannot: three replies where both raters disagree with the classifier,
and two where the raters disagree with each other (a tie: no majority, dropped by the table).
Every line is keyed by the reply's stable key (dialogue id, turn, model, condition), never by a
database id. Run it again after editing::

    python benchmark/demo_data/make_failure_mode_labels.py
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
RATERS = ("demo-rater-1", "demo-rater-2")
CONDITION = "vanilla"  # the demo failure-mode studies' condition


# (dialogue id prefix, model) → (rater 1's label, rater 2's label, note). Each prefix names one
# demo dialogue (the short part of its id, for a readable table); ``records`` checks each
# override matches a reply.
OVERRIDES = {
    # Both raters against the classifier.
    ("BP_DEMO_PROFESSIONAL_02_", "demo-birch-medium"): (
        "premature_closure",
        "premature_closure",
        "Promises it will go smoothly instead of naming what could still go wrong.",
    ),
    ("BP_DEMO_TRAVEL_01_", "demo-birch-medium"): (
        "generic_closing",
        "generic_closing",
        "'All set' is only a pleasantry here: a friendly sign-off.",
    ),
    ("BP_DEMO_ARTS_01_", "demo-birch-medium"): (
        "premature_closure",
        "premature_closure",
        "Treats the show as handled; nothing about what could still go wrong.",
    ),
    # The raters split: no majority.
    ("BP_DEMO_PROFESSIONAL_02_", "demo-cedar-small"): (
        "deliverable_repetition",
        "generic_closing",
        "",
    ),
    ("BP_DEMO_ARTS_02_", "demo-cedar-small"): (
        "deliverable_repetition",
        "premature_closure",
        "",
    ),
}


def classified() -> list[dict]:
    """The classifier's recorded vanilla labels (the replies the demo studies select)."""
    lines = (HERE / "failure_modes.jsonl").read_text(encoding="utf-8").splitlines()
    return [r for r in map(json.loads, lines) if r["condition"] == CONDITION]


def records() -> list[dict]:
    found = classified()
    out = []
    used = set()
    for r in found:
        override = [
            (k, v)
            for k, v in OVERRIDES.items()
            if r["unique_id_eval"].startswith(k[0]) and r["model"] == k[1]
        ]
        assert len(override) <= 1, r
        if override:
            used.add(override[0][0])
            first, second, note = override[0][1]
        else:
            first = second = r["failure_mode"]
            note = ""
        for rater, label in zip(RATERS, (first, second), strict=True):
            out.append(
                {k: r[k] for k in ("unique_id_eval", "turn", "model", "condition")}
                | {"rater": rater, "failure_mode": label, "note": note}
            )
    assert used == set(OVERRIDES), set(OVERRIDES) - used  # every override names a reply
    return out


def main() -> None:
    lines = [json.dumps(r, ensure_ascii=False) for r in records()]
    (HERE / "failure_mode_labels.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {len(lines)} labels to {HERE / 'failure_mode_labels.jsonl'}")


if __name__ == "__main__":
    main()
