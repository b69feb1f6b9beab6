"""Proposal review's statistics (docs/statistics.md, "Proposal review"): the majority rule with
its ties, acceptance, decisions against the labels (the seed's definitions: its published F1
and false alarm follow from them), Fleiss' kappa — on small hand-computed fixtures — and the
tables read from a real study through the services, the API, the command and the dashboard."""

import io
import json
import math

import numpy as np
import pytest
from django.core.management import call_command
from django.urls import reverse

from annotation.models import Study
from annotation.services.studies import rater_exclusion_set
from stats import studies, tables
from stats.compute.proposals import (
    POOLED,
    acceptance_table,
    decision_table,
    majority_codes,
    proposal_agreement,
)
from stats.interfaces import ProposalRecord, ProposalVotes, SilentRecord
from stats.selectors import StatsInputError, TableRequest
from tests.proposal_review import answer_all, context, import_contexts
from tests.stats.conftest import create_study, rater_of

M, N, S = "model-m", "model-n", "model-s"


def votes_of(proposals, silent=()) -> ProposalVotes:
    """(context, id, source, accepts, rejects) and (context, source)."""
    return ProposalVotes.from_records(
        [ProposalRecord(c, p, s, a, r) for c, p, s, a, r in proposals],
        [SilentRecord(c, s) for c, s in silent],
    )


# c1: M's m1 accepted, N's n1 rejected, S silent (needs help: FN).
# c2: M's m2 rejected, N's n2 tied, S silent (undetermined: no proposal accepted, one tied).
# c3: M proposes two (one accepted: TP by the multi-candidate rule), N silent (FN).
# c4: N's n4 rejected, M and S silent (no help needed: TN).
# c5: M's m5 undecided (no decision yet).
FIXTURE = votes_of(
    [
        ("c1", "m1", M, 3, 0),
        ("c1", "n1", N, 1, 2),
        ("c2", "m2", M, 0, 3),
        ("c2", "n2", N, 1, 1),
        ("c3", "m3a", M, 2, 1),
        ("c3", "m3b", M, 0, 3),
        ("c4", "n4", N, 0, 3),
        ("c5", "m5", M, 0, 0),
    ],
    [("c1", S), ("c2", S), ("c3", N), ("c4", M), ("c4", S)],
)


def test_the_majority_label_and_its_ties():
    # (rejects, accepts): k = 3 never ties; k = 2 or 4 split evenly is a tie; nothing decided.
    counts = np.array([[0, 3], [1, 2], [2, 1], [3, 0], [1, 1], [2, 2], [1, 3], [0, 0], [0, 1]])
    assert majority_codes(counts).tolist() == [1, 1, 0, 0, -1, -1, 1, -1, 1]


def test_acceptance_per_model_and_pooled_by_hand():
    rows = {r.model: r for r in acceptance_table(FIXTURE, resamples=2000)}
    assert list(rows) == [M, N, POOLED]
    m, n, pooled = rows[M], rows[N], rows[POOLED]
    assert (m.n_proposals, m.accepted.n, m.accepted.k, m.n_tied, m.n_undecided) == (5, 4, 2, 0, 1)
    assert m.accepted.value == 0.5
    assert (n.n_proposals, n.accepted.n, n.accepted.k, n.n_tied, n.n_undecided) == (3, 2, 0, 1, 0)
    assert n.accepted.value == 0 and n.accepted.ci == (0.0, 0.0)  # every resample: 0 of n
    assert (pooled.n_proposals, pooled.accepted.n, pooled.accepted.k) == (8, 6, 2)
    assert pooled.accepted.value == pytest.approx(1 / 3)
    low, high = m.accepted.ci
    assert 0 <= low < 0.5 < high <= 1


