"""HALO diagnosis statistics: every table on a small fixture worked out by hand (below), the
agreement cross-checked with the `krippendorff` package and statsmodels, the correlations with
their textbook formulas; then a study answered through the annotation app's own form, read back
through the API, the command and the raw export.

The fixture (two models A and B, three checkpoints; c1 judged by annotators x and y, c2 and c3
by x):

    c1  A  x: L1 accepted              y: L1 accepted
        B  x: L3 rejected, premature, excessive, unsupported (note)
           y: L3 rejected, premature, appropriate
    c2  A  x: L0 rejected (inaction)
        B  x: L0 accepted (justified restraint)
    c3  A  x: L2 rejected, premature, insufficient (pre-filled L1: changed)
        B  x: L1 rejected, appropriate, appropriate, irrelevant (note)
"""

import csv
import io
import json
import math

import krippendorff
import numpy as np
import pytest
from django.core.management import call_command
from django.urls import reverse
from scipy import stats as scipy_stats
from statsmodels.stats.inter_rater import fleiss_kappa

from benchmark.models import Condition
from stats import tables
from stats.compute import halo
from stats.interfaces import HaloJudgment, HaloJudgments
from stats.selectors import StatsInputError, TableRequest
from tests.stats.conftest import answer_next, create_study, rater_of

J = HaloJudgment
FIXTURE = [
    J("c1", "r1", "x", "A", "L1", True, suggested="L1", reasoning_tokens=100, retrieval_rounds=1),
    J("c1", "r1", "y", "A", "L1", True, reasoning_tokens=100, retrieval_rounds=1),
    J(
        "c1",
        "r2",
        "x",
        "B",
        "L3",
        False,
        "premature",
        "excessive",
        frozenset({"unsupported"}),
        suggested="L3",
        reasoning_tokens=1000,
    ),
    J("c1", "r2", "y", "B", "L3", False, "premature", "appropriate", reasoning_tokens=1000),
    J("c2", "r1", "x", "A", "L0", False, reasoning_tokens=300, retrieval_rounds=1),
    J("c2", "r2", "x", "B", "L0", True),
    J(
        "c3",
        "r1",
        "x",
        "A",
        "L2",
        False,
        "premature",
        "insufficient",
        suggested="L1",
        reasoning_tokens=200,
        retrieval_rounds=1,
    ),
    J(
        "c3",
        "r2",
        "x",
        "B",
        "L1",
        False,
        "appropriate",
        "appropriate",
        frozenset({"irrelevant"}),
        reasoning_tokens=3000,
    ),
]


@pytest.fixture
def fixture() -> HaloJudgments:
    return HaloJudgments.from_records(FIXTURE)


def by_model(rows):
    return {r.model: r for r in rows}


def test_acceptability_and_halos_table_1_shares(fixture):
    rows = by_model(halo.acceptability_table(fixture, resamples=2000))
    assert list(rows) == ["A", "B", halo.POOLED]
    a, b, pooled = rows["A"], rows["B"], rows[halo.POOLED]
    assert (a.n_checkpoints, a.n_replies, a.n_judgments, a.n_acceptable) == (3, 3, 4, 2)
    assert (a.acceptability, b.acceptability, pooled.acceptability) == (0.5, 0.25, 3 / 8)
    assert a.shares == {
        "justified_restraint": 0,
        "inaction": 1 / 4,
        "premature": 1 / 4,
        "belated": 0,
        "insufficient": 1 / 4,
        "excessive": 0,
        "other_issues": 0,
    }
    assert b.shares["justified_restraint"] == 1 / 4 and b.shares["premature"] == 2 / 4
    assert b.shares["excessive"] == 1 / 4 and b.shares["other_issues"] == 2 / 4
    for row in rows.values():
        low, high = row.ci
        assert 0 <= low <= row.acceptability <= high <= 1
    # A's checkpoints: c1 accepts 2 of 2, c2 and c3 0 of 1: a resample's rate is one of a few
    # values between 0 and 1, both reached with three checkpoints.
    assert a.ci == (0.0, 1.0)


