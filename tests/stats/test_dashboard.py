import io
import re
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.urls import reverse

from annotation import kinds
from annotation.demo import LABELLED_STUDY
from annotation.kinds.dialogue_audit import AUDIT_CHECK_KEYS
from annotation.models import Study
from annotation.services.assignments import assignment_next
from benchmark.corpus.importer import corpus_import
from benchmark.models import TriggerType
from benchmark.vocabulary import FAILURE_MODES
from stats import charts
from stats.models import ExternalBenchmarkScore
from stats.tables import Table
from stats.tables.failure_modes import failure_mode_chart
from stats.tables.preference import preference_chart
from tests.factories import jsonl_bytes, records_for, stream
from tests.stats.conftest import answer_next, create_study, exclude, rater_of

DASHBOARD = reverse("stats:dashboard")
RUN_SECTIONS = (
    "leaderboard",
    "leaderboard-by-domain",
    "injection-effect",
    "judge-agreement",
    "judge-self-consistency",
    "pairwise-judge-consistency",
    "style-sensitivity",
    "style-sensitivity-by-phase",
    "disclosure-distance",
    "benchmark-correlation",
    "failure-modes-llm",
    "failure-modes-llm-vs-human",
    "judge-human-alignment",
    # The demo run has pairwise verdicts: the ranking of its primary judge's battles.
    "arena-ranking-judge",
    "arena-pairs-judge",
    "raw-exports",
)
UPLOAD = reverse("stats:benchmark_scores")


def test_researcher_sees_every_panel_with_charts_and_csv_links(demo_run, client_for, researcher):
    response = client_for(researcher).get(DASHBOARD)
    assert response.status_code == 200
    html = response.content.decode()
    for section in RUN_SECTIONS:
        assert f'id="{section}"' in html
    # pass rate, weighted, phases, style and phase scatters, the classifier's failure modes;
    # the pairwise judge's ratings and win rates
    assert html.count("<svg") == 8
    assert "Phase sensitivity: b_m against pass rate" in html
    assert "Atlas Large (demo)" in html
    csv_links = re.findall(r'href="(/api/v1/tables/[^"]+format=csv)"', html)
    assert len(csv_links) == 15
    for link in csv_links:
        assert client_for(researcher).get(link.replace("&amp;", "&")).status_code == 200
    assert "/api/v1/exports/judgments.csv?run=" in html


def test_htmx_filter_swaps_only_the_content(demo_run, client_for, researcher):
    client = client_for(researcher)
    full = client.get(DASHBOARD, {"run": demo_run.pk, "verdicts": "demo-judge-crossfamily"})
    partial = client.get(
        DASHBOARD,
        {"run": demo_run.pk, "verdicts": "demo-judge-crossfamily", "condition": "rubric_injected"},
        HTTP_HX_REQUEST="true",
    )
    assert b"<html" in full.content and b"<html" not in partial.content
    assert partial.content.strip().startswith(b'<div id="content">')
    assert b"verdicts=demo-judge-crossfamily" in partial.content
    assert b"condition=rubric_injected" in partial.content


def test_bad_filter_values_fall_back_to_the_defaults(demo_run, client_for, researcher):
    response = client_for(researcher).get(DASHBOARD, {"run": "x", "condition": "both"})
    assert response.status_code == 200
    assert f"Run {demo_run.pk} ·".encode() in response.content


def test_dashboard_query_count_is_fixed(
    demo_run, client_for, researcher, django_assert_max_num_queries
):
    client = client_for(researcher)
    client.get(DASHBOARD)  # warm the session and content types
    # 2 of them: the alignment table's studies and adjudicated verdicts; 2 the failure-mode
    # classifier's labels and the failure-mode studies they are compared with; 1 the judges'
    # repeats (self-consistency); 3 the injection effect's other condition (its judge, units
    # and verdicts)
    # leaderboard-by-domain reads the domain names: 1; pairwise judge consistency its verdicts: 1;
    # the pairwise judge filter its choices (1) and the judge's ranking panels its battle
    # counts (1)
    with django_assert_max_num_queries(28):
        assert client.get(DASHBOARD).status_code == 200


def test_no_run_yet(db, client_for, researcher):
    response = client_for(researcher).get(DASHBOARD)
    assert response.status_code == 200 and b"No evaluation run yet" in response.content