def test_decisions_against_the_labels_by_hand():
    rows = {r.model: r for r in decision_table(FIXTURE, resamples=2000)}
    assert list(rows) == [M, N, S, POOLED]
    m, n, s, pooled = rows[M], rows[N], rows[S], rows[POOLED]
    # M: c1 TP, c2 FP, c3 TP (one of two accepted), c4 TN (silent, no help), c5 undetermined.
    assert (m.n_proposed, m.n_silent, m.confusion, m.n_undetermined) == (4, 1, (2, 1, 1, 0), 1)
    assert m.precision.value == pytest.approx(2 / 3) and m.recall.value == 1
    assert m.f1.value == pytest.approx(0.8)  # 2PR/(P+R) = (4/3)/(5/3)
    assert m.false_alarm.value == pytest.approx(1 / 3) and m.accuracy.value == 0.75
    assert m.recall.ci == (1.0, 1.0)  # no FN in any resample
    # N: c1 FP, c2 undetermined (its proposal tied), c3 FN (silent, help needed), c4 FP.
    assert (n.n_proposed, n.n_silent, n.confusion, n.n_undetermined) == (3, 1, (0, 2, 0, 1), 1)
    assert (n.precision.value, n.recall.value, n.f1.value, n.false_alarm.value) == (0, 0, 0, 1)
    # S never proposed: precision and false alarm are undefined, not 0.
    assert (s.n_proposed, s.n_silent, s.confusion, s.n_undetermined) == (0, 3, (0, 0, 1, 1), 1)
    assert math.isnan(s.precision.value) and math.isnan(s.false_alarm.value)
    assert math.isnan(s.precision.ci[0]) and s.recall.value == 0 and s.accuracy.value == 0.5
    assert pooled.confusion == (2, 3, 2, 2) and pooled.n_undetermined == 3
    assert pooled.precision.value == pytest.approx(2 / 5)
    assert pooled.f1.value == pytest.approx(4 / 9) and pooled.accuracy.value == pytest.approx(4 / 9)
    for row in rows.values():
        for share in (row.precision, row.recall, row.f1, row.false_alarm, row.accuracy):
            if not math.isnan(share.value):
                assert share.ci[0] <= share.value + 1e-12 and share.value - 1e-12 <= share.ci[1]


def test_the_seeds_f1_and_false_alarm_follow_from_its_definitions():
    """Seed 003: the best fine-tuned model reaches F1 66.47 % with a false alarm of 50.22 %.
    With false alarm = FP / (TP + FP) = 1 − precision, those two figures imply recall 100 %:
    4,978 accepted and 5,022 rejected proposals, never silent, give exactly them."""
    proposals = [(f"c{i}", "p", M, 3, 0) for i in range(4978)]
    proposals += [(f"d{i}", "p", M, 0, 3) for i in range(5022)]
    row = decision_table(votes_of(proposals), resamples=200)[0]
    assert round(100 * row.false_alarm.value, 2) == 50.22
    assert round(100 * row.f1.value, 2) == 66.47
    assert round(100 * row.precision.value, 2) == 49.78 and row.recall.value == 1


def test_fleiss_kappa_of_the_decisions_by_hand():
    # Four proposals, three decisions each: P̄ = (1 + 1/3 + 1 + 1/3) / 4 = 2/3, p = ½ each,
    # chance ½: κ = (2/3 − ½) / (1 − ½) = 1/3.
    votes = votes_of(
        [
            ("c1", "a", M, 3, 0),
            ("c1", "b", N, 2, 1),
            ("c2", "a", M, 0, 3),
            ("c2", "b", N, 1, 2),
            ("c3", "a", M, 1, 0),  # one decision: not compared
        ]
    )
    result = proposal_agreement(votes, resamples=2000)
    assert (result.n_contexts, result.n_proposals, result.n_compared) == (3, 5, 4)
    assert result.n_decisions == 13 and result.accept_share == pytest.approx(7 / 13)
    assert result.fleiss_kappa.value == pytest.approx(1 / 3)
    low, high = result.fleiss_kappa.ci
    assert low <= 1 / 3 <= high


def test_a_silent_decision_needs_a_context_with_proposals():
    with pytest.raises(ValueError, match="silent decision at a context without proposals"):
        votes_of([("c1", "a", M, 1, 0)], [("c9", S)])


# --- From a study ---------------------------------------------------------------------------------


@pytest.fixture
def study(db, make_annotators):
    """Three annotators, k = 3, two contexts:

    c1: a (M), b (N), S silent.  r1 accepts a, rejects b; r2 accepts both; r3 "reject all".
        → a accepted 2–1, b rejected 1–2: M TP, N FP, S FN.
    c2: a (M), N silent.          r1 accepts, r2 rejects, r3 accepts.
        → a accepted 2–1: M TP, N FN.  Without r3 (excluded): a tied 1–1.
    """
    users = make_annotators(3)
    created = import_contexts(
        [
            context("c1", [("a", M), ("b", N)], silent=(S,)),
            context("c2", [("a", M)], silent=(N,)),
        ],
        users,
        name="Suggestions",
    )
    plans = [
        {"c1": {"a": "accept", "b": "reject"}, "c2": {"a": "accept"}},
        {"c1": {"a": "accept", "b": "accept"}, "c2": {"a": "reject"}},
        {"c1": None, "c2": {"a": "accept"}},
    ]
    for user, plan in zip(users, plans, strict=True):
        assert answer_all(created, user, lambda key, plan=plan: plan[key]) == 2
    created.users = users
    return created