def test_over_and_under_proactive_shares_of_the_rejections(fixture):
    rows = by_model(halo.proactivity_table(fixture, resamples=2000))
    a, b, pooled = rows["A"], rows["B"], rows[halo.POOLED]
    # A: the inaction (under) and the premature + insufficient reply (both).
    assert (a.n_rejected, a.n_over, a.n_under, a.n_both, a.n_neither) == (2, 1, 2, 1, 0)
    assert (a.over_share, a.under_share) == (0.5, 1.0)
    # B: two premature rejections (over), one rejected only for an other issue (neither).
    assert (b.n_rejected, b.n_over, b.n_under, b.n_both, b.n_neither) == (3, 2, 0, 0, 1)
    assert (b.over_share, b.under_share) == (2 / 3, 0.0)
    assert (pooled.n_rejected, pooled.n_over, pooled.n_under) == (5, 3, 2)
    assert (pooled.over_share, pooled.under_share) == (0.6, 0.4)
    assert a.under_ci == (1.0, 1.0) and b.under_ci == (0.0, 0.0)  # no spread at all


def test_timing_by_intensity_of_the_rejected_interventions(fixture):
    cells = {(r.model, r.timing): r for r in halo.timing_intensity_table(fixture)}
    assert cells[("A", "premature")].counts == {"insufficient": 1, "excessive": 0, "appropriate": 0}
    assert cells[("A", "premature")].n_interventions == 1  # the inaction is not an intervention
    assert cells[("B", "premature")].counts == {"insufficient": 0, "excessive": 1, "appropriate": 1}
    assert cells[("B", "appropriate")].counts["appropriate"] == 1
    assert cells[("B", "belated")].counts == {"insufficient": 0, "excessive": 0, "appropriate": 0}
    assert cells[(halo.POOLED, "premature")].n_interventions == 4
    assert sum(sum(r.counts.values()) for r in cells.values() if r.model == "B") == 3


def test_action_levels_and_the_changed_pre_fills(fixture):
    rows = by_model(halo.level_table(fixture, resamples=2000))
    assert rows["A"].counts == {"L0": 1, "L1": 2, "L2": 1, "L3": 0}
    assert rows["B"].counts == {"L0": 1, "L1": 1, "L2": 0, "L3": 2}
    assert rows["A"].intervention_rate == rows["B"].intervention_rate == 3 / 4
    assert (rows["A"].n_suggested, rows["A"].n_changed) == (2, 1)
    assert (rows["B"].n_suggested, rows["B"].n_changed) == (1, 0)
    assert rows[halo.POOLED].counts["L3"] == 2


def test_the_paired_comparison_weighs_each_shared_checkpoint_the_same(fixture):
    (row,) = halo.paired_table(fixture, resamples=2000)
    assert (row.model_a, row.model_b, row.n_checkpoints) == ("A", "B", 3)
    # Per checkpoint (A, B): intervention (1, 1), (0, 0), (1, 1); acceptability (1, 0),
    # (0, 1), (0, 0); accepted action (1, 0), (0, 0), (0, 0); accepted L0 (0, 0), (0, 1), (0, 0).
    assert row.a["intervention"] == row.b["intervention"] == 2 / 3
    assert row.delta["intervention"] == 0 and row.ci["intervention"] == (0.0, 0.0)
    assert row.a["acceptability"] == row.b["acceptability"] == 1 / 3  # not A's 2/4 by judgment
    assert row.delta["acceptability"] == 0
    assert row.delta["accepted_action"] == pytest.approx(1 / 3)
    assert row.delta["accepted_restraint"] == pytest.approx(-1 / 3)
    assert row.delta["acceptability"] == pytest.approx(
        row.delta["accepted_action"] + row.delta["accepted_restraint"]
    )
    low, high = row.ci["acceptability"]
    assert -1 <= low < 0 < high <= 1
    assert row.ci == halo.paired_table(fixture, resamples=2000)[0].ci  # seeded


