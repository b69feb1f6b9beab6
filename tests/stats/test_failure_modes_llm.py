"""The LLM failure-mode tables: the classifier's distribution (Table 2 for every run) and the
classifier against a failure-mode study's majority labels — hand-checked numbers, the demo
run's recordings, and every surface (API JSON and CSV, export_stats, the dashboard)."""

import csv
import io
import json
import math
import re

import pytest
from django.core.management import call_command
from django.urls import reverse

from benchmark.evaluation.demo_run import DEMO_CLASSIFIER, FAILURE_MODES_FILE
from benchmark.models import (
    ClassificationState,
    FailureModeClassification,
    Judgment,
    TriggerType,
)
from benchmark.vocabulary import FAILURE_MODES
from stats import tables
from stats.compute.failure_modes import ALL, POOLED, classifier_vs_people, wilson_interval
from stats.compute.resampling import rng_for
from stats.selectors import TableRequest
from tests.stats.conftest import answer_next, rater_of
from tests.stats.test_study_tables import failure_modes  # noqa: F401  (a fixture, shared)

LLM, VS = "failure-modes-llm", "failure-modes-llm-vs-human"
CODE = {m: i for i, m in enumerate(FAILURE_MODES)}


def test_wilson_interval_by_hand():
    # p = 1/2, n = 2, z = 1.959964: centre (p + z²/2n) / (1 + z²/n) = 1/2,
    # half-width z √(p(1−p)/n + z²/4n²) / (1 + z²/n) = 0.405469
    low, high = wilson_interval(1, 2)
    assert (low, high) == pytest.approx((0.5 - 0.405469, 0.5 + 0.405469), abs=1e-5)
    assert all(math.isnan(x) for x in wilson_interval(0, 0))


def test_classifier_vs_people_by_hand():
    people = [CODE["generic_closing"], CODE["ungrounded_suggestion"]]
    classifier = [CODE["generic_closing"], CODE["other"]]
    rows = {
        r.category: r
        for r in classifier_vs_people(
            classifier, people, FAILURE_MODES, rng_for_row=lambda c: rng_for(1, c), resamples=500
        )
    }
    overall = rows[ALL]
    assert overall.n == 2 and overall.accuracy == 0.5
    # p_o = 1/2; p_e = (1·1)/4 from the generic-closing margins only: κ = (½ − ¼)/(1 − ¼) = ⅓
    assert overall.kappa == pytest.approx(1 / 3)
    assert overall.counts == {**dict.fromkeys(FAILURE_MODES, 0), "generic_closing": 1, "other": 1}
    assert rows["generic_closing"].kappa == pytest.approx(1.0)
    # ungrounded vs rest: people [0, 1], classifier [0, 0]: p_o = ½ = p_e, κ = 0
    assert rows["ungrounded_suggestion"].kappa == pytest.approx(0.0)
    assert rows["ungrounded_suggestion"].counts["other"] == 1
    assert rows["ungrounded_suggestion"].accuracy == 0.0
    assert math.isnan(rows["deliverable_repetition"].kappa)  # nobody used it: undefined
    assert rows["deliverable_repetition"].n == 0
    low, high = overall.accuracy_ci
    assert 0.0 <= low <= 0.5 <= high <= 1.0


def _classify(unit, mode: str, name: str = "clf-test") -> None:
    FailureModeClassification.objects.create(
        unit=unit,
        classifier_name=name,
        state=ClassificationState.DONE if mode else ClassificationState.CLASSIFIER_ERROR,
        failure_mode=mode,
    )


@pytest.fixture
def classified(failure_modes):  # noqa: F811
    """The study fixture's replies (F1, F2 of zephyr; F3 and gold G of quartz) classified:
    F1 generic (people agree), F2 premature (people tie: dropped), F3 other (people:
    ungrounded), G generic (gold: left out); one more quartz reply a classifier error, and a
    second classifier's label that no figure reads."""
    study = failure_modes
    items = {i.unit.pk: i.unit for i in study.items.select_related("unit__endpoint")}
    by_model: dict[str, list] = {}
    for unit in sorted(items.values(), key=lambda u: u.pk):
        by_model.setdefault(unit.endpoint.name, []).append(unit)
    f1, f2 = by_model["zephyr-secret-large"]
    f3, g = by_model["quartz-hidden-mini"]
    for unit, mode in ((f1, "generic_closing"), (f2, "premature_closure"), (f3, "other")):
        _classify(unit, mode)
    _classify(g, "generic_closing")
    spare = (
        study.run.units.filter(
            endpoint__name="quartz-hidden-mini",
            condition="vanilla",
            trigger__type=TriggerType.RECOVERY,
        )
        .exclude(pk__in=[f3.pk, g.pk])
        .first()
    )
    _classify(spare, "")
    _classify(f1, "other", name="zz-second")
    return study


