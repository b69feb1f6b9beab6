"""The leaderboard by domain: its computation by hand on a small fixture, and the table through
the API (JSON, CSV), ``export_stats`` and the dashboard, checked against the verdicts read
straight from the database."""

import csv
import io
import json
import re
from collections import Counter

import numpy as np
import pytest
from django.core.management import call_command
from django.urls import reverse

from benchmark.models import Condition, EvaluationUnit, Judgment, JudgmentState
from benchmark.vocabulary import VERDICT_CODES
from stats.compute.leaderboard import ALL, POOLED, leaderboard, leaderboard_by_domain

F, P, S, NONE = 0, 1, 2, -1  # FAIL, PARTIAL, PASS codes; no verdict

# (model, trigger, domain, verdict): triggers 1-2 are sports, 3-4 arts; model a has no verdict
# on trigger 4. The domains' order puts sports first although arts sorts first.
REPLIES = [
    ("a", 1, "sports", S),
    ("a", 2, "sports", P),
    ("a", 3, "arts", F),
    ("a", 4, "arts", NONE),
    ("b", 1, "sports", S),
    ("b", 2, "sports", S),
    ("b", 3, "arts", P),
    ("b", 4, "arts", F),
]
ORDER = ["sports", "arts"]


def _arrays(replies=REPLIES):
    models, triggers, domains, verdicts = (np.array(c) for c in zip(*replies, strict=True))
    return models.astype(object), triggers, domains.astype(object), verdicts


def _by_domain(replies=REPLIES, **kwargs):
    models, triggers, domains, verdicts = _arrays(replies)
    return leaderboard_by_domain(
        models=models,
        domains=domains,
        order=ORDER,
        clusters=triggers,
        verdicts=verdicts,
        **kwargs,
    )


def test_a_small_table_by_hand():
    rows = _by_domain()
    # b (pass 2/4) ranks above a (1/3); the pooled model comes last; ALL, then domains in order
    assert [(r.model, r.group) for r in rows] == [
        ("b", ALL),
        ("b", "sports"),
        ("b", "arts"),
        ("a", ALL),
        ("a", "sports"),
        ("a", "arts"),
        (POOLED, ALL),
        (POOLED, "sports"),
        (POOLED, "arts"),
    ]
    got = {
        (r.model, r.group): (
            r.scores.n_expected,
            r.scores.n,
            r.scores.n_pass,
            r.scores.n_partial,
            r.scores.pass_rate,
            r.scores.weighted_score,
        )
        for r in rows
    }
    assert got == {
        ("b", ALL): (4, 4, 2, 1, 2 / 4, 2.5 / 4),
        ("b", "sports"): (2, 2, 2, 0, 1.0, 1.0),
        ("b", "arts"): (2, 2, 0, 1, 0.0, 0.25),
        ("a", ALL): (4, 3, 1, 1, 1 / 3, 1.5 / 3),
        ("a", "sports"): (2, 2, 1, 1, 0.5, 0.75),
        ("a", "arts"): (2, 1, 0, 0, 0.0, 0.0),
        (POOLED, ALL): (8, 7, 3, 2, 3 / 7, 4 / 7),
        (POOLED, "sports"): (4, 4, 3, 1, 0.75, 0.875),
        (POOLED, "arts"): (4, 3, 0, 1, 0.0, 1 / 6),
    }


def test_pooled_resamples_triggers_so_one_trigger_s_replies_from_every_model_move_together():
    pooled_sports = next(r for r in _by_domain() if (r.model, r.group) == (POOLED, "sports"))
    # Two triggers: 1 (two passes) and 2 (a pass and a partial). A resample is {1, 1}, {1, 2}
    # or {2, 2} with probabilities 1/4, 1/2, 1/4: weighted 1, 0.875, 0.75, so the 95% interval
    # is [0.75, 1]. Resampling the four replies independently would give a lower end of 0.625
    # (three or four partials out of four draws has probability 0.051).
    assert pooled_sports.scores.weighted_ci == (0.75, 1.0)
    assert pooled_sports.scores.pass_ci == (0.5, 1.0)


def test_a_model_s_all_row_is_its_leaderboard_row_cis_included():
    models, triggers, domains, verdicts = _arrays()
    types = np.where(triggers % 2 == 1, "EMERGENT", "CRITICAL").astype(object)
    board = {
        r.model: r.scores
        for r in leaderboard(
            models=models, trigger_types=types, clusters=triggers, verdicts=verdicts
        )
        if r.trigger_type == ALL
    }
    by_domain = {r.model: r.scores for r in _by_domain() if r.group == ALL and r.model != POOLED}
    assert by_domain == board