def test_a_pair_without_a_shared_checkpoint_has_no_row():
    judgments = HaloJudgments.from_records(
        [J("c1", "r1", "x", "A", "L0", True), J("c2", "r1", "x", "B", "L0", True)]
    )
    assert halo.paired_table(judgments) == []


def test_effort_is_per_reply_beside_acceptability_per_judgment(fixture):
    rows = by_model(halo.effort_table(fixture))
    a, b = rows["A"], rows["B"]
    assert (a.n_replies, a.n_judgments, a.acceptability) == (3, 4, 0.5)
    # c1's reply counts once though two annotators judged it.
    assert a.n_with == {"reasoning_tokens": 3, "retrieval_rounds": 3}
    assert a.mean == {"reasoning_tokens": 200.0, "retrieval_rounds": 1.0}
    assert b.n_with == {"reasoning_tokens": 2, "retrieval_rounds": 0}
    assert b.mean["reasoning_tokens"] == 2000.0 and math.isnan(b.mean["retrieval_rounds"])
    notes = {
        (r.measure, r.method): r.note for r in halo.effort_correlation_table(list(rows.values()))
    }
    assert notes[("reasoning_tokens", "pearson")].startswith("undefined: 2 model(s)")
    assert notes[("retrieval_rounds", "spearman")].startswith("undefined: 1 model(s)")


def test_model_level_correlations_and_their_fisher_intervals():
    effort = [1, 2, 3, 4, 5]
    acceptability = [0.2, 0.4, 0.5, 0.9, 0.8]
    rows = [
        halo.EffortRow(
            f"m{i}",
            1,
            1,
            acc,
            {"reasoning_tokens": 1, "retrieval_rounds": 0},
            {"reasoning_tokens": float(e), "retrieval_rounds": float("nan")},
        )
        for i, (e, acc) in enumerate(zip(effort, acceptability, strict=True))
    ]
    out = {(r.measure, r.method): r for r in halo.effort_correlation_table(rows)}
    pearson = out[("reasoning_tokens", "pearson")].correlation
    r = np.corrcoef(effort, acceptability)[0, 1]
    assert pearson.r == pytest.approx(r) and pearson.n == 5
    z = scipy_stats.norm.ppf(0.975)
    assert pearson.ci == pytest.approx(
        (math.tanh(math.atanh(r) - z / math.sqrt(2)), math.tanh(math.atanh(r) + z / math.sqrt(2)))
    )
    spearman = out[("reasoning_tokens", "spearman")]
    # Ranks of acceptability 1 2 3 5 4: ρ = 1 − 6 · 2 / (5 · 24) = 0.9.
    assert spearman.correlation.r == pytest.approx(0.9)
    half = z * math.sqrt(1.06 / 2)
    assert spearman.correlation.ci == pytest.approx(
        (math.tanh(math.atanh(0.9) - half), math.tanh(math.atanh(0.9) + half))
    )
    assert spearman.note == ""
    # Three models: r, but no interval, and a note saying why.
    few = halo.effort_correlation_table(rows[:3])
    assert few[0].correlation.n == 3 and not math.isnan(few[0].correlation.r)
    assert math.isnan(few[0].correlation.ci[0]) and "needs at least 4" in few[0].note


