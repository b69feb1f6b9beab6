"""Judge–human alignment (every judge of a run against people's verdicts), the majority tie
rule option shared with the human-agreement table, and the hand-checked examples behind both."""

import csv
import io
import json

import numpy as np
import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from benchmark.models import Condition, JudgeDisagreement, Judgment, JudgmentState, Verdict
from stats import tables
from stats.compute import agreement
from stats.compute.alignment import alignment_row, alignment_table
from stats.compute.resampling import rng_for
from stats.selectors import IMPORTED_JUDGE, MAJORITY_NOTES, TableRequest
from tests.annotation.conftest import JUDGES
from tests.release import release_file
from tests.stats.conftest import create_study
from tests.stats.test_study_tables import direct  # noqa: F401  (a fixture, shared)

NAME = "judge-human-alignment"
SECOND_JUDGE = JUDGES[1][0]
FAIL, PARTIAL, PASS = 0, 1, 2


# --- The tie rule -----------------------------------------------------------------------------


def test_release_tie_rule_prefers_partial_then_pass_then_fail():
    counts = np.array(
        [
            [1, 1, 1],  # all differ: Partial
            [1, 0, 1],  # Fail / Pass: Pass
            [0, 1, 1],  # Partial / Pass: Partial
            [1, 1, 0],  # Fail / Partial: Partial
            [2, 0, 1],  # a majority: Fail, whatever the priority
            [0, 0, 0],  # no label
        ]
    )
    assert agreement.majority_labels(counts, "release").tolist() == [1, 2, 1, 1, 0, -1]
    assert agreement.majority_labels(counts, "exclude").tolist() == [-1, -1, -1, -1, 0, -1]
    with pytest.raises(ValueError, match="three verdicts"):
        agreement.majority_labels(np.array([[1, 1]]), "release")


def test_the_release_kappas_are_those_of_its_published_confusion_matrices():
    """analysis_summary.txt of the release (majority with its tie rule, rows people, columns
    judge): the kappas it prints, 0.545 / 0.269 / 0.552, are Cohen's of these matrices."""
    published = {
        "EMERGENT": ([[3, 1, 0], [1, 4, 0], [2, 2, 7]], 0.545),
        "CRITICAL": ([[4, 1, 0], [0, 0, 1], [2, 5, 6]], 0.269),
        "RECOVERY": ([[6, 2, 0], [0, 4, 3], [0, 1, 4]], 0.552),
    }
    for matrix, kappa in published.values():
        assert round(float(agreement.kappa_from_confusion(np.array(matrix))), 3) == kappa


# --- The computation --------------------------------------------------------------------------


def test_alignment_row_by_hand():
    # people:  PASS PASS FAIL PARTIAL FAIL  (-1: no label, left out)
    # judge:   PASS FAIL FAIL PARTIAL PASS  PASS
    human = np.array([PASS, PASS, FAIL, PARTIAL, FAIL, -1])
    judge = np.array([PASS, FAIL, FAIL, PARTIAL, PASS, PASS])
    row = alignment_row(human, judge, 3, rng=rng_for(1, "t"), resamples=2000)
    assert row.n == 5
    assert row.accuracy == pytest.approx(3 / 5)
    # rows people (FAIL 2, PARTIAL 1, PASS 2), columns judge (FAIL 2, PARTIAL 1, PASS 2):
    # p_e = (2·2 + 1·1 + 2·2) / 25 = 9/25, kappa = (3/5 − 9/25) / (1 − 9/25) = 6/16
    assert row.kappa == pytest.approx(0.375)
    assert row.confusion.tolist() == [[1, 0, 1], [0, 1, 0], [1, 0, 1]]
    assert row.accuracy_ci[0] <= row.accuracy <= row.accuracy_ci[1]
    assert row.kappa_ci[0] <= row.kappa <= row.kappa_ci[1]
    assert row.accuracy_ci[0] > 0 and row.accuracy_ci[1] <= 1
    again = alignment_row(human, judge, 3, rng=rng_for(1, "t"), resamples=2000)
    assert again.kappa_ci == row.kappa_ci and again.accuracy_ci == row.accuracy_ci


def test_alignment_row_resamples_like_the_textbook_index_loop():
    """The accuracy CI from resampled confusion sums equals resampling the items themselves."""
    rng = np.random.default_rng(7)
    human = rng.integers(0, 3, 40)
    judge = np.where(rng.random(40) < 0.6, human, rng.integers(0, 3, 40))
    row = alignment_row(human, judge, 3, rng=rng_for(3, "loop"), resamples=4000)
    loop = np.random.default_rng(11)
    shares = [np.mean((human == judge)[loop.integers(0, 40, 40)]) for _ in range(4000)]
    low, high = np.percentile(shares, [2.5, 97.5])
    assert row.accuracy_ci == pytest.approx((low, high), abs=0.03)