def test_seeded_and_the_seed_changes_only_the_draws():
    rng = np.random.default_rng(3)
    replies = [(m, t, ORDER[t % 2], int(rng.integers(0, 3))) for m in ("a", "b") for t in range(60)]
    a, again, other = _by_domain(replies), _by_domain(replies), _by_domain(replies, seed=7)
    assert [r.scores for r in a] == [r.scores for r in again]
    assert [r.scores.pass_rate for r in a] == [r.scores.pass_rate for r in other]
    assert [r.scores.pass_ci for r in a] != [r.scores.pass_ci for r in other]


# --- The table, served ------------------------------------------------------------------------


def _expected_counts(run) -> dict[tuple[str, str], tuple[int, int, int, int]]:
    """(model or POOLED, domain key or ALL) → (replies, scored, passes, partials) of the
    vanilla replies under the run's primary judge, read from the database."""
    verdicts = dict(
        Judgment.objects.filter(
            unit__run=run, judge_name=run.primary_judge.name, state=JudgmentState.DONE
        ).values_list("unit_id", "verdict")
    )
    counts: Counter = Counter()
    for unit_id, model, domain in EvaluationUnit.objects.filter(
        run=run, condition=Condition.VANILLA
    ).values_list("id", "endpoint__name", "trigger__turn__dialogue__domain__key"):
        code = VERDICT_CODES[verdicts[unit_id]] if unit_id in verdicts else NONE
        for key in ((model, domain), (model, ALL), (POOLED, domain), (POOLED, ALL)):
            counts[(*key, "replies")] += 1
            counts[(*key, "scored")] += code >= 0
            counts[(*key, "pass")] += code == S
            counts[(*key, "partial")] += code == P
    cells = {(m, d) for m, d, _ in counts}
    return {
        cell: tuple(counts[(*cell, what)] for what in ("replies", "scored", "pass", "partial"))
        for cell in cells
    }


def _export(*args) -> str:
    out = io.StringIO()
    call_command("export_stats", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def test_the_table_everywhere_agrees_with_the_database(demo_run, client_for, researcher):
    expected = _expected_counts(demo_run)
    domains = {d for _, d in expected} - {ALL}
    assert len(domains) == 5  # the demo corpus has every domain
    client = client_for(researcher)
    url = reverse("stats_api:table", args=["leaderboard-by-domain"])
    body = client.get(url, {"run": demo_run.pk}).json()
    got = {
        (r["model"], r["domain"]): (r["n_expected"], r["n"], r["n_pass"], r["n_partial"])
        for r in body["rows"]
    }
    assert got == expected
    for row in body["rows"]:
        assert row["condition"] == "vanilla" and row["verdicts"] == "primary"
        assert row["pass_rate"] == pytest.approx(row["n_pass"] / row["n"])
        assert row["pass_ci_low"] <= row["pass_rate"] <= row["pass_ci_high"]
        assert row["weighted_ci_low"] <= row["weighted_score"] <= row["weighted_ci_high"]
    assert body["rows"][-6]["model"] == POOLED and body["rows"][-6]["domain"] == ALL
    assert body["rows"][-6]["model_display"] == "All models (pooled)"
    assert {r["domain_name"] for r in body["rows"] if r["domain"] == ALL} == {"All domains"}

    # A model's ALL row is its leaderboard row.
    board = client.get(
        reverse("stats_api:table", args=["leaderboard"]), {"run": demo_run.pk}
    ).json()
    skip = {"trigger_type", "domain", "domain_name"}
    overall = [
        {k: v for k, v in r.items() if k not in skip}
        for r in body["rows"]
        if r["domain"] == ALL and r["model"] != POOLED
    ]
    assert overall == [
        {k: v for k, v in r.items() if k not in skip}
        for r in board["rows"]
        if r["trigger_type"] == ALL
    ]

    response = client.get(url, {"run": demo_run.pk, "format": "csv"})
    header, *rows = csv.reader(io.StringIO(response.content.decode(), newline=""))
    assert header == body["columns"] and len(rows) == len(body["rows"])
    first = dict(zip(header, rows[0], strict=True))
    assert int(first["n_pass"]) == body["rows"][0]["n_pass"]
    assert float(first["weighted_ci_low"]) == pytest.approx(body["rows"][0]["weighted_ci_low"])

    exported = json.loads(_export("leaderboard-by-domain", "--format", "json"))
    assert exported["rows"] == body["rows"]

    html = client.get(reverse("stats:dashboard")).content.decode()
    section = re.search(
        r'<section class="card" id="leaderboard-by-domain">.*?</section>', html, re.S
    )
    assert section is not None
    panel = section.group(0)
    assert "<h2>Leaderboard by domain" in panel and "<th>Weighted % [95% CI]</th>" in panel
    assert "All models (pooled)" in panel and "bootstrap: 1,000 resamples of triggers" in panel
    assert "/api/v1/tables/leaderboard-by-domain/?" in panel
