"""The paired injection effect: its computation by hand (McNemar's exact p included), and the
table through the API (JSON, CSV), ``export_stats`` and the dashboard, checked against the
verdicts read straight from the database."""

import csv
import io
import json
import re

import numpy as np
import pytest
from django.core.management import call_command
from django.urls import reverse
from statsmodels.stats.contingency_tables import mcnemar

from benchmark.models import Condition, EvaluationUnit, Judgment, JudgmentState
from benchmark.vocabulary import VERDICT_CODES
from stats.compute.injection_effect import injection_effects, mcnemar_exact, pair_units
from stats.compute.leaderboard import ALL

F, P, S, NONE = 0, 1, 2, -1  # FAIL, PARTIAL, PASS codes; no verdict

# (trigger, type, vanilla, injected): b = 1 (pair 1), c = 5 (pairs 2-6), pair 7 concordant,
# pair 8 dropped (no injected verdict).
PAIRS = [
    (1, "EMERGENT", S, F),
    (2, "EMERGENT", F, S),
    (3, "EMERGENT", P, S),
    (4, "CRITICAL", F, S),
    (5, "CRITICAL", F, S),
    (6, "CRITICAL", P, S),
    (7, "CRITICAL", S, S),
    (8, "CRITICAL", F, NONE),
]


def _effects(pairs=PAIRS, **kwargs):
    trigger, types, vanilla, injected = (np.array(c) for c in zip(*pairs, strict=True))
    return injection_effects(
        models=np.array(["m"] * len(pairs), dtype=object),
        trigger_types=types.astype(object),
        clusters=trigger,
        vanilla=vanilla,
        injected=injected,
        **kwargs,
    )


def test_a_small_table_by_hand():
    overall, emergent, critical = _effects()
    assert [r.trigger_type for r in (overall, emergent, critical)] == [ALL, "EMERGENT", "CRITICAL"]
    assert (overall.n_pairs, overall.b, overall.c) == (7, 1, 5)
    assert overall.vanilla_pass_rate == pytest.approx(2 / 7)
    assert overall.injected_pass_rate == pytest.approx(6 / 7)
    assert overall.delta_pass == pytest.approx(4 / 7)
    # weighted: vanilla (1 + 0 + .5 + 0 + 0 + .5 + 1) / 7, injected 6 / 7
    assert overall.vanilla_weighted == pytest.approx(3 / 7)
    assert overall.injected_weighted == pytest.approx(6 / 7)
    assert overall.delta_weighted == pytest.approx(3 / 7)
    # McNemar exact, b = 1, c = 5: p = 2 · P[Bin(6, 1/2) ≤ 1] = 2 · (1 + 6) / 64
    assert overall.mcnemar_p == pytest.approx(14 / 64)
    # EMERGENT b = 1, c = 2: 2 · (1 + 3) / 8 = 1; CRITICAL b = 0, c = 3: 2 · 1 / 8
    assert (emergent.n_pairs, emergent.b, emergent.c) == (3, 1, 2)
    assert emergent.mcnemar_p == pytest.approx(1.0)
    assert (critical.n_pairs, critical.b, critical.c) == (4, 0, 3)
    assert critical.mcnemar_p == pytest.approx(0.25)
    assert critical.delta_pass == pytest.approx(4 / 4 - 1 / 4)  # vanilla 1 PASS of 4
    for row in (overall, emergent, critical):
        low, high = row.delta_pass_ci
        assert low <= row.delta_pass <= high
        low, high = row.delta_weighted_ci
        assert low <= row.delta_weighted <= high


@pytest.mark.parametrize("b, c", [(1, 5), (0, 3), (4, 4), (2, 9), (0, 0)])
def test_mcnemar_agrees_with_statsmodels(b, c):
    table = [[10, b], [c, 7]]
    assert mcnemar_exact(b, c) == pytest.approx(mcnemar(table, exact=True).pvalue)


def test_the_resamples_are_of_triggers_not_pairs():
    """One trigger with four samples whose pairs differ: resampling triggers can only redraw
    that trigger, so the interval is the point; resampling pairs would widen it."""
    pairs = [
        (1, "RECOVERY", F, S),
        (1, "RECOVERY", S, S),
        (1, "RECOVERY", S, F),
        (1, "RECOVERY", F, S),
    ]
    overall, _ = _effects(pairs)
    assert overall.delta_pass == pytest.approx(0.25)
    assert overall.delta_pass_ci == pytest.approx((0.25, 0.25))
    assert overall.delta_weighted_ci == pytest.approx((0.25, 0.25))


def test_seeded_and_the_seed_changes_only_the_draws():
    first, again, other = _effects(seed=1), _effects(seed=1), _effects(seed=2)
    assert first == again
    assert first[0].delta_pass == other[0].delta_pass
    assert (first[0].delta_pass_ci, first[0].delta_weighted_ci) != (
        other[0].delta_pass_ci,
        other[0].delta_weighted_ci,
    )


