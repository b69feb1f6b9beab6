"""The human-study tables read from studies recorded in the Workbench: small studies built
through the annotation app's own services (create → Next → answer as several annotators, with a
side swap, a tie, an excluded rater, an undone answer and gold items), each table's numbers
checked against values worked out by hand (or by the `krippendorff` package and statsmodels)."""

import csv
import io
import json

import krippendorff
import numpy as np
import pytest
from django.core.management import CommandError, call_command
from scipy.stats import binomtest
from statsmodels.stats.inter_rater import fleiss_kappa

from annotation.kinds.dialogue_audit import AUDIT_CHECK_KEYS
from annotation.models import Study, StudyItem
from annotation.services.assignments import answer_undo
from benchmark.models import Condition, ModelEndpoint, TriggerType
from stats import studies, tables
from stats.selectors import MAJORITY_NOTES, StatsInputError, TableRequest
from tests.release import release_file
from tests.stats.conftest import (
    answer_next,
    create_study,
    exclude,
    items_in_order,
    pick_case,
    rater_of,
    set_primary_verdict,
    unit_key,
)

pytestmark = pytest.mark.django_db

STUDY_TABLES = [spec.name for spec in tables.all_specs() if spec.needs == tables.STUDY]


def table(name, study, **fields):
    return tables.build(name, TableRequest(study=study.pk, **fields))


def _by(rows, *keys):
    return {tuple(r[k] for k in keys): r for r in rows}


