"""Quality figures for a study so far: pure functions on plain lists (no ORM; the selectors
feed them). Full inter-annotator statistics (α, κ, bootstrap CIs) belong to the statistics
module; these are the quick figures a study page needs while the study runs.

Definitions (also in docs/annotation.md):

- **percent agreement**: over items with at least two answers, the share of agreeing pairs of
  answers on the item, averaged over items (each item weighs the same).
- **agreement with the majority**: for one rater, the share of their answers that equal the
  strict majority label of the *other* raters on the item (items without such a majority are
  left out) — leave-one-out, so a rater does not agree with themself.
- **gold accuracy**: the share of answers on gold items that equal the expected label.
"""

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import combinations
from statistics import median


@dataclass(frozen=True)
class Vote:
    item: int
    rater: int
    label: str
    seconds: float
    position: str = ""  # pairwise: the screen position chosen ("1", "2", "tie")


def percent_agreement(votes: Iterable[Vote]) -> tuple[float | None, int]:
    """(mean pairwise agreement over items with ≥ 2 answers, number of such items)."""
    by_item: dict[int, list[str]] = defaultdict(list)
    for vote in votes:
        by_item[vote.item].append(vote.label)
    shares = []
    for labels in by_item.values():
        if len(labels) < 2:
            continue
        pairs = list(combinations(labels, 2))
        shares.append(sum(a == b for a, b in pairs) / len(pairs))
    return (sum(shares) / len(shares) if shares else None), len(shares)


def share(numerator: int, denominator: int) -> float | None:
    return numerator / denominator if denominator else None


@dataclass(frozen=True)
class RaterFigures:
    rater: int
    answers: int
    median_seconds: float | None
    top_label: str
    top_label_share: float | None
    first_position_share: float | None  # pairwise: Response 1 chosen, among non-ties
    gold_answers: int
    gold_accuracy: float | None
    majority_items: int
    majority_agreement: float | None


def rater_figures(votes: list[Vote], expected: dict[int, str]) -> dict[int, RaterFigures]:
    """Per rater: volume, speed, one-label / one-side share, gold and majority agreement.
    ``expected``: gold item → expected label."""
    by_item: dict[int, list[Vote]] = defaultdict(list)
    by_rater: dict[int, list[Vote]] = defaultdict(list)
    for vote in votes:
        by_item[vote.item].append(vote)
        by_rater[vote.rater].append(vote)
    figures = {}
    for rater, mine in by_rater.items():
        labels = Counter(v.label for v in mine)
        top_label, top_count = labels.most_common(1)[0]
        sided = [v.position for v in mine if v.position in ("1", "2")]
        gold = [v for v in mine if v.item in expected]
        majority_hits = majority_items = 0
        for vote in mine:
            others = Counter(o.label for o in by_item[vote.item] if o.rater != rater)
            ranked = others.most_common(2)
            if not ranked or (len(ranked) == 2 and ranked[0][1] == ranked[1][1]):
                continue
            majority_items += 1
            majority_hits += vote.label == ranked[0][0]
        figures[rater] = RaterFigures(
            rater=rater,
            answers=len(mine),
            median_seconds=median(v.seconds for v in mine),
            top_label=top_label,
            top_label_share=share(top_count, len(mine)),
            first_position_share=share(sided.count("1"), len(sided)),
            gold_answers=len(gold),
            gold_accuracy=share(sum(v.label == expected[v.item] for v in gold), len(gold)),
            majority_items=majority_items,
            majority_agreement=share(majority_hits, majority_items),
        )
    return figures


def gold_accuracy(votes: Iterable[Vote], expected: dict[int, str]) -> tuple[float | None, int]:
    gold = [v for v in votes if v.item in expected]
    return share(sum(v.label == expected[v.item] for v in gold), len(gold)), len(gold)