@pytest.mark.parametrize("url", [DASHBOARD, UPLOAD])
def test_annotators_and_outsiders_get_404_and_the_anonymous_log_in(
    db, client, client_for, annotator, outsider, url
):
    assert client.get(url).status_code == 302
    for user in (annotator, outsider):
        assert client_for(user).get(url).status_code == 404


def test_upload_page_saves_a_good_file_and_lists_every_error_of_a_bad_one(
    demo_run, client_for, researcher
):
    client = client_for(researcher)
    good = io.BytesIO(b"model,GPQA\nAtlas Large (demo),71.5\ndemo-cedar-small,30\n")
    good.name = "scores.csv"
    response = client.post(UPLOAD, {"file": good}, follow=True)
    assert b"Uploaded 2 score(s)" in response.content
    assert ExternalBenchmarkScore.objects.count() == 2
    bad = io.BytesIO(b"model,GPQA\nNobody,1\ndemo-cedar-small,lots\n")
    bad.name = "scores.csv"
    response = client.post(UPLOAD, {"file": bad})
    assert response.status_code == 400
    assert b"line 2, column model: no model endpoint named &#x27;Nobody&#x27;" in response.content
    assert b"line 3, column GPQA: &#x27;lots&#x27; is not a number" in response.content
    assert ExternalBenchmarkScore.objects.get(endpoint__name="demo-cedar-small").score == 30.0
    dashboard = client.get(DASHBOARD).content.decode()
    assert "GPQA" in dashboard and "no external benchmark scores" not in dashboard


def test_ci_bars_geometry_and_missing_values():
    chart = charts.ci_bars(
        [("a", 0.5, 0.4, 0.6), ("b", float("nan"), 0, 0)], title="t", reference=0.5
    )
    plot_w = charts.WIDTH - charts.LABEL_W - charts.RIGHT_PAD
    (bar,) = [s for s in chart.shapes if s.kind == "rect"]
    assert bar.x == charts.LABEL_W and bar.w == pytest.approx(0.5 * plot_w)
    assert bar.title == "a: 50.0% [40.0%, 60.0%]"
    assert any(s.kind == "text" and s.text == "no data" for s in chart.shapes)
    assert any(
        s.css == "reference" and s.x == pytest.approx(charts.LABEL_W + 0.5 * plot_w)
        for s in chart.shapes
    )


def test_every_mark_of_every_dashboard_chart_shows_its_value_on_hover(
    demo_run, client_for, researcher
):
    """Issue #19: each bar, whisker, share and point carries a <title> with its value (the
    browser's tooltip), and each row an invisible hit area with it, so a thin bar shows it."""
    html = client_for(researcher).get(DASHBOARD).content.decode()
    svgs = re.findall(r"<svg.*?</svg>", html, re.S)
    # The run's six, and the ranking of its pairwise judge's battles (intervals and heatmap).
    assert len(svgs) == 8
    for svg in svgs:
        # (A heatmap's diagonal, a source against itself, has no value to show.)
        marks = re.findall(
            r'<(rect|circle|line) [^>]*class="(?!grid|reference|heat-self)[^"]*">(.*?)</\1>', svg
        )
        assert marks, svg[:200]
        for kind, inner in marks:
            assert re.fullmatch(r"<title>[^<]+: [^<]*\d[^<]*</title>", inner), (kind, inner)
        # Rows of bars have a hit area; a scatter's points and a heatmap's cells are their own.
        assert 'class="hit"' in svg or "<circle" in svg or 'class="heat-' in svg
    # A leaderboard row: its hit area, bar, whiskers and value all say the same.
    row = re.search(r'<rect [^>]*class="hit"><title>(Atlas Large \(demo\): [^<]+)</title>', html)
    assert row and html.count(f"<title>{row.group(1)}</title>") >= 5


def test_chart_labels_are_large_enough_to_read():
    """14 view-box units in a 640-wide box: a chart shown at its usual width keeps them at
    about 12 px or more."""
    css = (Path(__file__).resolve().parents[2] / "static" / "css" / "app.css").read_text()
    assert re.search(r"figure\.chart svg \{[^}]*font-size: 14px", css)
    assert charts.WIDTH == 640 and charts.ROW_H >= 28


