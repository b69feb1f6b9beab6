"""An LLM pairwise judge's verdicts as the ranking tables' battles (``battles=judge``, the judge
named by ``verdicts``): counted by the database exactly as the stream reads them, ranked as the
direct fit of its consistent verdicts with what was left out in the notes; through the API (JSON,
CSV, a bad judge a 400 naming it), ``export_stats`` and the dashboard's run panels (the pairwise
judge filter, a bounded query count); the demo run's judges."""

import csv
import io
import json
import re
from collections import Counter

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from benchmark.models import PairwiseComparison
from stats import selectors, tables
from stats.compute.bradley_terry import bradley_terry
from stats.compute.resampling import DEFAULT_SEED
from stats.interfaces import Battles
from stats.selectors import StatsInputError, TableRequest, VerdictSource
from tests.stats.conftest import PRIMARY_JUDGE, A, B, compare_models, judge_verdicts

pytestmark = pytest.mark.django_db

RANKING, PAIRS = "arena-ranking", "arena-pairs"
PRIMARY, CROSS = "demo-judge-primary", "demo-judge-crossfamily"
DASHBOARD = reverse("stats:dashboard")


def _url(name: str, **query) -> str:
    return (
        reverse("stats_api:table", args=[name])
        + "?"
        + "&".join(f"{k}={v}" for k, v in query.items())
    )


def streamed(run, judge: str) -> tuple[Counter, Counter]:
    """The stream's battles counted per (source A, source B, winner), and what it left out."""
    skipped: Counter = Counter()
    battles = Counter(
        (b.source_a, b.source_b, b.winner)
        for b in selectors.run_pairwise_battles(run=run, judge=judge, skipped=skipped)
    )
    return battles, skipped


def counted(run, judge: str) -> tuple[Counter, Counter]:
    skipped: Counter = Counter()
    rows = selectors.run_pairwise_battle_counts(run=run, judge=judge, skipped=skipped)
    return Counter({(r.source_a, r.source_b, r.winner): r.count for r in rows}), skipped


def build(name: str, run, judge: str = "primary", **options) -> tables.Table:
    return tables.build(
        name,
        TableRequest(run=run, battles="judge", verdicts=VerdictSource.parse(judge), **options),
    )


# --- Counted by the database: the stream's battles --------------------------------------------


def test_the_counts_are_the_streams_battles_and_left_outs(judged):
    for judge in ("pj-one", "pj-two"):
        assert counted(judged, judge) == streamed(judged, judge)
    battles, skipped = counted(judged, "pj-one")
    # PAIRWISE_VERDICTS by hand: A in both orders once, tie in both once; four flips, an
    # error, one order unasked.
    a, b = judged.models
    assert battles == {(a, b, "model_a"): 1, (a, b, "tie"): 1}
    assert skipped == {"inconsistent": 4, "judge error": 1, "one order only": 1}


def test_sources_name_the_condition_once_comparisons_span_conditions(judged):
    unit = judged.units.filter(endpoint__name=judged.models[0], condition="vanilla").first()
    twin = judged.units.get(
        trigger=unit.trigger, endpoint=unit.endpoint, condition="rubric_injected"
    )
    across = PairwiseComparison.objects.create(
        run=judged, trigger=unit.trigger, unit_a=unit, unit_b=twin
    )
    judge_verdicts([across], "pj-two", [(B, B)])
    battles, skipped = counted(judged, "pj-two")
    assert (battles, skipped) == streamed(judged, "pj-two")
    a, b = judged.models
    assert battles == {
        (f"{a} · vanilla", f"{b} · vanilla", "model_a"): 8,
        (f"{a} · vanilla", f"{a} · rubric-injected", "model_b"): 1,
    }


def test_the_demo_judges_counts_are_their_streams(demo_run):
    for judge in (PRIMARY, CROSS):
        battles, skipped = counted(demo_run, judge)
        assert (battles, skipped) == streamed(demo_run, judge)
        assert set(skipped) == {"inconsistent"}


# --- The ranking of a judge's battles ---------------------------------------------------------