def test_distribution_per_model_and_pooled(classified):
    t = tables.build(LLM, TableRequest(run=classified.run))
    rows = {r["model"]: r for r in t.rows}
    assert [r["model"] for r in t.rows] == ["quartz-hidden-mini", "zephyr-secret-large", POOLED]
    z = rows["zephyr-secret-large"]
    assert (z["n_classified"], z["n_classifier_errors"]) == (2, 0)
    assert z["share_generic_closing"] == z["share_premature_closure"] == 0.5
    assert (z["share_generic_closing_ci_low"], z["share_generic_closing_ci_high"]) == (
        pytest.approx(wilson_interval(1, 2))
    )
    q = rows["quartz-hidden-mini"]
    assert (q["n_classified"], q["n_classifier_errors"], q["n_other"]) == (2, 1, 1)
    p = rows[POOLED]
    assert (p["n_classified"], p["n_classifier_errors"]) == (4, 1)
    assert p["share_generic_closing"] == 0.5 and p["share_other"] == 0.25
    assert {r["classifier"] for r in t.rows} == {"clf-test"}  # the first name; zz-second not
    assert any("other classifiers left out: zz-second" in n for n in t.notes)


def test_against_the_studys_majority_ties_and_gold_dropped(classified):
    t = tables.build(VS, TableRequest(run=classified.run))
    rows = {r["category"]: r for r in t.rows}
    overall = rows[ALL]
    assert overall["reference"] == f"study {classified.pk} (majority)"
    assert (overall["n"], overall["accuracy"]) == (2, 0.5)  # F1 agrees, F3 does not
    assert overall["kappa"] == pytest.approx(1 / 3)
    assert rows["generic_closing"]["classifier_generic_closing"] == 1
    assert rows["ungrounded_suggestion"]["classifier_other"] == 1
    assert any("top labels tie" in n for n in t.notes)
    assert any("gold item" in n for n in t.notes)


def test_no_classifier_gives_empty_tables_with_a_note(failure_modes):  # noqa: F811
    for name in (LLM, VS):
        t = tables.build(name, TableRequest(run=failure_modes.run))
        assert t.rows == [] and any("no failure-mode classifications" in n for n in t.notes)


# --- The demo run -----------------------------------------------------------------------------


def _recorded():
    return [json.loads(line) for line in FAILURE_MODES_FILE.read_text().splitlines()]


def test_demo_recordings_cover_every_failed_recovery_reply_with_verbatim_quotes(demo_run):
    recorded = _recorded()
    failed = Judgment.objects.filter(
        unit__run=demo_run,
        judge_name="demo-judge-primary",
        verdict="FAIL",
        unit__trigger__type=TriggerType.RECOVERY,
    )
    assert len(recorded) == failed.count() > 0
    rows = FailureModeClassification.objects.filter(unit__run=demo_run).select_related("unit")
    assert {r.unit_id for r in rows} == set(failed.values_list("unit_id", flat=True))
    assert demo_run.failure_mode_classifier.name == DEMO_CLASSIFIER
    for row in rows:
        assert row.classifier_name == DEMO_CLASSIFIER and row.failure_mode in FAILURE_MODES
        assert row.quote in row.unit.reply
        assert row.quote_status == ("exact" if row.quote else "none")


def _answer_demo_failure_mode_study(demo_run, users, label) -> int:
    from annotation.models import Study

    study = Study.objects.get(run=demo_run, kind="failure_mode", status="open")
    for user in users:
        rater = rater_of(study, user)
        for _ in range(study.items.count()):
            answer_next(rater, lambda a: {"label": label(a), "note": ""})
    return study.pk