def test_failure_mode_and_preference_charts_from_their_tables():
    shares = dict.fromkeys(FAILURE_MODES, 0.0) | {
        "generic_closing": 0.25,
        "deliverable_repetition": 0.75,
    }
    table = Table(
        "failure-modes", "", (), [{"model": "m", **{f"share_{k}": v for k, v in shares.items()}}]
    )
    (chart,) = failure_mode_chart(table)
    rects = [s for s in chart.shapes if s.kind == "rect"]
    assert [round(r.w / rects[0].w, 6) for r in rects] == [1.0, 3.0]  # 25 % then 75 %
    assert rects[1].x == pytest.approx(rects[0].x + rects[0].w)
    rows = [
        {
            "raters": "all",
            "stratum": "ALL",
            "injected_rate": 0.8,
            "bootstrap_low": 0.74,
            "bootstrap_high": 0.86,
        },
        {
            "raters": "all",
            "stratum": "PASS",
            "injected_rate": 0.7,
            "bootstrap_low": 0.6,
            "bootstrap_high": 0.8,
        },
        {
            "raters": "without_excluded",
            "stratum": "ALL",
            "injected_rate": 0.9,
            "bootstrap_low": 0.8,
            "bootstrap_high": 0.95,
        },
    ]
    (chart,) = preference_chart(Table("preference", "", (), rows))
    labels = [s.text for s in chart.shapes if s.css == "label"]
    assert labels == ["All items", "Vanilla judged Pass"]


def test_chart_labels_are_escaped(demo_run, client_for, researcher):
    from benchmark.models import ModelEndpoint

    ModelEndpoint.objects.filter(name="demo-atlas-large").update(display_name="<b>Atlas</b>")
    html = client_for(researcher).get(DASHBOARD).content.decode()
    assert "<b>Atlas</b>" not in html and "&lt;b&gt;Atlas&lt;/b&gt;" in html


# --- With a human study -----------------------------------------------------------------------

AUDIT_YES = {f"check_{key}": "yes" for key in AUDIT_CHECK_KEYS}
DEMO_ANSWERS = {
    "pairwise": lambda n: {"choice": ("1", "2", "tie")[n % 3], "confidence": 3},
    "arena": lambda n: {"choice": ("1", "bothbad", "2")[n % 3], "confidence": 2},
    "direct_rating": lambda n: {
        "verdict": ("PASS", "FAIL")[n % 2],
        "confidence": 4,
        "note": "Against the rubric.",
    },
    "adjudication": lambda n: {"verdict": ("PARTIAL", "FAIL")[n % 2]},
    "failure_mode": lambda n: {"label": ("generic_closing", "other")[n % 2], "note": "x"},
    "dialogue_audit": lambda n: {**AUDIT_YES, "decision": "pass"},
    # HALO (issue #17): three replies; the second rejected as a premature, excessive action.
    "halo": lambda n: {
        **{f"level_{r}": ("L0", "L3", "L1")[r - 1] for r in (1, 2, 3)},
        **{f"acceptable_{r}": "no" if r == 2 or n % 2 else "yes" for r in (1, 2, 3)},
        **{f"timing_{r}": "premature" for r in (2, 3)},
        **{f"intensity_{r}": "excessive" for r in (2, 3)},
    },
    # Proposal review: fields by screen position (a context has two or three), or reject all.
    "proposal_review": lambda n: (
        {"reject_all": "1"}
        if n % 3 == 2
        else {"proposal_1": "accept", "proposal_2": ("reject", "accept")[n % 2]}
        | {"proposal_3": "reject"}
    ),
}
STUDY_SECTIONS = {
    "pairwise": {
        "preference",
        "preference-raters",
        "arena-ranking",
        "arena-pairs",
        "pairwise-judge-human",
        "human-agreement",
    },
    "arena": {"arena-ranking", "arena-pairs", "pairwise-judge-human", "human-agreement"},
    "direct_rating": {"human-agreement"},
    "adjudication": {"human-agreement"},
    "failure_mode": {"failure-modes", "human-agreement"},
    "dialogue_audit": {"human-agreement"},
    "halo": {
        "halo-acceptability",
        "halo-proactivity",
        "halo-timing-intensity",
        "halo-levels",
        "halo-paired",
        "halo-effort",
        "halo-effort-correlation",
        "halo-agreement",
    },
    "proposal_review": {
        "proposal-acceptance",
        "proposal-decisions",
        "proposal-agreement",
        "human-agreement",
    },
}