def _rows(name, study, **fields):
    return {
        r.get("model", "ALL"): r
        for r in tables.build(name, TableRequest(study=study.pk, **fields)).rows
    }


def test_the_tables_read_a_study(study):
    acceptance = _rows("proposal-acceptance", study)
    assert acceptance[M]["n_accepted"] == 2 and acceptance[M]["acceptance_rate"] == 1
    assert acceptance[N]["n_labelled"] == 1 and acceptance[N]["acceptance_rate"] == 0
    assert acceptance[POOLED]["acceptance_rate"] == pytest.approx(2 / 3)
    decisions = _rows("proposal-decisions", study)
    assert [decisions[m][k] for m in (M, N, S) for k in ("tp", "fp", "tn", "fn")] == [
        2,
        0,
        0,
        0,  # fmt: skip
        0,
        1,
        0,
        1,
        0,
        0,
        0,
        1,
    ]
    assert decisions[N]["false_alarm"] == 1 and decisions[N]["recall"] == 0
    assert decisions[POOLED]["f1"] == pytest.approx(4 / 7)  # 2·2 / (2·2 + 1 + 2)
    agreement = tables.build("proposal-agreement", TableRequest(study=study.pk)).rows[0]
    assert (agreement["n_contexts"], agreement["n_proposals"], agreement["n_decisions"]) == (
        2,
        3,
        9,
    )
    assert agreement["n_raters"] == 3 and agreement["n_answers"] == 6
    assert agreement["reject_all_share"] == pytest.approx(1 / 6)
    assert agreement["accept_share"] == pytest.approx(5 / 9)


def test_an_excluded_rater_is_left_out_and_a_tie_then_unlabels_a_proposal(study):
    r3 = rater_of(study, study.users[2])
    rater_exclusion_set(rater=r3, excluded=True, by=study.users[0])
    table = tables.build("proposal-acceptance", TableRequest(study=study.pk))
    rows = {r["model"]: r for r in table.rows}
    # c2's a is now 1–1: tied, no label; c1's a 2–0 and b 1–1 (r3's "reject all" gone): tied.
    assert (rows[M]["n_labelled"], rows[M]["n_tied"], rows[M]["n_accepted"]) == (1, 1, 1)
    assert (rows[N]["n_labelled"], rows[N]["n_tied"]) == (0, 1)
    assert any("left out: rater3" in note for note in table.notes)
    assert any("an even split" in note for note in table.notes)
    decisions = {
        r["model"]: r for r in tables.build("proposal-decisions", TableRequest(study=study.pk)).rows
    }
    # N: at c1 its b is tied, at c2 (silent) the only proposal is tied: both undetermined.
    assert decisions[N]["n_undetermined"] == 2 and decisions[M]["tp"] == 1
    counted = _rows("proposal-acceptance", study, include_excluded=True)
    assert counted[M]["n_accepted"] == 2


def test_the_tables_through_the_api_the_command_and_the_dashboard(study, client_for, researcher):
    client = client_for(researcher)
    for name in ("proposal-acceptance", "proposal-decisions", "proposal-agreement"):
        body = client.get(f"/api/v1/tables/{name}/", {"study": study.pk}).json()
        expected = tables.build(name, TableRequest(study=study.pk)).as_json()
        assert body["rows"] == expected["rows"] and body["notes"] == expected["notes"]
        out = io.StringIO()
        call_command("export_stats", name, "--study", str(study.pk), "--format", "json", stdout=out)
        assert json.loads(out.getvalue())["rows"] == expected["rows"]
    html = client.get(reverse("stats:dashboard"), {"study": study.pk}).content.decode()
    for section in ("proposal-acceptance", "proposal-decisions", "proposal-agreement"):
        assert f'<section class="card" id="{section}"' in html
    schema = client.get("/api/v1/schema/", {"format": "json"}).json()
    assert "/api/v1/tables/proposal-decisions/" in schema["paths"]


def test_a_proposal_table_asks_for_a_proposal_review_study(study, study_run, make_annotators):
    other = create_study(study_run, "pairwise", make_annotators(2))
    with pytest.raises(StatsInputError, match="the proposal-decisions table reads proposal review"):
        tables.build("proposal-decisions", TableRequest(study=other.pk))
    with pytest.raises(StatsInputError, match="the preference table reads pairwise"):
        tables.build("preference", TableRequest(study=study.pk))


def test_a_study_is_read_in_three_queries_whatever_its_size(study, django_assert_num_queries):
    loaded = Study.objects.get(pk=study.pk)
    with django_assert_num_queries(3):  # raters, answers, items
        votes, _ = studies.proposal_votes(loaded)
    assert votes.counts.sum() == 9