def test_agreement_per_question_matches_krippendorff_and_statsmodels(fixture):
    rows = {r.question: r for r in halo.agreement_table(fixture, resamples=2000)}
    # Two replies have two answers (c1's): both annotators agree on level and acceptable.
    assert (rows["level"].n_units, rows["level"].n_ratings) == (2, 4)
    assert rows["level"].ordinal and rows["level"].alpha == 1.0
    assert rows["level"].percent_agreement == 1.0 and rows["acceptable"].fleiss_kappa == 1.0
    # Timing: one reply (c1 B), both premature; one category: α and κ undefined.
    assert rows["timing"].n_units == 1 and rows["timing"].percent_agreement == 1.0
    assert math.isnan(rows["timing"].alpha) and math.isnan(rows["timing"].fleiss_kappa)
    # Intensity: excessive vs appropriate; unsupported: flagged by x, not by y.
    for question in ("intensity", "issue_unsupported"):
        row = rows[question]
        assert row.n_units == 1 and row.percent_agreement == 0.0
        assert row.alpha == pytest.approx(0.0) and row.fleiss_kappa == pytest.approx(-1.0)
    assert rows["issue_irrelevant"].n_units == 1  # c1 B, asked of both, flagged by neither
    # Cross-checks on a larger random set: levels (ordinal) and acceptability.
    rng = np.random.default_rng(3)
    records = []
    for c in range(60):
        level = int(rng.integers(0, 4))
        for rater in ("x", "y", "z"):
            if rng.random() < 0.2:
                continue
            own = level if rng.random() < 0.7 else int(rng.integers(0, 4))
            records.append(J(f"c{c}", "r1", rater, "A", f"L{own}", bool(rng.random() < 0.5)))
    judgments = HaloJudgments.from_records(records)
    rows = {r.question: r for r in halo.agreement_table(judgments, resamples=500)}
    matrix = np.full((3, 60), np.nan)
    accept = np.full((3, 60), np.nan)
    for r in records:
        column, row = int(r.checkpoint[1:]), "xyz".index(r.rater)
        matrix[row, column] = int(r.level[1])
        accept[row, column] = float(r.acceptable)
    assert rows["level"].alpha == pytest.approx(
        krippendorff.alpha(reliability_data=matrix, level_of_measurement="ordinal")
    )
    assert rows["acceptable"].alpha == pytest.approx(
        krippendorff.alpha(reliability_data=accept, level_of_measurement="nominal")
    )
    complete = ~np.isnan(accept).any(axis=0)
    counts = np.stack([(accept[:, complete] == v).sum(axis=0) for v in (0, 1)], axis=1)
    only_complete = HaloJudgments.from_records(
        [r for r in records if complete[int(r.checkpoint[1:])]]
    )
    kappa = {r.question: r for r in halo.agreement_table(only_complete, resamples=200)}
    assert kappa["acceptable"].fleiss_kappa == pytest.approx(fleiss_kappa(counts))


def test_unknown_values_are_refused():
    with pytest.raises(ValueError, match="not a HALO diagnosis"):
        HaloJudgments.from_records([J("c1", "r1", "x", "A", "L4", True)])
    with pytest.raises(ValueError):
        HaloJudgments.from_records([J("c1", "r1", "x", "A", "L1", False, timing="soon")])


# --- From a study answered through the app ----------------------------------------------------

HALO_TABLES = [name for name in (s.name for s in tables.all_specs()) if name.startswith("halo-")]


def diagnose(per_response: dict[str, dict]):
    """A decision by response id (the screen order is the rater's own)."""

    def decide(assignment) -> dict:
        data = {}
        for n, response in enumerate(assignment.display["order"], start=1):
            data.update({f"{k}_{n}": v for k, v in per_response[response].items()})
        return data

    return decide


@pytest.fixture
def answered(study_run, make_annotators, researcher):
    """A HALO study of the run's vanilla checkpoints (two models: r1 quartz, r2 zephyr), two
    annotators: x accepts quartz everywhere and rejects zephyr as premature and excessive; y
    does the same except that she accepts zephyr on her first checkpoint."""
    x, y = make_annotators(2)
    study = create_study(study_run, "halo", [x, y], condition=Condition.VANILLA, name="Diagnose")
    accept = {"level": "L1", "acceptable": "yes"}
    reject = {"level": "L3", "acceptable": "no", "timing": "premature", "intensity": "excessive"}
    n = study.items.count()
    for user, first_zephyr in ((x, reject), (y, accept)):
        r = rater_of(study, user)
        answer_next(r, diagnose({"r1": accept, "r2": first_zephyr}))
        for _ in range(n - 1):
            answer_next(r, diagnose({"r1": accept, "r2": reject}))
    return study, n


def table(name, study, **fields):
    return tables.build(name, TableRequest(study=study.pk, **fields))