def test_the_ranking_is_the_direct_fit_of_the_consistent_verdicts(demo_run):
    """After load_demo the demo run's pairwise verdicts rank its six sources (the run-judge
    option): the same numbers as the fit of the streamed battles, and the notes say what was
    left out, as the consistency table counts it."""
    table = build(RANKING, demo_run)  # verdicts=primary: the run's primary judge
    battles = Battles.from_records(
        (b.source_a, b.source_b, b.winner)
        for b in selectors.run_pairwise_battles(run=demo_run, judge=PRIMARY)
    )
    fit = bradley_terry(battles, seed=DEFAULT_SEED)
    assert [(r["source"], r["rating"], r["rating_ci_low"], r["rating_ci_high"], r["rank"],
             r["battles"], r["wins"], r["ties"], r["losses"]) for r in table.rows] == [
        (r.source, r.rating, r.ci_low, r.ci_high, r.rank, r.battles, r.wins, r.ties, r.losses)
        for r in fit.rows()
    ]  # fmt: skip
    assert len(table.rows) == 6 and table.rows[0]["source"].startswith("demo-atlas-large")
    consistency = {
        r["judge"]: r
        for r in tables.build("pairwise-judge-consistency", TableRequest(run=demo_run)).rows
    }[PRIMARY]
    flips = consistency["n_comparisons"] - consistency["n_consistent"]
    notes = " ".join(table.notes)
    assert (
        f"LLM pairwise judge {PRIMARY}'s verdicts on run {demo_run.pk} (every comparison, "
        f"whatever its condition)" in notes
    )
    assert f"{consistency['n_consistent']} of the {consistency['n_comparisons']} comparisons" in (
        notes
    )
    assert f"left out: {flips} inconsistent (the verdict flipped with the order), 0 with a " in (
        notes
    )
    assert sum(r["battles"] for r in table.rows) == 2 * consistency["n_consistent"]
    assert table.params["battles"] == "judge" and table.params["run"] == demo_run.pk
    pairs = build(PAIRS, demo_run, PRIMARY)
    assert len(pairs.rows) == 15 and pairs.notes == table.notes


def test_verdicts_names_the_judge_as_the_run_tables_do(demo_run):
    cross = build(RANKING, demo_run, CROSS)
    assert build(RANKING, demo_run, f"judge:{CROSS}").rows == cross.rows
    flips = sum(counted(demo_run, CROSS)[1].values())
    assert f"left out: {flips} inconsistent" in " ".join(cross.notes)
    assert sum(r["battles"] for r in cross.rows) != sum(
        r["battles"] for r in build(RANKING, demo_run).rows
    )
    with pytest.raises(StatsInputError, match="not adjudicated"):
        build(RANKING, demo_run, "adjudicated")


def test_a_run_whose_primary_judge_judged_no_pairs_says_which_did(judged):
    with pytest.raises(
        StatsInputError,
        match=rf"run {judged.pk} has no pairwise judge '{PRIMARY_JUDGE}' \(its pairwise judges: "
        r"pj-one, pj-two",
    ):
        build(RANKING, judged)


# --- Surfaces ---------------------------------------------------------------------------------


def test_the_api_serves_a_judges_ranking_as_json_and_csv(demo_run, client_for, researcher):
    client = client_for(researcher)
    body = client.get(_url(RANKING, battles="judge", run=demo_run.pk, verdicts=CROSS)).json()
    assert [r["rating"] for r in body["rows"]] == [
        r["rating"] for r in build(RANKING, demo_run, CROSS).rows
    ]
    assert body["params"]["verdicts"] == CROSS and body["params"]["battles"] == "judge"
    response = client.get(
        _url(PAIRS, battles="judge", run=demo_run.pk, verdicts=CROSS, format="csv")
    )
    header, *rows = csv.reader(io.StringIO(response.content.decode(), newline=""))
    pairs = client.get(_url(PAIRS, battles="judge", run=demo_run.pk, verdicts=CROSS)).json()
    assert header == pairs["columns"] and len(rows) == 15
    assert [float(row[header.index("predicted")]) for row in rows] == [
        r["predicted"] for r in pairs["rows"]
    ]