def _sections(html: str) -> set[str]:
    return set(re.findall(r'<section class="card" id="([a-z-]+)"', html))


def test_every_demo_study_on_the_dashboard_before_and_after_answers(db, client_for, researcher):
    """The demo's six studies (load_demo): empty, then with a few answers from both demo
    annotators through the annotation services; every panel renders, without an error."""
    call_command("load_demo", stdout=io.StringIO())
    client = client_for(researcher)
    # The annotators' six; the closed study the demo raters answered has its own test
    # (tests/stats/test_demo_failure_mode_labels.py).
    studies = list(Study.objects.exclude(name=LABELLED_STUDY).order_by("pk"))
    assert {s.kind for s in studies} == {k.key for k in kinds.all_kinds()}
    for study in studies:
        html = client.get(DASHBOARD, {"study": study.pk}).content.decode()
        assert _sections(html) >= STUDY_SECTIONS[study.kind] | {"leaderboard", "raw-exports"}
    for study in studies:
        for user in ("annotator1", "annotator2"):
            rater = rater_of(study, User.objects.get(username=user))
            for n in range(3):
                if assignment_next(rater=rater) is None:
                    break
                answer_next(rater, lambda a, n=n, kind=study.kind: DEMO_ANSWERS[kind](n))
    for study in studies:
        response = client.get(DASHBOARD, {"study": study.pk})
        html = response.content.decode()
        assert response.status_code == 200
        assert _sections(html) == STUDY_SECTIONS[study.kind] | set(RUN_SECTIONS)
        errors = re.findall(r'<p class="error">([^<]*)</p>', html)
        if study.kind == "pairwise":
            # Each model's vanilla against its rubric-injected reply: a group of two sources per
            # model, which the ranking names rather than rank against each other.
            assert len(errors) == 2 and all("is not connected" in e for e in errors), errors
            groups = re.findall(r"\{([^}]*)\}", errors[0])
            assert len(groups) >= 2
            for group in groups:
                model = group.split(" · ")[0]
                assert group == f"{model} · rubric-injected, {model} · vanilla"
        else:
            assert not errors, (study.kind, errors)
        assert f"Study {study.pk} · {study.name}" in html
        assert f"/api/v1/exports/votes.csv?study={study.pk}" in html
        for link in re.findall(r'href="(/api/v1/tables/[^"]+format=csv)"', html):
            if f"study={study.pk}" in link:
                # The pairwise study's ranking: the same message, as a 400.
                disconnected = study.kind == "pairwise" and "/tables/arena-" in link
                status = client.get(link.replace("&amp;", "&")).status_code
                assert status == (400 if disconnected else 200), link
    pairwise = next(s for s in studies if s.kind == "pairwise")
    html = client.get(DASHBOARD, {"study": pairwise.pk}).content.decode()
    assert html.count("<svg") == 9  # the run's eight, and the preference bars
    assert "annotator1" in html and "annotator2" in html  # the per-rater table


def test_dashboard_with_a_study_has_a_fixed_query_count(
    demo_run, client_for, researcher, make_annotators, django_assert_max_num_queries
):
    users = make_annotators(2)
    study = create_study(
        demo_run, "pairwise", users, name="Pairs", trigger_type=TriggerType.RECOVERY
    )
    client = client_for(researcher)
    for user in users:
        rater = rater_of(study, user)
        for n in range(4):
            answer_next(rater, lambda a, n=n: DEMO_ANSWERS["pairwise"](n))
    client.get(DASHBOARD, {"study": study.pk})  # warm the session and content types
    # 28 without a study; the ranking panels of its battles add 2 (raters, battle counts); the
    # pairwise judge vs people table 2 (the items' pairs, the judges' verdicts on them)
    with django_assert_max_num_queries(39):
        assert client.get(DASHBOARD, {"study": study.pk}).status_code == 200