def test_alignment_table_judges_and_groups():
    human = np.array([PASS, FAIL, PASS, PARTIAL])
    groups = np.array(["EMERGENT", "EMERGENT", "RECOVERY", "RECOVERY"], dtype=object)
    judges = {"a": np.array([PASS, FAIL, FAIL, PARTIAL]), "b": np.array([PASS, -1, PASS, PASS])}
    rows = alignment_table(human, judges, groups, 3, reference="r", resamples=200)
    assert [(r.judge, r.group, r.n) for r in rows] == [
        ("a", "ALL", 4),
        ("a", "EMERGENT", 2),
        ("a", "RECOVERY", 2),
        ("b", "ALL", 3),
        ("b", "EMERGENT", 1),
        ("b", "RECOVERY", 2),
    ]
    assert rows[0].accuracy == 0.75 and rows[3].accuracy == pytest.approx(2 / 3)


# --- The table on a study recorded here -------------------------------------------------------


def _alignment(study, **fields):
    return tables.build(NAME, TableRequest(run=study.run, study=study.pk, **fields))


def _rows(result, reference):
    return {(r["group"], r["judge"]): r for r in result.rows if r["reference"] == reference}


def _imported_judge_on(study, verdicts: dict[int, str]) -> None:
    """Judgments as import_results stores them: a judge name, no endpoint."""
    for unit_id, verdict in verdicts.items():
        Judgment.objects.create(
            unit_id=unit_id,
            judge=None,
            judge_name="imported-judge",
            state=JudgmentState.DONE,
            verdict=verdict,
        )


def test_every_judge_against_the_study_majority_with_either_tie_rule(direct):  # noqa: F811
    """The ``direct`` fixture without its excluded rater3: R1 PASS PASS, R2 PARTIAL FAIL (tie),
    R3 FAIL FAIL, G PASS PARTIAL (tie); the primary judge R1 PASS, R2 FAIL, R3 PARTIAL, G PASS."""
    units = dict(direct.items.values_list("pk", "unit_id"))
    ordered = [units[i.pk] for i in direct.items.order_by("position") if not i.is_gold]
    (gold_unit,) = [i.unit_id for i in direct.items.all() if i.is_gold]
    second = dict(zip([*ordered, gold_unit], ["PASS", "PARTIAL", "FAIL", "PARTIAL"], strict=True))
    for unit_id, verdict in second.items():
        Judgment.objects.filter(unit_id=unit_id, judge_name=SECOND_JUDGE).update(verdict=verdict)
    _imported_judge_on(direct, {ordered[0]: "PASS"})
    reference = f"study {direct.pk} (majority)"

    dropped = _alignment(direct)
    rows = _rows(dropped, reference)
    judges = sorted({judge for _, judge in rows})
    assert judges == sorted([JUDGES[0][0], SECOND_JUDGE, "imported-judge"])
    primary = rows[("ALL", JUDGES[0][0])]
    # R1 PASS/PASS, R3 FAIL/PARTIAL: accuracy 1/2; p_e = 1/4, kappa = (1/2 − 1/4) / (3/4)
    assert primary["n"] == 2 and primary["accuracy"] == 0.5
    assert primary["kappa"] == pytest.approx(1 / 3)
    assert primary["human_PASS_judge_PASS"] == 1 and primary["human_FAIL_judge_PARTIAL"] == 1
    assert rows[("ALL", SECOND_JUDGE)]["accuracy"] == 1.0  # R1 PASS, R3 FAIL
    assert rows[("ALL", "imported-judge")]["n"] == 1
    assert [r["group"] for r in dropped.rows if r["reference"] == reference] == ["ALL"] * 3 + [
        "RECOVERY"
    ] * 3  # judges side by side within a trigger type
    assert MAJORITY_NOTES["drop"] in dropped.notes

    released = _alignment(direct, majority="release")
    primary = _rows(released, reference)[("ALL", JUDGES[0][0])]
    # + R2 PARTIAL (judge FAIL), G PARTIAL (judge PASS): 1 of 4 right;
    # rows (1, 2, 1), columns (1, 1, 2): p_e = 5/16, kappa = (1/4 − 5/16) / (11/16) = −1/11
    assert primary["n"] == 4 and primary["accuracy"] == 0.25
    assert primary["kappa"] == pytest.approx(-1 / 11)
    assert primary["human_PARTIAL_judge_FAIL"] == 1 and primary["human_PARTIAL_judge_PASS"] == 1
    second_row = _rows(released, reference)[("ALL", SECOND_JUDGE)]
    assert second_row["n"] == 4 and second_row["accuracy"] == 1.0
    assert MAJORITY_NOTES["release"] in released.notes
    assert released.params["majority"] == "release"


