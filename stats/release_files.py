"""The official release's human-eval files, read straight into the statistics' inputs.

Reading them into the same structures as the studies recorded in the Workbench
(``stats.interfaces``, filled by ``stats/studies.py``) lets every Study 1 / Study 2 figure of the
source be recomputed from its raw files — ``export_stats human-agreement
--release-dir DIR`` and ``export_stats preference --release-dir DIR`` (see
docs/reproducing-proactbench.md). Formats: ../shared/formats/proactbench-release/README.md.

- Study 1: ``human_eval/sample_items.json`` (``item_id``, ``trigger_type``, ``judge_score``) and
  ``human_eval/results/A*.jsonl`` (``annotator_id``, ``item_id``, ``score`` in title case).
- Study 2: ``human_eval/pairwise/sample_items.json`` (``item_id``, ``judge_score_case_a``: the
  stratum) and ``human_eval/pairwise/results/P*.jsonl`` (``chosen_case`` A = vanilla,
  B = rubric-injected, tie — already de-swapped; ``ab_swap`` true = B shown on the left).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from benchmark.vocabulary import VERDICT_ORDER
from stats.interfaces import (
    INJECTED,
    TIE,
    VANILLA,
    LabelMatrix,
    PreferenceJudgements,
    PreferenceRecord,
    RatedItem,
    Rating,
)

_CASES = {"A": VANILLA, "B": INJECTED, "TIE": TIE}


class ReleaseFileError(ValueError):
    """A release file that cannot be read as documented; the message names file and line."""


def _items(path: Path, keys: tuple[str, ...]) -> list[dict[str, Any]]:
    try:
        items = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ReleaseFileError(f"{path}: not JSON ({exc})") from exc
    if not isinstance(items, list):
        raise ReleaseFileError(f"{path}: expected a JSON array of items")
    for position, item in enumerate(items):
        missing = [k for k in keys if not isinstance(item, dict) or k not in item]
        if missing:
            raise ReleaseFileError(f"{path}: item [{position}] lacks {', '.join(missing)}")
    return items


def _lines(paths: Iterable[Path], keys: tuple[str, ...]) -> Iterator[tuple[str, dict]]:
    for path in paths:
        with path.open(encoding="utf-8") as stream:
            for number, line in enumerate(stream, start=1):
                if not line.strip():
                    continue
                where = f"{path.name} line {number}"
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ReleaseFileError(f"{where}: not JSON ({exc.msg})") from exc
                missing = [k for k in keys if not isinstance(record, dict) or k not in record]
                if missing:
                    raise ReleaseFileError(f"{where}: lacks {', '.join(missing)}")
                yield where, record


def study1_label_matrix(items_path: Path, ratings_paths: Iterable[Path]) -> LabelMatrix:
    """Study 1's direct ratings: items grouped by trigger type, the judge's score per item."""
    items = _items(items_path, ("item_id", "trigger_type", "judge_score"))
    known = {item["item_id"] for item in items}
    ratings = []
    for where, record in _lines(ratings_paths, ("annotator_id", "item_id", "score")):
        if record["item_id"] not in known:
            raise ReleaseFileError(f"{where}: unknown item {record['item_id']!r}")
        if str(record["score"]).upper() not in VERDICT_ORDER:
            raise ReleaseFileError(f"{where}: score {record['score']!r} is not Pass/Partial/Fail")
        ratings.append(Rating(record["item_id"], record["annotator_id"], record["score"]))
    return LabelMatrix.from_records(
        ratings,
        [
            RatedItem(item["item_id"], item["trigger_type"], item.get("judge_score") or "")
            for item in items
        ],
    )


def pairwise_judgements(items_path: Path, ratings_paths: Iterable[Path]) -> PreferenceJudgements:
    """Study 2's pairwise judgements, de-swapped, with the vanilla reply's judge verdict."""
    items = _items(items_path, ("item_id", "judge_score_case_a"))
    stratum = {item["item_id"]: str(item["judge_score_case_a"]).upper() for item in items}
    records = []
    keys = ("annotator_id", "item_id", "chosen_case", "ab_swap")
    for where, record in _lines(ratings_paths, keys):
        if record["item_id"] not in stratum:
            raise ReleaseFileError(f"{where}: unknown item {record['item_id']!r}")
        choice = _CASES.get(str(record["chosen_case"]).upper())
        if choice is None:
            raise ReleaseFileError(f"{where}: chosen_case {record['chosen_case']!r} is not A/B/tie")
        seconds = record.get("time_spent_seconds")
        records.append(
            PreferenceRecord(
                item_id=record["item_id"],
                annotator_id=record["annotator_id"],
                choice=choice,
                injected_on_left=bool(record["ab_swap"]),
                seconds=float(seconds) if seconds is not None else None,
                vanilla_verdict=stratum[record["item_id"]],
            )
        )
    return PreferenceJudgements.from_records(records)


def study1_from_release(release_dir: Path) -> LabelMatrix:
    """Study 1 from the release's layout: ``[dataset/]human_eval/sample_items.json`` and
    ``results/A*.jsonl`` beside it."""
    folder = _human_eval(release_dir)
    return study1_label_matrix(
        folder / "sample_items.json", sorted((folder / "results").glob("A*.jsonl"))
    )


def pairwise_from_release(release_dir: Path) -> PreferenceJudgements:
    """Study 2 from the release's layout: ``[dataset/]human_eval/pairwise/sample_items.json``
    and ``pairwise/results/P*.jsonl``."""
    folder = _human_eval(release_dir) / "pairwise"
    return pairwise_judgements(
        folder / "sample_items.json", sorted((folder / "results").glob("P*.jsonl"))
    )


def _human_eval(release_dir: Path) -> Path:
    for candidate in (release_dir / "dataset" / "human_eval", release_dir / "human_eval"):
        if candidate.is_dir():
            return candidate
    raise ReleaseFileError(
        f"{release_dir}: no human_eval folder (expected dataset/human_eval or human_eval)"
    )