def test_a_bad_judge_name_is_a_400_naming_it(demo_run, client_for, researcher):
    client = client_for(researcher)
    for fmt in ("json", "csv"):
        response = client.get(
            _url(RANKING, battles="judge", run=demo_run.pk, verdicts="nobody", format=fmt)
        )
        assert response.status_code == 400
        text = response.content.decode()
        assert "no pairwise judge 'nobody'" in text and f"{CROSS}, {PRIMARY}" in text
    adjudicated = client.get(_url(RANKING, battles="judge", verdicts="adjudicated"))
    assert adjudicated.status_code == 400 and "not adjudicated" in adjudicated.json()["detail"]


def test_export_stats_ranks_a_judges_battles(demo_run, client_for, researcher):
    body = (
        client_for(researcher)
        .get(_url(RANKING, battles="judge", run=demo_run.pk, verdicts=PRIMARY))
        .json()
    )
    for run in (["--run", str(demo_run.pk)], []):  # the default run (pinned by load_demo)
        out = io.StringIO()
        call_command(
            "export_stats", RANKING, "--battles", "judge", *run, "--format", "json", stdout=out,
            stderr=io.StringIO(),
        )  # fmt: skip
        assert json.loads(out.getvalue())["rows"] == body["rows"]
    with pytest.raises(CommandError, match="no pairwise judge 'nobody'"):
        call_command("export_stats", RANKING, "--battles", "judge", "--verdicts", "nobody")


def test_without_any_run_a_judges_ranking_says_so(db):
    with pytest.raises(CommandError, match="no evaluation run yet"):
        call_command("export_stats", RANKING, "--battles", "judge")


def _section(html: str, name: str) -> str:
    match = re.search(rf'<section class="card" id="{name}">.*?</section>', html, re.S)
    assert match, f"no {name} panel"
    return match.group(0)


def test_the_dashboard_ranks_the_chosen_pairwise_judge_in_the_run_section(
    demo_run, client_for, researcher
):
    client = client_for(researcher)
    html = client.get(DASHBOARD).content.decode()
    assert re.search(r'<select name="pairwise_judge"[^>]*>', html)
    assert f'<option value="{PRIMARY}" selected>' in html  # the primary judge judged pairs
    ranking = _section(html, f"{RANKING}-judge")
    assert f"Arena ranking · LLM pairwise judge {PRIMARY}" in ranking
    assert ranking.count("<svg") == 1 and 'class="error"' not in ranking
    assert "battles=judge" in ranking and f"verdicts={PRIMARY}" in ranking  # the CSV/JSON links
    assert "Arena pairs · LLM pairwise judge" in _section(html, f"{PAIRS}-judge")
    # The run section: after the run tables, before any study.
    assert html.index(f'id="{PAIRS}-judge"') < html.index('id="raw-exports"')
    chosen = client.get(DASHBOARD, {"pairwise_judge": CROSS}).content.decode()
    assert f"LLM pairwise judge {CROSS}" in _section(chosen, f"{RANKING}-judge")
    flips = sum(counted(demo_run, CROSS)[1].values())
    assert f"left out: {flips} inconsistent" in _section(chosen, f"{RANKING}-judge")


def test_a_run_without_pairwise_judges_has_no_judge_panels(study_run, client_for, researcher):
    html = client_for(researcher).get(DASHBOARD, {"run": study_run.pk}).content.decode()
    assert 'name="pairwise_judge"' not in html and f'id="{RANKING}-judge"' not in html


def test_the_dashboards_queries_do_not_grow_with_the_comparisons(study_run, client_for, researcher):
    client = client_for(researcher)
    comparisons = compare_models(study_run, 12)

    def queries(n: int) -> int:
        with CaptureQueriesContext(connection) as captured:
            response = client.get(DASHBOARD, {"run": study_run.pk})
        section = _section(response.content.decode(), f"{RANKING}-judge")
        assert (
            'class="error"' not in section
            and f"{n - (3 if n == 12 else 0)} of the {n} comparisons" in section
        )
        return len(captured)

    judge_verdicts(comparisons[:3], "pj-one", [(A, A)] * 3)
    few = queries(3)
    judge_verdicts(comparisons[3:], "pj-one", [(A, B)] * 3 + [(A, A)] * 6)
    assert queries(12) == few