def test_a_study_without_a_run_and_its_exclusion_option(
    db, client_for, researcher, make_annotators
):
    """An audit needs no run: its panel shows even before any run exists; "Count excluded
    raters" changes what the table counts and is carried into its CSV link."""
    corpus_import(stream=stream(jsonl_bytes(records_for(2))))
    users = make_annotators(3)
    study = create_study(None, "dialogue_audit", users, overlap=2, name="Audit", max_items=1)
    one, two, three = (rater_of(study, u) for u in users)
    answer_next(one, lambda a: {**AUDIT_YES, "decision": "pass"})
    answer_next(two, lambda a: {**AUDIT_YES, "decision": "pass"})
    exclude(two, researcher)
    client = client_for(researcher)
    html = client.get(DASHBOARD, {"study": study.pk}).content.decode()
    assert "No evaluation run yet" in html and _sections(html) == {"human-agreement", "raw-exports"}
    assert "raters the study excludes are left out: rater2" in html
    counted = client.get(DASHBOARD, {"study": study.pk, "include_excluded": "on"})
    html = counted.content.decode()
    assert "are counted here (include_excluded): rater2" in html
    assert "include_excluded=true" in html
    assert client.get(DASHBOARD, {"study": "999999"}).status_code == 200  # ignored


def test_annotators_never_see_the_dashboard_of_their_study(study_run, client_for, make_annotators):
    users = make_annotators(2)
    study = create_study(study_run, "pairwise", users, max_items=1)
    assert client_for(users[0]).get(DASHBOARD, {"study": study.pk}).status_code == 404


# --- The generic panel ------------------------------------------------------------------------


def _texts(cell):
    return [(p.text, p.css, p.strong) for p in cell]


def test_panel_rows_draw_each_cell_as_the_display_declares():
    from stats.dashboard import panel_rows
    from stats.tables import Aside, Cell, Display

    display = Display(
        overall=("kind", "ALL"),
        row_class="phase",
        derive={"pair": lambda r: f"{r['a']} · {r['b']}"},
        cells=(
            Cell("Name", "kind", "trigger", overall="label"),
            Cell("n (ties)", "n", also="ties"),
            Cell("Rate", "rate", "pct", ci=("low", "high")),
            Cell("Interval", format="pct", ci=("low", "high")),
            Cell("Models", "n_models", fallback="n_other"),
            Cell("Pair", "pair"),
            Cell(
                "Slope",
                "slope",
                "num",
                digits=2,
                aside=Aside("(p {p:pvalue})", when=lambda r: r["p"] < 0.05),
            ),
            Cell(
                "Flag",
                aside=Aside("{rate:pct}%", when=lambda r: r["rate"] < 1, badge=True, title="why"),
            ),
        ),
    )
    base = {"label": "<Model>", "n": 12, "ties": 3, "low": 0.5, "high": 0.75, "a": "x", "b": "y"}
    rows = [
        {
            **base,
            "kind": "ALL",
            "rate": 0.625,
            "n_models": None,
            "n_other": 4,
            "slope": 1.234,
            "p": 0.0001,
        },
        {
            **base,
            "kind": "EMERGENT",
            "rate": 1.0,
            "n_models": 3,
            "n_other": 4,
            "slope": float("nan"),
            "p": 0.5,
        },
    ]
    overall, phase = panel_rows(display, Table("t", "", (), rows))
    assert (overall.css, phase.css) == ("overall", "phase")
    assert _texts(overall.cells[0]) == [("<Model>", "", True)]  # escaped by the template
    assert _texts(phase.cells[0]) == [("Emergent", "badge trigger-emergent", False)]
    assert _texts(overall.cells[1]) == [("12 (3)", "", False)]
    assert _texts(overall.cells[2]) == [("62.5", "", False), ("[50.0, 75.0]", "muted", False)]
    assert _texts(overall.cells[3]) == [("[50.0, 75.0]", "", False)]
    assert [c[0] for c in _texts(overall.cells[4]) + _texts(phase.cells[4])] == ["4", "3"]
    assert _texts(overall.cells[5]) == [("x · y", "", False)]
    assert _texts(overall.cells[6]) == [("1.23", "", False), ("(p 1.00e-04)", "muted", False)]
    assert _texts(phase.cells[6]) == [("—", "", False)]
    assert [(p.text, p.css, p.title) for p in overall.cells[7]] == [("62.5%", "badge warn", "why")]
    assert phase.cells[7] == []


def test_the_page_prints_no_seed_or_resample_count_of_its_own():
    """They come from the request (the seed) and the specs (each table's bootstrap caption)."""
    from django.conf import settings

    for path in (settings.BASE_DIR / "templates" / "stats").glob("*.html"):
        text = path.read_text(encoding="utf-8")
        for literal in ("20260501", "1,000", "10,000", "resamples"):
            assert literal not in text, (path.name, literal)
