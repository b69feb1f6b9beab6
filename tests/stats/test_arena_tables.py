"""The arena's ranking tables (``arena-ranking``, ``arena-pairs``): on an arena study answered
through the real services and on battles loaded through the real importer, checked against
``bradley_terry`` called directly and against numbers counted by hand; their options; the
disconnected message through the API, the command and the dashboard; the API as JSON and CSV;
``export_stats``; the dashboard panel's SVG; its query count; the vanilla-vs-injected pairwise
study; and the demo's arena study after ``load_demo``."""

import csv
import io
import json
import math
import re

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from annotation.models import Study
from annotation.selectors import study_battles
from annotation.services.assignments import assignment_next
from annotation.services.battles import battles_import
from benchmark.models import ModelEndpoint
from stats import charts, tables
from stats.compute.bradley_terry import bradley_terry
from stats.compute.resampling import BATTLE_RESAMPLES_RANGE, DEFAULT_SEED
from stats.interfaces import Battles
from stats.selectors import StatsInputError, TableRequest
from tests.stats.conftest import answer, answer_next, create_study, exclude, rater_of

pytestmark = pytest.mark.django_db

DASHBOARD = reverse("stats:dashboard")
RANKING, PAIRS = "arena-ranking", "arena-pairs"


def _url(name: str, **query) -> str:
    url = reverse("stats_api:table", args=[name])
    return url + ("?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else "")


# --- Battles through the real importer --------------------------------------------------------

# alpha vs beta: alpha 3, beta 1, a tie; beta vs gamma: 2 each and a tie both bad; alpha vs
# gamma: alpha 4, gamma 1, a tie. Every source wins and loses: the ratings are bounded.
FIXED = [
    *[("alpha", "beta", "model_a")] * 2,
    ("beta", "alpha", "model_b"),  # stored the other way round: the same win for alpha
    ("alpha", "beta", "model_b"),
    ("beta", "alpha", "tie"),
    *[("beta", "gamma", "model_a")] * 2,
    *[("gamma", "beta", "model_a")] * 2,
    ("beta", "gamma", "tie (bothbad)"),
    *[("gamma", "alpha", "model_b")] * 4,
    ("alpha", "gamma", "model_b"),
    ("alpha", "gamma", "tie"),
]


def import_battles(records, name: str = "Fixed battles") -> Study:
    """Battles in the Chatbot Arena format through the real importer (each line its own
    question, so no line supersedes another)."""
    text = "".join(
        json.dumps({"model_a": a, "model_b": b, "winner": w, "judge": f"j{n % 3}",
                    "question_id": f"q{n}"}) + "\n"
        for n, (a, b, w) in enumerate(records)
    )  # fmt: skip
    return battles_import(stream=io.BytesIO(text.encode()), name=name).study


def direct_fit(study: Study, **options):
    """``bradley_terry`` called directly on ``study_battles``, one battle at a time."""
    battles = Battles.from_records(
        (b.source_a, b.source_b, b.winner) for b in study_battles(study=study)
    )
    return bradley_terry(battles, seed=DEFAULT_SEED, **options)


def build(name: str, study: Study, **options) -> tables.Table:
    return tables.build(name, TableRequest(study=study.pk, **options))


def test_the_ranking_is_the_direct_fit_and_the_counts_are_the_hand_counts():
    study = import_battles(FIXED)
    table = build(RANKING, study)
    fit = direct_fit(study)
    assert [r["source"] for r in table.rows] == [r.source for r in fit.rows()]
    for row, expected in zip(table.rows, fit.rows(), strict=True):
        assert row["rating"] == expected.rating
        assert (row["rating_ci_low"], row["rating_ci_high"]) == (expected.ci_low, expected.ci_high)
        assert row["rank"] == expected.rank
    by_source = {r["source"]: r for r in table.rows}
    # By hand, from FIXED: (battles, wins, ties, losses, (wins + ties / 2) / battles).
    assert {s: (r["battles"], r["wins"], r["ties"], r["losses"]) for s, r in by_source.items()} == {
        "alpha": (11, 7, 2, 2),
        "beta": (10, 3, 2, 5),
        "gamma": (11, 3, 2, 6),
    }
    assert by_source["alpha"]["win_rate"] == pytest.approx(8 / 11)
    assert by_source["beta"]["win_rate"] == pytest.approx(4 / 10)
    assert by_source["gamma"]["win_rate"] == pytest.approx(4 / 11)
    assert [r["source"] for r in table.rows] == ["alpha", "beta", "gamma"]
    assert sum(r["rating"] for r in table.rows) / 3 == pytest.approx(1000)
    assert (
        table.rows[0]["rating_ci_low"] < table.rows[0]["rating"] < table.rows[0]["rating_ci_high"]
    )
    notes = " ".join(table.notes)
    assert "16 battles in the fit among 3 sources; 3 of all battles are ties" in notes
    assert "half a win to each side (ties=half" in notes
    assert "400 points per factor of 10" in notes and "the mean rating is 1000" in notes
    assert f"1,000 resamples of the battles, seed {DEFAULT_SEED}" in notes
    assert "do not bound every gap" not in notes


def test_the_pairs_are_the_hand_counted_win_rates_and_the_fits_predictions():
    study = import_battles(FIXED)
    ranking = {r["source"]: r["rating"] for r in build(RANKING, study).rows}
    rows = build(PAIRS, study).rows
    assert [(r["source_a"], r["source_b"]) for r in rows] == [
        ("alpha", "beta"),
        ("alpha", "gamma"),
        ("beta", "gamma"),
    ]
    by_pair = {(r["source_a"], r["source_b"]): r for r in rows}
    # (comparisons, wins, ties, losses, observed) by hand: a tie is half a win.
    assert {
        pair: (r["comparisons"], r["wins"], r["ties"], r["losses"]) for pair, r in by_pair.items()
    } == {
        ("alpha", "beta"): (5, 3, 1, 1),
        ("alpha", "gamma"): (6, 4, 1, 1),
        ("beta", "gamma"): (5, 2, 1, 2),
    }
    assert by_pair[("alpha", "beta")]["observed"] == pytest.approx(3.5 / 5)
    assert by_pair[("alpha", "gamma")]["observed"] == pytest.approx(4.5 / 6)
    assert by_pair[("beta", "gamma")]["observed"] == pytest.approx(0.5)
    for (a, b), r in by_pair.items():
        elo = 1 / (1 + 10 ** ((ranking[b] - ranking[a]) / 400))
        assert r["predicted"] == pytest.approx(elo, abs=1e-12)


def test_ties_left_out_change_the_counts_the_rates_and_the_fit():
    study = import_battles(FIXED)
    table = build(RANKING, study, ties="exclude")
    fit = direct_fit(study, ties="exclude")
    assert [r["rating"] for r in table.rows] == [r.rating for r in fit.rows()]
    alpha = next(r for r in table.rows if r["source"] == "alpha")
    assert (alpha["battles"], alpha["ties"], alpha["win_rate"]) == (9, 2, pytest.approx(7 / 9))
    pairs = {(r["source_a"], r["source_b"]): r for r in build(PAIRS, study, ties="exclude").rows}
    assert pairs[("alpha", "beta")]["observed"] == pytest.approx(3 / 4)
    assert pairs[("alpha", "beta")]["comparisons"] == 4 and pairs[("alpha", "beta")]["ties"] == 1
    assert "left out of the fit, the win rates and the comparisons (ties=exclude" in " ".join(
        table.notes
    )
    assert table.params["ties"] == "exclude"


def test_the_anchor_the_seed_and_the_resamples():
    study = import_battles(FIXED)
    anchored = build(RANKING, study, anchor="beta")
    beta = next(r for r in anchored.rows if r["source"] == "beta")
    assert beta["rating"] == beta["rating_ci_low"] == beta["rating_ci_high"] == 1000
    assert "beta fixed at 1000 (anchor" in " ".join(anchored.notes)
    plain = build(RANKING, study)
    gap = {r["source"]: r["rating"] for r in plain.rows}
    assert next(r for r in anchored.rows if r["source"] == "alpha")["rating"] == pytest.approx(
        1000 + gap["alpha"] - gap["beta"]
    )
    again, other = build(RANKING, study), build(RANKING, study, seed=7)
    assert again.rows == plain.rows
    assert [r["rating_ci_low"] for r in other.rows] != [r["rating_ci_low"] for r in plain.rows]
    assert [r["rating"] for r in other.rows] == [r["rating"] for r in plain.rows]
    fewer = build(RANKING, study, resamples=200)
    expected = direct_fit(study, resamples=200)
    assert [r["rating_ci_high"] for r in fewer.rows] == [r.ci_high for r in expected.rows()]
    assert "200 resamples" in " ".join(fewer.notes) and fewer.params["resamples"] == 200


def test_bad_options_are_refused_with_what_to_do(
    client_for, researcher, study_run, make_annotators
):
    study = import_battles(FIXED)
    client = client_for(researcher)
    low, high = BATTLE_RESAMPLES_RANGE
    unknown = client.get(_url(RANKING, study=study.pk, anchor="delta"))
    assert unknown.status_code == 400
    assert unknown.json()["detail"] == (
        "anchor 'delta' is not one of the sources: alpha, beta, gamma"
    )
    for resamples in (low - 1, high + 1):
        response = client.get(_url(RANKING, study=study.pk, resamples=resamples))
        assert response.status_code == 400 and "resamples" in response.json()
    assert client.get(_url(RANKING, study=study.pk, ties="third")).status_code == 400
    source = client.get(_url(PAIRS, study=study.pk, battles="crowd"))
    assert source.status_code == 400 and "battles" in source.json()
    with pytest.raises(StatsInputError, match="battles is study or judge .*, not 'crowd'"):
        build(PAIRS, study, battles="crowd")
    with pytest.raises(CommandError, match=f"resamples is between {low} and {high:,}"):
        call_command("export_stats", RANKING, "--study", str(study.pk), "--resamples", "5")
    rating = create_study(study_run, "direct_rating", make_annotators(1), overlap=1)
    response = client.get(_url(RANKING, study=rating.pk))
    assert response.status_code == 400
    assert response.json()["detail"] == (
        f"study {rating.pk} is a direct rating study: the arena-ranking table reads pairwise "
        "preference or arena (any two reply sources) studies"
    )


# --- A disconnected comparison graph: a message naming the groups, never a number ------------

APART = [("a", "b", "model_a"), ("b", "a", "tie"), ("c", "d", "model_b"), ("e", "d", "tie")]
GROUPS = "{c, d, e} | {a, b}"


def test_a_disconnected_graph_is_a_400_naming_the_groups(client_for, researcher):
    study = import_battles(APART)
    client = client_for(researcher)
    for name in (RANKING, PAIRS):
        response = client.get(_url(name, study=study.pk))
        assert response.status_code == 400
        detail = response.json()["detail"]
        assert detail.startswith("the comparison graph is not connected: no battle links these 2")
        assert GROUPS in detail
        as_csv = client.get(_url(name, study=study.pk, format="csv"))
        assert as_csv.status_code == 400
        assert (
            as_csv.content.decode().startswith("detail\r\n") and GROUPS in as_csv.content.decode()
        )


def test_a_disconnected_graph_is_a_command_error_naming_the_groups():
    study = import_battles(APART)
    with pytest.raises(CommandError, match=re.escape(GROUPS)):
        call_command("export_stats", RANKING, "--study", str(study.pk), stdout=io.StringIO())


def test_a_disconnected_graph_is_the_message_in_the_panel(client_for, researcher, study_run):
    study = import_battles(APART)
    html = client_for(researcher).get(DASHBOARD, {"study": study.pk}).content.decode()
    for name in (RANKING, PAIRS):
        section = _section(html, name)
        (error,) = re.findall(r'<p class="error">([^<]*)</p>', section)
        assert error.startswith("the comparison graph is not connected") and GROUPS in error
        assert "<svg" not in section and "<table" not in section


# --- API, command ----------------------------------------------------------------------------


def _csv_value(text, kind):
    if text == "":
        return None
    return {"int": int, "float": float}.get(kind, str)(text)


def test_the_api_serves_json_and_the_same_numbers_as_csv(client_for, researcher):
    study = import_battles(FIXED)
    client = client_for(researcher)
    for name in (RANKING, PAIRS):
        body = client.get(_url(name, study=study.pk, ties="exclude", anchor="gamma")).json()
        assert body["table"] == name
        assert body["params"] == {
            "seed": DEFAULT_SEED,
            "study": study.pk,
            "include_excluded": False,
            "ties": "exclude",
            "anchor": "gamma",
        }
        expected = build(name, study, ties="exclude", anchor="gamma")
        assert body["rows"] == expected.as_json()["rows"] and body["notes"] == expected.notes
        response = client.get(
            _url(name, study=study.pk, ties="exclude", anchor="gamma", format="csv")
        )
        assert response["Content-Type"] == "text/csv; charset=utf-8"
        assert response["Content-Disposition"] == f'attachment; filename="{name}.csv"'
        rows = list(csv.reader(io.StringIO(response.content.decode(), newline="")))
        kinds = {c.name: c.kind for c in tables.get(name).columns}
        assert rows[0] == body["columns"]
        parsed = [
            {k: _csv_value(v, kinds[k]) for k, v in zip(rows[0], row, strict=True)}
            for row in rows[1:]
        ]
        assert parsed == body["rows"]


def test_the_schema_documents_the_ranking_options(client_for, researcher):
    schema = client_for(researcher).get(reverse("stats_api:schema") + "?format=json").json()
    operation = schema["paths"]["/api/v1/tables/arena-ranking/"]["get"]
    parameters = {p["name"]: p for p in operation["parameters"]}
    assert {"study", "ties", "anchor", "resamples", "battles", "seed", "include_excluded"} <= set(
        parameters
    )
    assert parameters["ties"]["schema"]["enum"] == ["half", "exclude"]
    assert parameters["battles"]["schema"]["enum"] == ["study", "judge"]
    assert parameters["resamples"]["schema"]["minimum"] == BATTLE_RESAMPLES_RANGE[0]
    assert parameters["resamples"]["schema"]["maximum"] == BATTLE_RESAMPLES_RANGE[1]
    row = schema["components"]["schemas"]["ArenaRankingRow"]["properties"]
    assert {"rank", "source", "rating", "rating_ci_low", "rating_ci_high", "battles"} <= set(row)
    assert "predicted" in schema["components"]["schemas"]["ArenaPairsRow"]["properties"]


def test_export_stats_writes_the_tables_with_their_options(tmp_path):
    study = import_battles(FIXED)
    out, err = io.StringIO(), io.StringIO()
    call_command("export_stats", RANKING, "--study", str(study.pk), stdout=out, stderr=err)
    rows = list(csv.DictReader(io.StringIO(out.getvalue(), newline="")))
    expected = build(RANKING, study).rows
    assert [r["source"] for r in rows] == ["alpha", "beta", "gamma"]
    assert [float(r["rating"]) for r in rows] == [r["rating"] for r in expected]
    assert "note: 16 battles in the fit among 3 sources" in err.getvalue()
    path = tmp_path / "pairs.json"
    call_command(
        "export_stats", PAIRS, "--study", str(study.pk), "--format", "json", "--ties", "exclude",
        "--anchor", "alpha", "--resamples", "300", "--seed", "3", "--out", str(path),
        stderr=io.StringIO(),
    )  # fmt: skip
    body = json.loads(path.read_text())
    assert body["params"]["ties"] == "exclude" and body["params"]["resamples"] == 300
    assert (
        body["rows"]
        == build(PAIRS, study, ties="exclude", anchor="alpha", resamples=300, seed=3).as_json()[
            "rows"
        ]
    )


def test_annotators_get_404(client_for, annotator):
    study = import_battles(FIXED)
    for name in (RANKING, PAIRS):
        assert client_for(annotator).get(_url(name, study=study.pk)).status_code == 404


def test_a_study_without_battles_yet_is_an_empty_table(run_study_arena):
    table = build(RANKING, run_study_arena)
    assert table.rows == [] and build(PAIRS, run_study_arena).rows == []


# --- An arena study answered through the services ---------------------------------------------

# Which source wins, by the sources' order of strength (every fifth answer an upset, every
# fourth a tie, every seventh both bad), whatever side it was shown on.
STRENGTH = ("zephyr-secret-large · rubric-injected", "zephyr-secret-large · vanilla",
            "quartz-hidden-mini · rubric-injected", "quartz-hidden-mini · vanilla")  # fmt: skip


def _decide(n: int):
    def decide(assignment) -> dict:
        order = assignment.display["order"]  # sides on screen, e.g. ["B", "A"]
        # An arena item names its sources; a pairwise item's sides are its model's vanilla
        # (A) and rubric-injected (B) replies: the injected one is the stronger.
        sources = assignment.item.payload.get("sources")

        def strength(side: str) -> int:
            return STRENGTH.index(sources[side]) if sources else ("B", "A").index(side)

        if n % 7 == 6 and sources:  # the arena's fourth choice
            return {"choice": "bothbad", "confidence": 2}
        if n % 4 == 3:
            return {"choice": "tie", "confidence": 2}
        better = min(order, key=strength)
        if n % 5 == 4:
            better = next(side for side in order if side != better)
        return {"choice": str(order.index(better) + 1), "confidence": 3}

    return decide


@pytest.fixture
def run_study_arena(study_run, make_annotators):
    users = make_annotators(3)
    return create_study(None, "arena", users, runs=[study_run], per_pair=2, name="Arena")


def answer_every_item(study: Study) -> int:
    """Every rater in turn presses Next and answers, until none is handed an item."""
    raters = list(study.raters.select_related("study").order_by("pk"))
    n = 0
    while True:
        before = n
        for rater in raters:
            if (assignment := assignment_next(rater=rater)) is not None:
                answer(rater, assignment, _decide(n))
                n += 1
        if n == before:
            return n


def test_an_answered_arena_study_ranks_as_the_direct_fit(run_study_arena, researcher):
    study = run_study_arena
    answered = answer_every_item(study)
    assert answered == 24  # 6 pairs of 4 sources × 2 triggers, 2 raters each
    table = build(RANKING, study)
    fit = direct_fit(study)
    assert [(r["source"], r["rating"], r["rating_ci_low"], r["rating_ci_high"], r["rank"],
             r["battles"], r["wins"], r["ties"], r["losses"]) for r in table.rows] == [
        (r.source, r.rating, r.ci_low, r.ci_high, r.rank, r.battles, r.wins, r.ties, r.losses)
        for r in fit.rows()
    ]  # fmt: skip
    assert {r["source"] for r in table.rows} == set(STRENGTH)
    assert sum(r["battles"] for r in table.rows) == 2 * answered
    assert table.rows[0]["source"] == STRENGTH[0]
    # An excluded rater's battles leave the table, and come back on request, with a note.
    third = study.raters.order_by("pk")[2]
    exclude(third, researcher)
    left_out = build(RANKING, study)
    assert sum(r["battles"] for r in left_out.rows) < 2 * answered
    assert f"left out: {third.user.username}" in " ".join(left_out.notes)
    counted = build(RANKING, study, include_excluded=True)
    assert [r["rating"] for r in counted.rows] == [r["rating"] for r in table.rows]


def test_gold_items_are_left_out_of_the_ranking(study_run, make_annotators):
    keys = create_study(
        None, "arena", make_annotators(1), runs=[study_run], per_pair=1, name="Keys", overlap=1
    )
    key = keys.items.order_by("position").first().key
    users = make_annotators(2)
    study = create_study(
        None, "arena", users, runs=[study_run], per_pair=1, name="Gold", gold=f"{key} bothbad"
    )
    answered = answer_every_item(study)
    gold_answers = 2
    table = build(RANKING, study)
    assert sum(r["battles"] for r in table.rows) == 2 * (answered - gold_answers)
    assert f"{gold_answers} battle(s) on gold items left out (quality checks)" in table.notes


# --- The dashboard ----------------------------------------------------------------------------


def _section(html: str, name: str) -> str:
    match = re.search(rf'<section class="card" id="{name}">.*?</section>', html, re.S)
    assert match, f"no {name} panel"
    return match.group(0)


def test_the_panel_draws_the_ranking_and_the_heatmap_with_tooltips(
    client_for, researcher, study_run
):
    study = import_battles(FIXED)
    client = client_for(researcher)
    html = client.get(DASHBOARD, {"study": study.pk}).content.decode()
    ranking, pairs = _section(html, RANKING), _section(html, PAIRS)
    assert ranking.count("<svg") == 1 and pairs.count("<svg") == 1
    alpha = next(r for r in build(RANKING, study).rows if r["source"] == "alpha")
    assert (
        f"<title>alpha: {alpha['rating']:.0f} [{alpha['rating_ci_low']:.0f}, "
        f"{alpha['rating_ci_high']:.0f}] · rank 1 · 11 battles (7 won, 2 ties, 2 lost)</title>"
    ) in ranking
    assert "<title>alpha vs beta: won 70.0% of 5 (3 won, 1 ties, 1 lost); predicted" in pairs
    assert "<title>beta vs alpha: won 30.0% of 5 (1 won, 1 ties, 3 lost); predicted" in pairs
    assert 'class="heat-7"' in pairs and 'class="heat-3"' in pairs  # 70 % and 30 %
    assert "16 battles in the fit among 3 sources" in ranking
    for section in (ranking, pairs):
        (link,) = re.findall(r'href="(/api/v1/tables/[^"]+format=csv)"', section)
        response = client.get(link.replace("&amp;", "&"))
        assert response.status_code == 200
        assert response.content.split(b",")[0] in (b"rank", b"source_a")
    excluded = client.get(DASHBOARD, {"study": study.pk, "ties": "exclude"}).content.decode()
    section = _section(excluded, RANKING)
    assert "ties=exclude" in section and "left out of the fit" in section


def test_the_panel_of_a_study_without_battles_says_so(client_for, researcher, run_study_arena):
    html = client_for(researcher).get(DASHBOARD, {"study": run_study_arena.pk}).content.decode()
    assert "No battles yet." in _section(html, RANKING) and "<svg" not in _section(html, RANKING)


def test_the_dashboards_query_count_does_not_grow_with_the_battles(
    client_for, researcher, study_run
):
    small = import_battles(FIXED[:6], name="Small")
    large = import_battles(FIXED * 20, name="Large")
    client = client_for(researcher)
    counts = []
    for study in (small, large, small):
        with CaptureQueriesContext(connection) as queries:
            response = client.get(DASHBOARD, {"study": study.pk})
        assert response.status_code == 200 and 'class="error"' not in response.content.decode()
        counts.append(len(queries))
    assert counts[0] == counts[1] == counts[2], counts


# --- The vanilla-vs-injected pairwise study ---------------------------------------------------


def test_a_pairwise_study_of_one_model_ranks_its_two_conditions(study_run, make_annotators):
    model = ModelEndpoint.objects.get(name="zephyr-secret-large")
    users = make_annotators(2)
    study = create_study(study_run, "pairwise", users, endpoints=[model], name="One model")
    answered = answer_every_item(study)
    table = build(RANKING, study)
    assert {r["source"] for r in table.rows} == {
        f"{model.name} · vanilla",
        f"{model.name} · rubric-injected",
    }
    assert [r["rating"] for r in table.rows] == [r.rating for r in direct_fit(study).rows()]
    injected = next(r for r in table.rows if r["source"].endswith("rubric-injected"))
    preference = next(
        r for r in build("preference", study).rows if r["raters"] == "all" and r["stratum"] == "ALL"
    )
    assert injected["wins"] == preference["n_injected"]
    assert injected["ties"] == preference["n_ties"] and injected["battles"] == answered


def test_a_pairwise_study_of_two_models_names_each_models_group(study_run, make_annotators):
    users = make_annotators(2)
    study = create_study(study_run, "pairwise", users, name="Two models", max_items=6)
    answer_every_item(study)
    with pytest.raises(StatsInputError, match=re.escape(
        "{quartz-hidden-mini · rubric-injected, quartz-hidden-mini · vanilla} | "
        "{zephyr-secret-large · rubric-injected, zephyr-secret-large · vanilla}"
    )):  # fmt: skip
        build(RANKING, study)


# --- The demo ---------------------------------------------------------------------------------


def test_the_demo_arena_study_ranks_the_demo_models_once_answered(db, client_for, researcher):
    call_command("load_demo", stdout=io.StringIO())
    study = Study.objects.get(kind="arena")
    assert build(RANKING, study).rows == []  # open, no answer yet
    n = 0
    for username in ("annotator1", "annotator2"):
        rater = rater_of(study, User.objects.get(username=username))
        while assignment_next(rater=rater) is not None:
            choice = ("1", "2", "tie", "1", "bothbad", "2")[n % 6]
            answer_next(rater, lambda a, choice=choice: {"choice": choice, "confidence": 3})
            n += 1
    assert n == 30  # three pairs × five triggers, two raters each
    table = build(RANKING, study)
    assert {r["source"] for r in table.rows} == {
        "demo-atlas-large",
        "demo-birch-medium",
        "demo-cedar-small",
    }
    assert sum(r["battles"] for r in table.rows) == 2 * n
    assert all(math.isfinite(r["rating"]) for r in table.rows)
    assert len(build(PAIRS, study).rows) == 3
    html = client_for(researcher).get(DASHBOARD, {"study": study.pk}).content.decode()
    assert _section(html, RANKING).count("<svg") == 1 and 'class="error"' not in html


def test_source_names_are_escaped_in_the_panel_and_its_charts(client_for, researcher, study_run):
    study = import_battles([("<b>bold</b>", "plain", "model_a"), ("plain", "<b>bold</b>", "tie")])
    html = client_for(researcher).get(DASHBOARD, {"study": study.pk}).content.decode()
    for name in (RANKING, PAIRS):
        section = _section(html, name)
        assert "<b>bold</b>" not in section and "&lt;b&gt;bold&lt;/b&gt;" in section


@pytest.mark.parametrize(
    ("low", "high"), [(781.2, 1224.0), (999.5, 1000.5), (1000.0, 1000.0), (-3.0, 12.0)]
)
def test_the_interval_axis_ticks_are_round_and_cover_the_data(low, high):
    ticks = charts.nice_ticks(low, high)
    assert ticks[0] <= low and ticks[-1] >= high and 2 <= len(ticks) <= 8
    steps = {round(b - a, 9) for a, b in zip(ticks, ticks[1:], strict=False)}
    assert len(steps) == 1
    (step,) = steps
    mantissa = step / 10 ** math.floor(math.log10(step))
    assert round(mantissa, 9) in (1, 2, 5)