@pytest.fixture
def demo_with_people(db):
    """load_demo with its logins and studies; both annotators label the demo failure-mode
    study as the classifier did, except where the classifier said generic closing (they say
    premature closure)."""
    call_command("load_demo", stdout=io.StringIO())
    from django.contrib.auth import get_user_model

    from benchmark.models import EvaluationRun

    run = EvaluationRun.objects.get(failure_mode_classifier__name=DEMO_CLASSIFIER)
    by_unit = dict(
        FailureModeClassification.objects.filter(unit__run=run).values_list(
            "unit_id", "failure_mode"
        )
    )

    def label(assignment):
        mode = by_unit[assignment.item.unit_id]
        return "premature_closure" if mode == "generic_closing" else mode

    users = get_user_model().objects.filter(username__in=["annotator1", "annotator2"])
    open_study = _answer_demo_failure_mode_study(run, users, label)
    return run, by_unit, open_study


def test_both_tables_have_data_on_the_demo(demo_with_people):
    run, by_unit, open_study = demo_with_people
    llm = tables.build(LLM, TableRequest(run=run))
    pooled = next(r for r in llm.rows if r["model"] == POOLED)
    vanilla = FailureModeClassification.objects.filter(unit__run=run, unit__condition="vanilla")
    assert pooled["n_classified"] == vanilla.count() > 0
    vs = tables.build(VS, TableRequest(run=run))
    ours = [r for r in vs.rows if r["reference"] == f"study {open_study} (majority)"]
    overall = next(r for r in ours if r["category"] == ALL)
    generic = vanilla.filter(failure_mode="generic_closing").count()
    assert overall["n"] == vanilla.count()
    assert overall["accuracy"] == pytest.approx(1 - generic / vanilla.count())
    premature = next(r for r in ours if r["category"] == "premature_closure")
    assert premature["classifier_generic_closing"] == generic


def test_tables_through_the_api_export_and_dashboard(demo_with_people, client_for, researcher):
    run, _, _ = demo_with_people
    client = client_for(researcher)
    for name in (LLM, VS):
        url = reverse("stats_api:table", args=[name])
        body = client.get(url, {"run": run.pk}).json()
        assert body["table"] == name and body["rows"]
        response = client.get(url, {"run": run.pk, "format": "csv"})
        header, *rows = csv.reader(io.StringIO(response.content.decode(), newline=""))
        assert header == body["columns"] and len(rows) == len(body["rows"])
        out = io.StringIO()
        call_command("export_stats", name, "--format", "json", stdout=out, stderr=io.StringIO())
        assert json.loads(out.getvalue())["rows"] == body["rows"]
    html = client.get(reverse("stats:dashboard")).content.decode()
    order = [m.group(1) for m in re.finditer(r'<section class="card" id="([^"]+)"', html)]
    assert order.index(LLM) + 1 == order.index(VS)
    panel = re.search(rf'<section class="card" id="{VS}">.*?</section>', html, re.S).group(0)
    assert "Premature closure" in panel and "bootstrap: 10,000 resamples of replies" in panel
    schema = client.get(reverse("stats_api:schema") + "?format=json").json()
    for name in (LLM, VS):
        assert f"/api/v1/tables/{name}/" in schema["paths"]


def test_the_recordings_are_what_the_committed_script_writes():
    from benchmark.demo_data import make_failure_modes

    assert make_failure_modes.records() == _recorded()


def test_a_recording_of_a_reply_the_run_lacks_names_its_line_and_loads_nothing(
    db, tmp_path, monkeypatch
):
    from benchmark.evaluation import demo_run as module
    from benchmark.models import EvaluationRun

    bad = {**_recorded()[0], "turn": 99}
    path = tmp_path / "failure_modes.jsonl"
    path.write_text(json.dumps(_recorded()[1]) + "\n" + json.dumps(bad) + "\n")
    monkeypatch.setattr(module, "FAILURE_MODES_FILE", path)
    with pytest.raises(ValueError, match=r"failure_modes.jsonl line 2: no RECOVERY reply"):
        call_command("load_demo", "--no-users", stdout=io.StringIO())
    assert not EvaluationRun.objects.exists()
    assert not FailureModeClassification.objects.exists()