def test_the_tables_read_a_study_answered_through_the_form(answered):
    study, n = answered
    rows = {r["model"]: r for r in table("halo-acceptability", study).rows}
    assert rows["quartz-hidden-mini"]["acceptability"] == 1.0
    assert rows["zephyr-secret-large"]["n_judgments"] == 2 * n
    assert rows["zephyr-secret-large"]["n_acceptable"] == 1
    assert rows[halo.POOLED]["n_judgments"] == 4 * n
    proactive = {r["model"]: r for r in table("halo-proactivity", study).rows}
    assert proactive["zephyr-secret-large"]["over_share"] == 1.0
    assert proactive["zephyr-secret-large"]["n_rejected"] == 2 * n - 1
    (pair,) = table("halo-paired", study).rows
    assert pair["n_checkpoints"] == n and pair["delta_intervention"] == 0
    assert pair["delta_acceptability"] == pytest.approx(1 - 0.5 / n)
    agreement = {r["question"]: r for r in table("halo-agreement", study).rows}
    # y's accepted zephyr reply is L1 where x said L3: one reply of 2n disagrees on both.
    assert agreement["level"]["n_replies"] == 2 * n
    assert agreement["level"]["percent_agreement"] == pytest.approx(1 - 0.5 / n)
    assert agreement["acceptable"]["percent_agreement"] == pytest.approx(1 - 0.5 / n)
    for name in HALO_TABLES:
        built = table(name, study)
        assert built.rows, name


def test_a_halo_table_refuses_another_kind_of_study_and_no_study(
    answered, study_run, make_annotators
):
    other = create_study(study_run, "pairwise", make_annotators(2), name="Pairs")
    with pytest.raises(StatsInputError, match="reads halo response diagnosis studies"):
        table("halo-acceptability", other)
    with pytest.raises(
        StatsInputError, match="reads a human study: choose one, a HALO diagnosis study"
    ):
        tables.build("halo-levels", TableRequest())


def test_the_api_the_command_and_the_dashboard_serve_the_halo_tables(
    answered, client_for, researcher
):
    study, n = answered
    client = client_for(researcher)
    for name in HALO_TABLES:
        response = client.get(reverse("stats_api:table", args=[name]), {"study": study.pk})
        assert response.status_code == 200, (name, response.content[:300])
        assert response.json()["rows"], name
    out = io.StringIO()
    call_command("export_stats", "halo-proactivity", "--study", str(study.pk), stdout=out)
    rows = list(csv.DictReader(io.StringIO(out.getvalue())))
    assert {r["model"] for r in rows} == {"quartz-hidden-mini", "zephyr-secret-large", "POOLED"}
    page = client.get(reverse("stats:dashboard"), {"study": study.pk}).content.decode()
    for name in HALO_TABLES:
        assert f'id="{name}"' in page, name
    assert "halo.csv?study=" in page


def test_the_halo_export_has_every_reply_of_every_answer(answered, client_for, researcher):
    study, n = answered
    client = client_for(researcher)
    response = client.get(
        reverse("stats_api:raw-export", args=["halo", "jsonl"]), {"study": study.pk}
    )
    rows = [json.loads(line) for line in b"".join(response.streaming_content).splitlines()]
    assert len(rows) == 2 * 2 * n  # two annotators × n checkpoints × two replies
    zephyr = [r for r in rows if r["source"] == "zephyr-secret-large"]
    assert sum(r["acceptable"] for r in zephyr) == 1
    rejected = [r for r in zephyr if not r["acceptable"]]
    assert all(r["timing"] == "premature" and r["over_proactive"] for r in rejected)
    assert all(not r["under_proactive"] and r["restraint"] == "" for r in rejected)
    assert {r["position"] for r in rows} == {1, 2} and {r["response"] for r in rows} == {"r1", "r2"}
    assert all(r["level_suggested"] == "L0" and r["level_changed"] for r in rows)
    assert all(r["unit_id"] for r in rows)
    csv_text = b"".join(
        client.get(
            reverse("stats_api:raw-export", args=["halo", "csv"]), {"study": study.pk}
        ).streaming_content
    ).decode()
    assert len(list(csv.DictReader(io.StringIO(csv_text)))) == len(rows)