def test_pair_units_matches_keys_in_any_order():
    a = (np.array(["x", "x", "y"], dtype=object), np.array([1, 1, 1]), np.array([0, 1, 0]))
    b = (np.array(["y", "x", "z"], dtype=object), np.array([1, 1, 1]), np.array([0, 1, 0]))
    ia, ib = pair_units(a, b)
    assert ia.tolist() == [1, 2] and ib.tolist() == [1, 0]


# --- The table, served ------------------------------------------------------------------------


def _primary_verdicts(run) -> dict[tuple, int]:
    """(model, trigger, sample, condition) → verdict code of the run's primary judge."""
    judge = run.primary_judge.name
    return {
        (j.unit.endpoint.name, j.unit.trigger_id, j.unit.sample_index, j.unit.condition): (
            VERDICT_CODES[j.verdict]
        )
        for j in Judgment.objects.filter(
            unit__run=run, judge_name=judge, state=JudgmentState.DONE
        ).select_related("unit__endpoint")
    }


def _expected_overall(run) -> dict[str, tuple[int, int, int]]:
    verdicts = _primary_verdicts(run)
    out: dict[str, list[int]] = {}
    for (model, trigger, sample, condition), v in verdicts.items():
        if condition != Condition.VANILLA:
            continue
        i = verdicts.get((model, trigger, sample, Condition.RUBRIC_INJECTED))
        if v < 0 or i is None or i < 0:
            continue
        counts = out.setdefault(model, [0, 0, 0])
        counts[0] += 1
        counts[1] += v == S and i != S
        counts[2] += i == S and v != S
    return {m: tuple(c) for m, c in out.items()}


def _export(*args) -> str:
    out = io.StringIO()
    call_command("export_stats", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def test_the_table_everywhere_agrees_with_the_database(demo_run, client_for, researcher):
    expected = _expected_overall(demo_run)
    assert expected and any(b + c for _, b, c in expected.values())
    client = client_for(researcher)
    url = reverse("stats_api:table", args=["injection-effect"])
    body = client.get(url, {"run": demo_run.pk}).json()
    overall = {r["model"]: r for r in body["rows"] if r["trigger_type"] == ALL}
    assert {m: (r["n_pairs"], r["b"], r["c"]) for m, r in overall.items()} == expected
    for row in overall.values():
        assert row["delta_pass"] == pytest.approx(
            row["injected_pass_rate"] - row["vanilla_pass_rate"]
        )
        assert row["mcnemar_p"] == pytest.approx(mcnemar_exact(row["b"], row["c"]))
        assert row["delta_pass_ci_low"] <= row["delta_pass"] <= row["delta_pass_ci_high"]
    # The request's condition does not change the table.
    injected = client.get(url, {"run": demo_run.pk, "condition": "rubric_injected"}).json()
    assert injected["rows"] == body["rows"]

    response = client.get(url, {"run": demo_run.pk, "format": "csv"})
    header, *rows = csv.reader(io.StringIO(response.content.decode(), newline=""))
    assert header == body["columns"] and len(rows) == len(body["rows"])
    first = dict(zip(header, rows[0], strict=True))
    assert int(first["b"]) == body["rows"][0]["b"]
    assert float(first["mcnemar_p"]) == pytest.approx(body["rows"][0]["mcnemar_p"])

    exported = json.loads(_export("injection-effect", "--format", "json"))
    assert exported["rows"] == body["rows"]

    html = client.get(reverse("stats:dashboard")).content.decode()
    section = re.search(r'<section class="card" id="injection-effect">.*?</section>', html, re.S)
    assert section is not None
    panel = section.group(0)
    assert "<h2>Injection effect (paired)" in panel and "<th>McNemar p</th>" in panel
    assert "bootstrap: 1,000 resamples of paired triggers" in panel
    assert "/api/v1/tables/injection-effect/?" in panel


def test_a_run_with_one_condition_gives_an_empty_table_and_says_why(
    demo_run, client_for, researcher
):
    EvaluationUnit.objects.filter(run=demo_run, condition=Condition.RUBRIC_INJECTED).delete()
    client = client_for(researcher)
    body = client.get(
        reverse("stats_api:table", args=["injection-effect"]), {"run": demo_run.pk}
    ).json()
    assert body["rows"] == []
    assert body["notes"] == [
        f"run {demo_run.pk} has no rubric_injected replies: the injection effect needs both "
        "conditions (vanilla and rubric_injected) of the same triggers"
    ]
    html = client.get(reverse("stats:dashboard")).content.decode()
    panel = re.search(r'<section class="card" id="injection-effect">.*?</section>', html, re.S)
    assert panel is not None and "has no rubric_injected replies" in panel.group(0)
