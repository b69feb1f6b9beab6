"""Judge self-consistency: hand-checked agreement, ordinal α and flip rate over a judge's
epochs, the table from ``JudgmentRepeat`` rows, its empty message, and every surface."""

import csv
import io
import json
import math

import numpy as np
import pytest
from django.core.management import call_command
from django.urls import reverse

from benchmark.models import Judgment, JudgmentRepeat, JudgmentState
from stats import tables
from stats.compute.resampling import rng_for
from stats.compute.self_consistency import self_consistency
from stats.selectors import TableRequest
from tests.stats.conftest import PRIMARY_JUDGE

NAME = "judge-self-consistency"
F, PA, P, NONE = 0, 1, 2, -1
# epoch 0 (the judgment), 1, 2
EPOCHS = (
    (P, P, P),  # all agree
    (P, F, P),  # one flip of two repeats
    (F, F, NONE),  # agree; no flip in one repeat
    (PA, NONE, NONE),  # one verdict only: left out
)


def _rngs(seed=1):
    return tuple(rng_for(seed, what) for what in ("a", "b", "c"))


def test_self_consistency_by_hand():
    c = self_consistency(np.array(EPOCHS), 3, rngs=_rngs(), resamples=2000)
    assert (c.n_units, c.n_repeats) == (3, 5)
    assert c.all_agree == pytest.approx(2 / 3)
    assert c.flip_rate == pytest.approx(1 / 5)
    # Coincidences: FF 2, PP 4, FP = PF 1; marginals F 3, Partial 0, Pass 5, n = 8.
    # Ordinal δ²(F, P) = (3 + 0 + 5 − (3 + 5)/2)² = 16; observed Σ o δ² = 2·16 = 32,
    # expected Σ n_c n_k δ² = 2·3·5·16 = 480: α = 1 − 7·32/480 = 8/15.
    assert c.alpha == pytest.approx(8 / 15)
    for value, (low, high) in (
        (c.all_agree, c.all_agree_ci),
        (c.flip_rate, c.flip_rate_ci),
    ):
        assert low <= value <= high
    again = self_consistency(np.array(EPOCHS), 3, rngs=_rngs(), resamples=2000)
    assert again == c  # seeded


def test_no_reply_judged_twice_is_undefined_not_zero():
    c = self_consistency(np.array([(P, NONE)]), 3, rngs=_rngs())
    assert c.n_units == 0 and math.isnan(c.all_agree) and math.isnan(c.alpha)


@pytest.fixture
def repeated(study_run):
    """The first four vanilla replies: PRIMARY_JUDGE's judgment and two repeats as EPOCHS."""
    units = list(study_run.units.filter(condition="vanilla").order_by("id")[:4])
    names = ("FAIL", "PARTIAL", "PASS")
    for unit, epochs in zip(units, EPOCHS, strict=True):
        Judgment.objects.filter(unit=unit, judge_name=PRIMARY_JUDGE).update(
            verdict=names[epochs[0]]
        )
        for epoch, code in enumerate(epochs[1:], start=1):
            JudgmentRepeat.objects.create(
                unit=unit,
                judge_name=PRIMARY_JUDGE,
                epoch=epoch,
                state=JudgmentState.DONE if code >= 0 else JudgmentState.JUDGE_ERROR,
                verdict=names[code] if code >= 0 else "",
            )
    return study_run


def test_the_table_reads_the_repeats(repeated):
    t = tables.build(NAME, TableRequest(run=repeated))
    overall = next(r for r in t.rows if r["trigger_type"] == "ALL")
    assert {r["judge"] for r in t.rows} == {PRIMARY_JUDGE}  # the other judge has no repeats
    assert (overall["n_units"], overall["n_epochs"], overall["n_repeats"]) == (3, 3, 5)
    assert overall["all_agree"] == pytest.approx(2 / 3)
    assert overall["alpha_ordinal"] == pytest.approx(8 / 15)
    assert overall["flip_rate"] == pytest.approx(1 / 5)
    groups = [r["trigger_type"] for r in t.rows]
    assert groups[0] == "ALL" and len(groups) > 1
    assert sum(r["n_units"] for r in t.rows[1:]) == 3


def test_surfaces(repeated, client_for, researcher):
    client = client_for(researcher)
    url = reverse("stats_api:table", args=[NAME])
    body = client.get(url, {"run": repeated.pk}).json()
    assert body["rows"] and body["rows"][0]["alpha_ordinal"] == pytest.approx(8 / 15)
    response = client.get(url, {"run": repeated.pk, "format": "csv"})
    header, *rows = csv.reader(io.StringIO(response.content.decode(), newline=""))
    assert header == body["columns"] and len(rows) == len(body["rows"])
    out = io.StringIO()
    call_command("export_stats", NAME, "--run", str(repeated.pk), "--format", "json", stdout=out)
    assert json.loads(out.getvalue())["rows"] == body["rows"]
    html = client.get(reverse("stats:dashboard"), {"run": repeated.pk}).content.decode()
    assert f'id="{NAME}"' in html and "Judge self-consistency" in html


def test_a_run_without_repeats_says_how_to_get_them(demo_run, client_for, researcher):
    t = tables.build(NAME, TableRequest(run=demo_run))
    assert t.rows == [] and t.notes == ["no repeats: re-judge with --epochs K"]
    html = client_for(researcher).get(reverse("stats:dashboard")).content.decode()
    assert "No repeats: re-judge with --epochs K." in html
