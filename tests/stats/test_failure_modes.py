"""Failure modes against the source's Table 2: counts reconstructed from each model's printed
shares (every share rounds back to the table); the pooled row must then be the micro-average
44 / 45 / 4 / 6 / 0 % of 1,079 fails — an average of the models' shares would not give it."""

import numpy as np
import pytest

from benchmark.vocabulary import FAILURE_MODES
from stats.compute.failure_modes import POOLED, failure_mode_table
from stats.interfaces import FailureModeLabel, FailureModeLabels

TABLE_2 = {  # model: (n_fail, counts per mode) ; printed shares in the comment
    "GPT-5.5": (71, (14, 49, 2, 5, 1)),  # 20 69 3 7 1
    "Qwen3.5-397B-A17B": (116, (71, 34, 3, 8, 0)),  # 61 29 3 7 0
    "Gemini-2.5-Pro": (165, (101, 41, 2, 21, 0)),  # 61 25 1 13 0
    "GPT-4o": (155, (108, 34, 9, 2, 2)),  # 70 22 6 1 1
    "Qwen3.5-9B": (103, (60, 39, 1, 3, 0)),  # 58 38 1 3 0
    "Qwen2.5-7B-Instruct": (145, (17, 121, 7, 0, 0)),  # 12 83 5 0 0
    "Llama-3.2-8B": (174, (89, 47, 10, 28, 0)),  # 51 27 6 16 0
    "Qwen3-1.7B": (150, (17, 124, 8, 1, 0)),  # 11 83 5 1 0
}
PRINTED = {
    "GPT-5.5": (20, 69, 3, 7, 1),
    "Qwen3.5-397B-A17B": (61, 29, 3, 7, 0),
    "Gemini-2.5-Pro": (61, 25, 1, 13, 0),
    "GPT-4o": (70, 22, 6, 1, 1),
    "Qwen3.5-9B": (58, 38, 1, 3, 0),
    "Qwen2.5-7B-Instruct": (12, 83, 5, 0, 0),
    "Llama-3.2-8B": (51, 27, 6, 16, 0),
    "Qwen3-1.7B": (11, 83, 5, 1, 0),
    POOLED: (44, 45, 4, 6, 0),
}


def _labels():
    labels = []
    for model, (n, counts) in TABLE_2.items():
        assert sum(counts) == n
        for mode, count in zip(FAILURE_MODES, counts, strict=True):
            labels += [FailureModeLabel(model, f"{model}-{mode}-{i}", mode) for i in range(count)]
    return FailureModeLabels.from_records(labels)


def test_table_2_shares_and_the_pooled_row_reproduce():
    rows = {r.model: r for r in failure_mode_table(_labels())}
    assert rows[POOLED].n_fails == 1079
    for model, printed in PRINTED.items():
        shares = tuple(round(100 * rows[model].shares[m]) for m in FAILURE_MODES)
        assert shares == printed, model
    # the unweighted mean of the models' generic-closing shares is not the pooled share
    mean_of_shares = np.mean([rows[m].shares["generic_closing"] for m in TABLE_2])
    assert round(100 * mean_of_shares) != 44


def test_rows_are_by_model_then_pooled_and_unknown_modes_are_rejected():
    rows = failure_mode_table(_labels())
    assert [r.model for r in rows] == sorted(TABLE_2) + [POOLED]
    with pytest.raises(ValueError, match="unknown failure mode"):
        FailureModeLabels.from_records([FailureModeLabel("m", "i", "rude")])
