"""The release's Study 1 and Study 2 sample files, read into the statistics' inputs and run
through the same functions the annotation app's data will go through."""

import json

import krippendorff
import numpy as np
import pytest
from scipy.stats import binomtest

from stats.compute.human import human_agreement_table
from stats.compute.preference import preference_by_annotator, preference_table
from stats.interfaces import INJECTED
from stats.release_files import (
    ReleaseFileError,
    pairwise_from_release,
    pairwise_judgements,
    study1_from_release,
    study1_label_matrix,
)
from tests.release import release_file


@pytest.fixture
def study1():
    return study1_label_matrix(
        release_file("study1_sample_items.sample.json"),
        [release_file("study1_ratings.sample.jsonl")],
    )


@pytest.fixture
def pairwise():
    return pairwise_judgements(
        release_file("pairwise_sample_items.sample.json"),
        [release_file("pairwise_ratings.sample.jsonl")],
    )


def test_study1_sample_fills_the_label_matrix(study1):
    items = json.loads(release_file("study1_sample_items.sample.json").read_text())
    ratings = [
        json.loads(line)
        for line in release_file("study1_ratings.sample.jsonl").read_text().splitlines()
    ]
    assert study1.item_ids.tolist() == [i["item_id"] for i in items]
    assert study1.groups.tolist() == [i["trigger_type"] for i in items]
    assert (study1.labels >= 0).sum() == len(ratings)
    assert sorted(study1.rater_ids) == sorted({r["annotator_id"] for r in ratings})


def test_study1_sample_agreement_and_majority_vs_judge(study1):
    rows = human_agreement_table(study1, resamples=1000)
    overall = rows[0]
    assert [r.group for r in rows] == ["ALL", "RECOVERY", "EMERGENT"]
    assert overall.n_items == 3 and overall.n_ratings == 8
    # the same ratings as observers × items for the krippendorff package
    data = np.where(study1.labels.T >= 0, study1.labels.T, np.nan).astype(float)
    expected = krippendorff.alpha(
        reliability_data=data, level_of_measurement="ordinal", value_domain=[0, 1, 2]
    )
    assert overall.alpha_ordinal.value == pytest.approx(expected)
    # majorities: Claude t8 Partial (2 of 2), Gemini t1 Pass (2 of 3), GPT-5.5 t8 Pass (2 of 3);
    # the judge said Pass, Partial, Partial: the people and the judge never agree here
    assert overall.n_majority == 3
    assert overall.confusion.tolist() == [[0, 0, 0], [0, 0, 1], [0, 2, 0]]


def test_pairwise_sample_fills_the_judgements(pairwise):
    assert pairwise.choice.tolist() == [INJECTED, INJECTED]
    assert pairwise.injected_on_left.tolist() == [True, True]
    assert pairwise.vanilla_verdict.tolist() == ["PASS", "PASS"]
    assert pairwise.seconds.tolist() == [235.0, 125.0]
    (overall, stratum) = preference_table(pairwise, resamples=1000)
    assert (overall.n_items, overall.injected.k, overall.injected.n) == (1, 2, 2)
    assert overall.injected.p_value == pytest.approx(binomtest(2, 2).pvalue)
    assert overall.left.rate == 1.0  # B was on the left and was chosen both times
    assert stratum.stratum == "PASS" and stratum.injected.k == 2
    assert overall.bootstrap_ci == (1.0, 1.0)  # one item: every resample is the same
    raters = {r.annotator_id: r for r in preference_by_annotator(pairwise)}
    assert raters["P03"].median_seconds == 235.0 and raters["P08"].injected_rate == 1.0


def test_release_layout_is_found_under_dataset_human_eval(tmp_path):
    folder = tmp_path / "dataset" / "human_eval"
    (folder / "results").mkdir(parents=True)
    (folder / "pairwise" / "results").mkdir(parents=True)
    (folder / "sample_items.json").symlink_to(release_file("study1_sample_items.sample.json"))
    (folder / "results" / "A01.jsonl").symlink_to(release_file("study1_ratings.sample.jsonl"))
    (folder / "pairwise" / "sample_items.json").symlink_to(
        release_file("pairwise_sample_items.sample.json")
    )
    (folder / "pairwise" / "results" / "P01.jsonl").symlink_to(
        release_file("pairwise_ratings.sample.jsonl")
    )
    assert (study1_from_release(tmp_path).labels >= 0).sum() == 8
    assert pairwise_from_release(tmp_path).choice.size == 2
    with pytest.raises(ReleaseFileError, match="no human_eval folder"):
        study1_from_release(tmp_path / "dataset" / "human_eval" / "results")


def test_bad_lines_name_file_and_line(tmp_path):
    items = release_file("pairwise_sample_items.sample.json")
    bad = tmp_path / "P09.jsonl"
    bad.write_text(
        json.dumps({"annotator_id": "P09", "item_id": "nope", "chosen_case": "B", "ab_swap": 0})
        + "\n"
    )
    with pytest.raises(ReleaseFileError, match=r"P09.jsonl line 1: unknown item 'nope'"):
        pairwise_judgements(items, [bad])
    bad.write_text('{"annotator_id": "P09"}\n')
    with pytest.raises(ReleaseFileError, match=r"line 1: lacks item_id, chosen_case, ab_swap"):
        pairwise_judgements(items, [bad])