def test_adjudicated_verdicts_are_a_reference_of_their_own(direct):  # noqa: F811
    run = direct.run
    units = list(
        run.units.filter(condition=Condition.VANILLA).order_by("id").values_list("id", flat=True)
    )[:3]
    primary = dict(
        Judgment.objects.filter(unit_id__in=units, judge_name=JUDGES[0][0]).values_list(
            "unit_id", "verdict"
        )
    )
    # People side with the primary judge on two of the three, not on the third.
    finals = [primary[units[0]], primary[units[1]]]
    finals.append(next(v for v in Verdict.values if v != primary[units[2]]))
    for unit_id, final in zip(units, finals, strict=True):
        JudgeDisagreement.objects.update_or_create(
            unit_id=unit_id, defaults={"verdicts": {}, "final_verdict": final}
        )
    JudgeDisagreement.objects.exclude(unit_id__in=units).update(final_verdict="")  # undecided
    result = tables.build(NAME, TableRequest(run=run))
    rows = _rows(result, "adjudicated")
    overall = rows[("ALL", JUDGES[0][0])]
    assert overall["n"] == 3 and overall["accuracy"] == pytest.approx(2 / 3)
    assert any(note.startswith("adjudicated: only the replies") for note in result.notes)
    # The run's direct-rating study is the other reference, found without asking for it.
    assert any(r["reference"] == f"study {direct.pk} (majority)" for r in result.rows)


def test_a_study_of_another_kind_is_not_a_reference(study_run, make_annotators):
    pairwise = create_study(study_run, "pairwise", make_annotators(2), max_items=2)
    result = tables.build(NAME, TableRequest(run=study_run, study=pairwise.pk))
    assert result.rows == []
    assert result.notes[0].startswith(f"study {pairwise.pk} is not a direct-rating study")
    assert result.notes[1].startswith("no human reference for this run yet")


# --- The human-agreement table's option -------------------------------------------------------


def test_human_agreement_breaks_ties_as_the_release_does_when_asked(direct):  # noqa: F811
    dropped = tables.build("human-agreement", TableRequest(study=direct.pk)).rows[0]
    released = tables.build(
        "human-agreement", TableRequest(study=direct.pk, majority="release")
    ).rows[0]
    assert (dropped["n_majority"], dropped["n_majority_ties"]) == (2, 2)
    assert (released["n_majority"], released["n_majority_ties"]) == (4, 2)
    assert released["majority_kappa"] == pytest.approx(-1 / 11)
    assert released["majority_PARTIAL_judge_FAIL"] == 1


def test_release_tie_rule_refuses_labels_that_are_not_verdicts(study_run, make_annotators):
    pairwise = create_study(study_run, "pairwise", make_annotators(2), max_items=2)
    with pytest.raises(CommandError, match="majority=release breaks ties between verdicts"):
        call_command(
            "export_stats",
            "human-agreement",
            "--study",
            str(pairwise.pk),
            "--majority",
            "release",
            stdout=io.StringIO(),
            stderr=io.StringIO(),
        )


# --- Everywhere the table is served -----------------------------------------------------------


def test_api_command_and_dashboard_carry_the_option(direct, client_for, researcher):  # noqa: F811
    client = client_for(researcher)
    url = reverse("stats_api:table", args=[NAME])
    query = {"run": direct.run.pk, "study": direct.pk, "majority": "release"}
    body = client.get(url, query).json()
    assert body["params"]["majority"] == "release"
    assert MAJORITY_NOTES["release"] in body["notes"]
    primary = next(r for r in body["rows"] if r["judge"] == JUDGES[0][0] and r["group"] == "ALL")
    assert primary["n"] == 4
    text = client.get(url, {**query, "format": "csv"}).content.decode()
    by_csv = next(
        r
        for r in csv.DictReader(io.StringIO(text, newline=""))
        if r["judge"] == JUDGES[0][0] and r["group"] == "ALL"
    )
    assert by_csv["n"] == "4" and by_csv["human_PARTIAL_judge_PASS"] == "1"
    assert client.get(url, {**query, "majority": "coin"}).status_code == 400

    out = io.StringIO()
    call_command(
        "export_stats",
        NAME,
        "--run",
        str(direct.run.pk),
        "--study",
        str(direct.pk),
        "--majority",
        "release",
        "--format",
        "json",
        stdout=out,
        stderr=io.StringIO(),
    )
    assert json.loads(out.getvalue())["rows"] == body["rows"]

    html = client.get(reverse("stats:dashboard"), query).content.decode()
    assert f'id="{NAME}"' in html and "Judge–human alignment" in html
    assert "majority=release" in html  # the panels' CSV / JSON links keep the option
    assert JUDGES[0][0] in html and SECOND_JUDGE in html


def test_release_study1_files_give_the_release_judge(tmp_path, db):
    folder = tmp_path / "human_eval" / "results"
    folder.mkdir(parents=True)
    (folder.parent / "sample_items.json").symlink_to(
        release_file("study1_sample_items.sample.json")
    )
    (folder / "A01.jsonl").symlink_to(release_file("study1_ratings.sample.jsonl"))
    result = tables.build(NAME, TableRequest(release_dir=tmp_path, majority="release"))
    overall = _rows(result, "release Study 1 (majority)")[("ALL", IMPORTED_JUDGE)]
    human = tables.build("human-agreement", TableRequest(release_dir=tmp_path, majority="release"))
    # The same majority labels and judge verdicts as the human-agreement table's.
    assert overall["n"] == human.rows[0]["n_majority"]
    assert overall["kappa"] == pytest.approx(human.rows[0]["majority_kappa"], nan_ok=True)