def _command(*args) -> str:
    out = io.StringIO()
    call_command("export_stats", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


# --- Pairwise preference ----------------------------------------------------------------------


@pytest.fixture
def pairwise(study_run, make_annotators, researcher):
    """Four pairs (RECOVERY, one model), k = 2, three raters; rater3 is excluded. Every item's
    base side order is A|B, so its first rater sees the vanilla reply first and its second the
    rubric-injected one first (the side swap). The judge passed the vanilla reply of P1, P2 and
    failed it on P3, P4. Who answers what, in this order (B = rubric-injected preferred):

        P1: rater1 B (A|B, clicks right)   rater2 B (B|A, left)
        P2: rater3 A (A|B, left)           rater1 B (B|A, left)
        P3: rater2 tie                     rater3 A (B|A, right)
        P4: rater1 B, undoes it, then A (A|B, left)   rater2 A (B|A, right)
    """
    users = make_annotators(3)
    model = ModelEndpoint.objects.get(name="zephyr-secret-large")
    study = create_study(
        study_run,
        "pairwise",
        users,
        endpoints=[model],
        trigger_type=TriggerType.RECOVERY,
    )
    items = items_in_order(study)
    assert len(items) == 4
    StudyItem.objects.filter(study=study).update(payload={"sides": ["A", "B"]})
    for item, verdict in zip(items, ["PASS", "PASS", "FAIL", "FAIL"], strict=True):
        set_primary_verdict(item.unit_id, verdict)
    r1, r2, r3 = (rater_of(study, u) for u in users)
    plan = [
        (r1, "B", 10, 0),
        (r2, "B", 40, 0),
        (r3, "A", 5, 1),
        (r1, "B", 20, 1),
        (r2, "tie", 50, 2),
        (r3, "A", 7, 2),
        (r1, "B", 99, 3),  # undone below
    ]
    for r, case, seconds, position in plan:
        answer = answer_next(r, pick_case(case), seconds=seconds)
        assert answer.assignment.item_id == items[position].pk
    answer_undo(rater=r1)
    assert answer_next(r1, pick_case("A"), seconds=30).assignment.item_id == items[3].pk
    assert answer_next(r2, pick_case("A"), seconds=60).assignment.item_id == items[3].pk
    exclude(r3, researcher)
    return study


def test_preference_from_a_study_matches_the_hand_count(pairwise):
    result = table("preference", pairwise)
    rows = _by(result.rows, "raters", "stratum")
    assert list(rows) == [
        ("all", "ALL"),
        ("all", "PASS"),
        ("all", "FAIL"),
        ("without_excluded", "ALL"),
        ("without_excluded", "PASS"),
        ("without_excluded", "FAIL"),
    ]
    expected = {
        # (items, judgements, ties, decided, injected, chose left)
        ("all", "ALL"): (4, 8, 1, 7, 3, 4),
        ("all", "PASS"): (2, 4, 0, 4, 3, 3),
        ("all", "FAIL"): (2, 4, 1, 3, 0, 1),
        ("without_excluded", "ALL"): (4, 6, 1, 5, 3, 3),
        ("without_excluded", "PASS"): (2, 3, 0, 3, 3, 2),
        ("without_excluded", "FAIL"): (2, 3, 1, 2, 0, 1),
    }
    for key, (n_items, n_judgements, ties, decided, injected, left) in expected.items():
        row = rows[key]
        assert (
            row["n_items"],
            row["n_judgements"],
            row["n_ties"],
            row["n_decided"],
            row["n_injected"],
        ) == (n_items, n_judgements, ties, decided, injected), key
        assert row["injected_rate"] == pytest.approx(injected / decided)
        assert row["p_value"] == pytest.approx(binomtest(injected, decided).pvalue)
        ci = binomtest(injected, decided).proportion_ci(method="wilson")
        assert (row["wilson_low"], row["wilson_high"]) == pytest.approx((ci.low, ci.high))
        assert row["left_share"] == pytest.approx(left / decided)
        assert row["bootstrap_low"] <= row["injected_rate"] <= row["bootstrap_high"]
    # Every item of a stratum agrees: the item bootstrap cannot move the rate.
    assert rows[("without_excluded", "PASS")]["bootstrap_low"] == 1.0
    assert rows[("without_excluded", "FAIL")]["bootstrap_high"] == 0.0
    assert result.params == {"seed": 20260501, "study": pairwise.pk, "include_excluded": False}


def test_preference_per_rater_honours_time_retraction_and_exclusion(pairwise):
    rows = table("preference-raters", pairwise).rows
    got = [
        (
            r["annotator"],
            r["n_judgements"],
            r["n_ties"],
            r["injected_rate"],
            r["left_share"],
            r["median_seconds"],
            r["excluded"],
        )
        for r in rows
    ]
    assert got == [
        ("rater1", 3, 0, pytest.approx(2 / 3), pytest.approx(2 / 3), 20.0, False),
        ("rater2", 3, 1, 0.5, 0.5, 50.0, False),
        ("rater3", 2, 0, 0.0, 0.5, 6.0, True),
    ]


def test_preference_is_the_same_from_the_api_and_the_command(pairwise, client_for, researcher):
    direct = table("preference", pairwise).as_json()
    api = client_for(researcher).get(f"/api/v1/tables/preference/?study={pairwise.pk}")
    assert api.status_code == 200 and api.json()["rows"] == direct["rows"]
    command = json.loads(_command("preference", "--study", str(pairwise.pk), "--format", "json"))
    assert command["rows"] == direct["rows"]
    as_csv = list(
        csv.DictReader(
            io.StringIO(_command("preference-raters", "--study", str(pairwise.pk)), newline="")
        )
    )
    assert [r["annotator"] for r in as_csv] == ["rater1", "rater2", "rater3"]
    assert [r["excluded"] for r in as_csv] == ["false", "false", "true"]


def test_a_pairwise_study_also_has_nominal_agreement(pairwise):
    # Labels A / B / tie, unordered; rater3 left out: P1 B B, P2 B, P3 tie, P4 A A.
    result = table("human-agreement", pairwise)
    overall = result.rows[0]
    assert overall["alpha_ordinal"] is None or np.isnan(overall["alpha_ordinal"])
    reliability = [[2, 2, np.nan, 1], [2, np.nan, 3, 1]]  # raters × items (A 1, B 2, tie 3)
    expected = krippendorff.alpha(reliability_data=reliability, level_of_measurement="nominal")
    assert overall["alpha_nominal"] == pytest.approx(expected)
    assert any("rater3" in note for note in result.notes)


# --- Direct rating: human agreement -----------------------------------------------------------


@pytest.fixture
def direct(study_run, make_annotators, researcher):
    """Three regular items R1-R3 and one gold item G (expected PASS), RECOVERY replies of one
    model, every rater on every item (k = 3); rater3 is excluded. rater2 first rates R3 Pass,
    undoes it and rates it Fail. The judge: R1 PASS, R2 FAIL, R3 PARTIAL, G PASS.

                 rater1   rater2   rater3
        R1       PASS     PASS     FAIL
        R2       PARTIAL  FAIL     FAIL
        R3       FAIL     FAIL     PASS
        G        PASS     PARTIAL  PASS
    """
    users = make_annotators(3)
    model = ModelEndpoint.objects.get(name="zephyr-secret-large")
    common = {
        "endpoints": [model],
        "trigger_type": TriggerType.RECOVERY,
        "condition": Condition.VANILLA,
    }
    first = study_run.units.filter(
        endpoint=model, trigger__type=TriggerType.RECOVERY, condition=Condition.VANILLA
    ).first()
    study = create_study(
        study_run,
        "direct_rating",
        users,
        overlap=3,
        max_items=3,
        gold=f"{unit_key(first)} pass",
        **common,
    )
    items = items_in_order(study)
    regular = [item for item in items if not item.is_gold]
    (gold,) = [item for item in items if item.is_gold]
    names = {regular[0].pk: "R1", regular[1].pk: "R2", regular[2].pk: "R3", gold.pk: "G"}
    plan = {
        "R1": ("PASS", "PASS", "FAIL"),
        "R2": ("PARTIAL", "FAIL", "FAIL"),
        "R3": ("FAIL", "FAIL", "PASS"),
        "G": ("PASS", "PARTIAL", "PASS"),
    }
    judge = {"R1": "PASS", "R2": "FAIL", "R3": "PARTIAL", "G": "PASS"}
    for item in items:
        set_primary_verdict(item.unit_id, judge[names[item.pk]])
    raters = [rater_of(study, u) for u in users]

    def rate(column, *, wrong_on=""):
        def decide(assignment):
            name = names[assignment.item_id]
            label = "PASS" if name == wrong_on else plan[name][column]
            return {"verdict": label, "confidence": 4, "note": "Against the rubric."}

        return decide

    for column, r in enumerate(raters):
        for _ in items:
            answer = answer_next(r, rate(column, wrong_on="R3" if column == 1 else ""))
            if column == 1 and names[answer.assignment.item_id] == "R3":
                answer_undo(rater=r)  # rater2's Pass on R3, undone: answered again
                answer_next(r, rate(column))
    exclude(raters[2], researcher)
    return study


def test_human_agreement_from_a_direct_rating_study_matches_the_hand_count(direct):
    result = table("human-agreement", direct)
    assert [r["group"] for r in result.rows] == ["ALL", "RECOVERY"]
    overall = result.rows[0]
    assert (overall["n_items"], overall["n_ratings"], overall["n_raters"]) == (4, 8, 2)
    # rater1, rater2 (FAIL 0, PARTIAL 1, PASS 2): R1 2 2, R2 1 0, R3 0 0, G 2 1.
    # Nominal alpha: coincidences o22 2, o00 2, o01 = o10 = o12 = o21 = 1; n = 8, n_c = 3 2 3:
    # D_o = 4 / 8, D_e = 2 (3·2 + 3·3 + 2·3) / (8·7) = 0.75, alpha = 1 - 0.5 / 0.75 = 1/3.
    assert overall["alpha_nominal"] == pytest.approx(1 / 3)
    reliability = [[2, 1, 0, 2], [2, 0, 0, 1]]
    assert overall["alpha_ordinal"] == pytest.approx(
        krippendorff.alpha(reliability_data=reliability, level_of_measurement="ordinal")
    )
    # Fleiss: P_i = 1 0 1 0 → 0.5; p = 3/8 2/8 3/8, sum p² = 22/64; (0.5 - 22/64) / (42/64)
    assert overall["fleiss_kappa"] == pytest.approx(5 / 21)
    # Gold G expects PASS: rater1 yes, rater2 no.
    assert (overall["gold_accuracy"], overall["n_gold_compared"]) == (0.5, 2)
    # Majorities: R1 PASS, R3 FAIL; R2 and G tie (left out). Judge: R1 PASS, R3 PARTIAL.
    assert (overall["n_majority"], overall["n_majority_ties"]) == (2, 2)
    # po = 1/2, pe = 1/2 · 1/2 = 1/4 → kappa = (1/2 - 1/4) / (3/4) = 1/3
    assert overall["majority_kappa"] == pytest.approx(1 / 3)
    # quadratic: observed 1 · (1/2)² = 1/4 of 2 pairs, expected (0.5·¼ + 0.5·1 + 0.5·¼) → 2/3
    assert overall["majority_kappa_quadratic"] == pytest.approx(2 / 3)
    cells = {k: v for k, v in overall.items() if k.startswith("majority_") and k[9:10].isupper()}
    assert {k: v for k, v in cells.items() if v} == {
        "majority_PASS_judge_PASS": 1,
        "majority_FAIL_judge_PARTIAL": 1,
    }
    assert result.rows[1]["alpha_nominal"] == overall["alpha_nominal"]
    assert result.notes == [
        "raters the study excludes are left out: rater3 (include_excluded counts them)",
        MAJORITY_NOTES["drop"],
    ]


def test_human_agreement_can_count_the_excluded_rater(direct):
    result = table("human-agreement", direct, include_excluded=True)
    overall = result.rows[0]
    assert (overall["n_ratings"], overall["n_raters"]) == (12, 3)
    reliability = np.array([[2, 1, 0, 2], [2, 0, 0, 1], [0, 0, 2, 2]])
    for level in ("nominal", "ordinal"):
        assert overall[f"alpha_{level}"] == pytest.approx(
            krippendorff.alpha(reliability_data=reliability, level_of_measurement=level)
        )
    counts = np.stack([np.bincount(reliability[:, i], minlength=3) for i in range(4)])
    assert overall["fleiss_kappa"] == pytest.approx(fleiss_kappa(counts))
    assert overall["gold_accuracy"] == pytest.approx(2 / 3)
    # Majorities R1 PASS, R2 FAIL, R3 FAIL, G PASS against PASS, FAIL, PARTIAL, PASS:
    # po = 3/4, pe = (2/4)(2/4) + (2/4)(1/4) = 3/8 → kappa = (3/4 - 3/8) / (5/8) = 0.6
    assert (overall["n_majority"], overall["n_majority_ties"]) == (4, 0)
    assert overall["majority_kappa"] == pytest.approx(0.6)
    assert result.params["include_excluded"] is True


def test_api_and_command_read_the_study_and_its_options(direct, client_for, researcher):
    client = client_for(researcher)
    default = client.get(f"/api/v1/tables/human-agreement/?study={direct.pk}").json()
    counted = client.get(
        f"/api/v1/tables/human-agreement/?study={direct.pk}&include_excluded=true"
    ).json()
    assert default["rows"][0]["n_raters"] == 2 and counted["rows"][0]["n_raters"] == 3
    text = _command("human-agreement", "--study", str(direct.pk), "--include-excluded")
    rows = list(csv.DictReader(io.StringIO(text, newline="")))
    assert rows[0]["n_raters"] == "3" and float(rows[0]["gold_accuracy"]) == pytest.approx(2 / 3)


# --- Failure modes ----------------------------------------------------------------------------


@pytest.fixture
def failure_modes(study_run, make_annotators, researcher):
    """Failed vanilla RECOVERY replies: F1, F2 of zephyr, F3 and gold G (expected generic
    closing) of quartz; k = 3, rater3 excluded.

                 rater1                 rater2                  rater3
        F1       generic_closing        generic_closing         deliverable_repetition
        F2       premature_closure      deliverable_repetition  deliverable_repetition
        F3       ungrounded_suggestion  ungrounded_suggestion   other
        G        generic_closing        other                   generic_closing
    """
    users = make_annotators(3)
    units = {}
    for model in ("zephyr-secret-large", "quartz-hidden-mini"):
        recovery = list(
            study_run.units.filter(
                endpoint__name=model,
                condition=Condition.VANILLA,
                trigger__type=TriggerType.RECOVERY,
            ).order_by("id")
        )
        for n, unit in enumerate(recovery):
            set_primary_verdict(unit.pk, "FAIL" if n < 2 else "PASS")
        units[model] = recovery[:2]
    names = {
        units["zephyr-secret-large"][0].pk: "F1",
        units["zephyr-secret-large"][1].pk: "F2",
        units["quartz-hidden-mini"][0].pk: "F3",
        units["quartz-hidden-mini"][1].pk: "G",
    }
    study = create_study(
        study_run,
        "failure_mode",
        users,
        overlap=3,
        condition=Condition.VANILLA,
        gold=f"{unit_key(units['quartz-hidden-mini'][1])} generic_closing",
    )
    assert study.items.count() == 4
    plan = {
        "F1": ("generic_closing", "generic_closing", "deliverable_repetition"),
        "F2": ("premature_closure", "deliverable_repetition", "deliverable_repetition"),
        "F3": ("ungrounded_suggestion", "ungrounded_suggestion", "other"),
        "G": ("generic_closing", "other", "generic_closing"),
    }
    raters = [rater_of(study, u) for u in users]
    for column, r in enumerate(raters):
        for _ in range(4):

            def decide(assignment, column=column):
                label = plan[names[assignment.item.unit_id]][column]
                return {"label": label, "note": "Not what the user needed."}

            answer_next(r, decide)
    exclude(raters[2], researcher)
    return study


def _shares(row):
    return {k[6:]: v for k, v in row.items() if k.startswith("share_") and v}


def test_failure_modes_from_a_study_resolve_each_reply_by_majority(failure_modes):
    result = table("failure-modes", failure_modes)
    rows = {r["model"]: r for r in result.rows}
    assert list(rows) == ["quartz-hidden-mini", "zephyr-secret-large", "POOLED"]
    # Without rater3: F1 generic closing; F2 ties (premature closure vs repetition), left out;
    # F3 ungrounded suggestion; G is gold, left out.
    assert rows["zephyr-secret-large"]["n_fails"] == 1
    assert _shares(rows["zephyr-secret-large"]) == {"generic_closing": 1.0}
    assert _shares(rows["quartz-hidden-mini"]) == {"ungrounded_suggestion": 1.0}
    assert rows["POOLED"]["n_fails"] == 2
    assert _shares(rows["POOLED"]) == {"generic_closing": 0.5, "ungrounded_suggestion": 0.5}
    assert result.notes == [
        "raters the study excludes are left out: rater3 (include_excluded counts them)",
        "1 reply(ies) left out: their annotators' top labels tie",
        "1 gold item(s) left out (quality checks)",
    ]


def test_failure_modes_counting_the_excluded_rater_break_the_tie(failure_modes):
    rows = {
        r["model"]: r for r in table("failure-modes", failure_modes, include_excluded=True).rows
    }
    assert _shares(rows["zephyr-secret-large"]) == {
        "generic_closing": 0.5,
        "deliverable_repetition": 0.5,
    }
    assert rows["POOLED"]["n_fails"] == 3
    assert rows["POOLED"]["n_generic_closing"] == rows["POOLED"]["n_ungrounded_suggestion"] == 1


def test_failure_mode_agreement_is_nominal_and_has_gold(failure_modes):
    overall = table("human-agreement", failure_modes).rows[0]
    assert overall["alpha_ordinal"] is None or np.isnan(overall["alpha_ordinal"])
    # categories in order: generic_closing 0, deliverable_repetition 1, ungrounded 2,
    # premature_closure 3, other 4; rater1 and rater2 on F1, F2, F3, G (item order irrelevant)
    reliability = [[0, 3, 2, 0], [0, 1, 2, 4]]
    assert overall["alpha_nominal"] == pytest.approx(
        krippendorff.alpha(reliability_data=reliability, level_of_measurement="nominal")
    )
    assert (overall["gold_accuracy"], overall["n_gold_compared"]) == (0.5, 2)
    assert overall["n_majority"] == 0  # no judge labels for failure modes


# --- Audits, kinds, errors --------------------------------------------------------------------


def test_audit_agreement_leaves_the_third_auditor_out(study_run, make_annotators):
    users = make_annotators(3)
    study = create_study(
        None,
        "dialogue_audit",
        users[:2],
        adjudicators=users[2:],
        max_items=1,
        name="Audit",
    )
    one, two, third = (rater_of(study, u) for u in users)
    checks = {f"check_{key}": "yes" for key in AUDIT_CHECK_KEYS}
    answer_next(one, lambda a: {**checks, "decision": "pass"})
    answer_next(two, lambda a: {**checks, "decision": "fail"})
    answer_next(third, lambda a: {**checks, "decision": "fail"})
    result = table("human-agreement", study)
    assert result.rows[0]["n_ratings"] == 2 and result.rows[0]["n_raters"] == 2
    assert result.notes == [
        "1 third auditor decision(s) on split audits left out",
        MAJORITY_NOTES["drop"],
    ]


def test_a_table_asks_for_a_study_of_its_kind(pairwise, direct, client_for, researcher):
    with pytest.raises(StatsInputError, match="is a direct rating study: the preference table"):
        table("preference", direct)
    with pytest.raises(StatsInputError, match="failure-modes table reads failure-mode"):
        table("failure-modes", pairwise)
    with pytest.raises(StatsInputError, match="no study 999999"):
        tables.build("human-agreement", TableRequest(study=999999))
    client = client_for(researcher)
    response = client.get(f"/api/v1/tables/preference/?study={direct.pk}")
    assert response.status_code == 400 and "direct rating study" in response.json()["detail"]
    assert client.get("/api/v1/tables/preference/?study=999999").status_code == 404
    with pytest.raises(CommandError, match="no study 999999"):
        _command("failure-modes", "--study", "999999")


@pytest.mark.parametrize("name", STUDY_TABLES)
def test_a_study_table_without_a_study_says_how_to_choose_one(db, client_for, researcher, name):
    response = client_for(researcher).get(f"/api/v1/tables/{name}/")
    assert response.status_code == 400
    assert f"the {name} table reads a human study: choose one" in response.json()["detail"]
    as_csv = client_for(researcher).get(f"/api/v1/tables/{name}/?format=csv")
    assert as_csv.status_code == 400 and as_csv.content.startswith(b"detail\r\n")


@pytest.mark.parametrize("name", STUDY_TABLES)
def test_annotators_cannot_read_a_study_table(pairwise, client_for, name):
    annotator = pairwise.raters.first().user  # even one of the study's own raters
    response = client_for(annotator).get(f"/api/v1/tables/{name}/?study={pairwise.pk}")
    assert response.status_code == 404


# --- The release, imported as studies ---------------------------------------------------------


def test_release_studies_imported_here_give_the_release_files_figures(tmp_path):
    """Study 1 and Study 2 imported with import_study (annotation app) give, through --study,
    exactly the tables --release-dir computes from the files themselves."""
    folder = tmp_path / "human_eval"
    (folder / "results").mkdir(parents=True)
    (folder / "pairwise" / "results").mkdir(parents=True)
    files = {
        "direct": ("study1_sample_items.sample.json", "study1_ratings.sample.jsonl"),
        "pairwise": ("pairwise_sample_items.sample.json", "pairwise_ratings.sample.jsonl"),
    }
    layout = {
        "direct": (folder / "sample_items.json", folder / "results" / "A01.jsonl"),
        "pairwise": (
            folder / "pairwise" / "sample_items.json",
            folder / "pairwise" / "results" / "P01.jsonl",
        ),
    }
    imported = {}
    for kind, (items_name, ratings_name) in files.items():
        items, ratings = release_file(items_name), release_file(ratings_name)
        layout[kind][0].symlink_to(items)
        layout[kind][1].symlink_to(ratings)
        out = io.StringIO()
        call_command(
            "import_study", "--kind", kind, "--items", str(items), str(ratings), stdout=out
        )
        imported[kind] = int(out.getvalue().strip().splitlines()[-1])
    for name, kind in (
        ("human-agreement", "direct"),
        ("preference", "pairwise"),
        ("preference-raters", "pairwise"),
    ):
        from_files = tables.build(name, TableRequest(release_dir=tmp_path))
        from_study = tables.build(name, TableRequest(study=imported[kind]))
        assert from_study.as_json()["rows"] == from_files.as_json()["rows"], name
        assert from_study.rows


def test_a_study_is_read_in_four_queries_whatever_its_size(
    pairwise, direct, django_assert_num_queries
):
    for study in (pairwise, direct):
        study = Study.objects.select_related("run__primary_judge").get(pk=study.pk)
        with django_assert_num_queries(4):  # raters, answers, the judge's verdicts, items
            data = studies.study_data(study)
        assert len(data.answers) == (8 if study.kind == "pairwise" else 12)
