"""The release's own conventions, offered as options: its majority tie rule (Study 1 κ) and its
bootstrap stream (Study 2's item-clustered CI) — checked against the published figures when the
full release is at hand (PROACTBENCH_FULL_RELEASE_DIR), and against the release's algorithm,
restated here, on synthetic data always."""

import csv
import io
import math
from collections import defaultdict

import numpy as np
import pytest
from django.core.management import call_command

from stats import tables
from stats.compute.preference import preference_table, release_stream_interval
from stats.interfaces import INJECTED, TIE, VANILLA, PreferenceJudgements, PreferenceRecord
from stats.selectors import TableRequest
from stats.tables.preference import STREAM_NOTES
from tests.release import full_release_dir


def _release_cluster_bootstrap(values_by_item, seed, resamples):
    """``cluster_bootstrap_ci`` of the release's analyze_pairwise.py, line for line."""
    items = list(values_by_item.keys())
    rng = np.random.default_rng(seed)
    samples = []
    for _ in range(resamples):
        idx = rng.integers(0, len(items), size=len(items))
        flat_b = []
        for k in idx:
            flat_b.extend(values_by_item[items[k]])
        if not flat_b:
            continue
        s = sum(flat_b) / len(flat_b)
        if not (isinstance(s, float) and math.isnan(s)):
            samples.append(s)
    return float(np.percentile(samples, 2.5)), float(np.percentile(samples, 97.5))


def _judgements(seed=5, n=60):
    rng = np.random.default_rng(seed)
    records = []
    for i in range(n):
        choice = rng.choice([INJECTED, INJECTED, INJECTED, VANILLA, TIE])
        records.append(
            PreferenceRecord(
                # items out of sorted order, an odd number of them, one only ever tied
                item_id=f"item-{(i * 7) % 23:02d}" if i else "only-ties",
                annotator_id=f"P0{i % 4}",
                choice=TIE if i == 0 else str(choice),
                injected_on_left=bool(i % 2),
                seconds=10.0,
                vanilla_verdict="PASS" if i % 3 else "FAIL",
            )
        )
    return PreferenceJudgements.from_records(records)


def test_release_stream_is_the_release_algorithm():
    judgements = _judgements()
    by_item = defaultdict(list)
    for item, choice in zip(judgements.item_id, judgements.choice, strict=True):
        if choice != TIE:
            by_item[item].append(1 if choice == INJECTED else 0)
    for seed in (2026, 7):
        expected = _release_cluster_bootstrap(by_item, seed, 2000)
        assert release_stream_interval(judgements, seed=seed, resamples=2000) == expected


def test_stream_option_changes_only_the_bootstrap_interval():
    judgements = _judgements()
    app = preference_table(judgements, seed=2026, resamples=2000)
    release = preference_table(judgements, seed=2026, resamples=2000, stream="release")
    assert [r.injected for r in app] == [r.injected for r in release]
    assert [r.bootstrap_ci for r in app] != [r.bootstrap_ci for r in release]
    # every figure (overall, each stratum) restarts the release's generator from the seed
    fail = judgements.subset(judgements.vanilla_verdict == "FAIL")
    assert release[2].stratum == "FAIL"
    assert release[2].bootstrap_ci == release_stream_interval(fail, seed=2026, resamples=2000)
    with pytest.raises(ValueError, match="unknown stream"):
        preference_table(judgements, stream="other")


def test_export_stats_stream_option_on_the_release_samples(tmp_path, db):
    from tests.release import release_file

    folder = tmp_path / "human_eval" / "pairwise" / "results"
    folder.mkdir(parents=True)
    (folder.parent / "sample_items.json").symlink_to(
        release_file("pairwise_sample_items.sample.json")
    )
    (folder / "P01.jsonl").symlink_to(release_file("pairwise_ratings.sample.jsonl"))
    err = io.StringIO()
    call_command(
        "export_stats",
        "preference",
        "--release-dir",
        str(tmp_path),
        "--stream",
        "release",
        stdout=io.StringIO(),
        stderr=err,
    )
    assert f"note: {STREAM_NOTES['release']}" in err.getvalue()


# --- The published figures, from the full release ---------------------------------------------


def test_full_release_study2_ci_with_the_release_stream(db):
    root = full_release_dir("pairwise/results/P*.jsonl", "pairwise/sample_items.json")
    out = io.StringIO()
    call_command(
        "export_stats",
        "preference",
        "--release-dir",
        str(root),
        "--stream",
        "release",
        "--seed",
        "2026",
        stdout=out,
        stderr=io.StringIO(),
    )
    overall = next(csv.DictReader(io.StringIO(out.getvalue(), newline="")))
    assert (overall["n_injected"], overall["n_decided"], overall["n_ties"]) == ("115", "144", "2")
    low, high = float(overall["bootstrap_low"]), float(overall["bootstrap_high"])
    assert (round(low, 3), round(high, 3)) == (0.741, 0.855)
    # To full precision: what analyze_pairwise.py itself prints before rounding (the app's own
    # stream, seed 2026, happens to round the same: 0.74101, 0.85496).
    assert (low, high) == pytest.approx((0.7412587412587412, 0.855072463768116), abs=1e-12)


def test_full_release_study1_kappa_with_the_release_tie_rule(db):
    root = full_release_dir("results/A*.jsonl", "sample_items.json")
    rows = {
        r["group"]: r
        for r in tables.build(
            "human-agreement", TableRequest(release_dir=root, majority="release")
        ).rows
    }
    kappas = tuple(
        round(rows[t]["majority_kappa"], 3) for t in ("EMERGENT", "CRITICAL", "RECOVERY")
    )
    assert kappas == (0.545, 0.269, 0.552)
