"""LLM pairwise judging end to end, inline (Celery's eager mode): the real OpenAI-compatible
provider against the local fake vendor server, with scripted judges — consistent, position-biased
(every verdict flips with the order), malformed then good, malformed every time. A pairwise step
never asks a model for a reply, nor a judge for a single verdict."""

import io
import json
import re

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError, OutputWrapper

from benchmark.corpus.importer import corpus_import
from benchmark.evaluation import pairwise, runs
from benchmark.evaluation.engine import units_execute
from benchmark.evaluation.judge_output import (
    JudgeOutputError,
    pairwise_winner,
    parse_pairwise_output,
)
from benchmark.management.run_commands import watch_run
from benchmark.models import (
    AuditVia,
    Dialogue,
    EvaluationRun,
    EvaluationUnit,
    ModelEndpoint,
    PairwiseComparison,
    PairwiseJudgment,
    ProviderCall,
    RunAuditEvent,
    RunStatus,
    UnitState,
)
from benchmark.vocabulary import BattleWinner
from proactweb.celery import app as celery_app
from tests.factories import dialogue_record, jsonl_bytes, stream
from tests.fakes.vendor_server import FakeVendorServer

pytestmark = pytest.mark.django_db

GROUNDED = "Load the projector stand last, so that it is the first thing out at the venue."
GENERIC = "Glad it is sorted. Let me know if you need anything else!"
INJECTED_SUFFIX = " (Also: the van needs its permit by Friday.)"
MODELS = ("alpha-model", "beta-model")  # alpha writes the grounded reply, beta the generic one
RESPONSE = re.compile(r"<response_(\d)>\n(.*?)\n</response_\1>", re.DOTALL)


@pytest.fixture(autouse=True)
def eager_celery():
    celery_app.conf.task_always_eager = True
    yield
    celery_app.conf.task_always_eager = False


def choice_json(choice, rationale="The first is grounded in the user's details."):
    return json.dumps({"choice": choice, "rationale": rationale})


def shown(body) -> dict[str, str]:
    """Response 1 and Response 2 of a pairwise prompt, as the judge saw them."""
    return dict(RESPONSE.findall(body["messages"][0]["content"]))


def prefers_grounded(body) -> str:
    """A consistent judge: the grounded reply wins wherever it is shown."""
    responses = shown(body)
    if all(GROUNDED in text for text in responses.values()):
        return choice_json("tie")
    return choice_json("1" if GROUNDED in responses["1"] else "2")


class Vendor:
    """What each fake endpoint answers; tests change the answers per model."""

    def __init__(self):
        self.answers = {
            "alpha-model": lambda body: self._reply(body, GROUNDED),
            "beta-model": lambda body: self._reply(body, GENERIC),
            "judge-a": lambda body: json.dumps(
                {"verdict": "PASS", "rationale": "Fine.", "evidence": body_reply(body)}
            ),
            "pj-fair": prefers_grounded,
            "pj-biased": lambda body: choice_json("1"),  # whatever is shown first
        }

    @staticmethod
    def _reply(body, text):
        injected = body["messages"][0]["role"] == "system"
        return text + (INJECTED_SUFFIX if injected else "")

    def __call__(self, body):
        return self.answers[body["model"]](body)


def body_reply(body) -> str:
    prompt = body["messages"][0]["content"]
    return prompt.split("<reply>\n", 1)[1].split("\n</reply>", 1)[0][:20]


@pytest.fixture
def vendor():
    return Vendor()


@pytest.fixture
def server(vendor):
    with FakeVendorServer(reply=vendor) as fake:
        yield fake


def _endpoint(name, server):
    return ModelEndpoint.objects.get_or_create(
        name=name,
        defaults=dict(
            display_name=name.title(),
            provider="openai-compatible",
            model_name=name,
            base_url=server.openai_base_url,
            default_params={"temperature": 0.0},
        ),
    )[0]


@pytest.fixture
def finished_run(server):
    """Two models, both conditions, one judge, at the 3 triggers of one dialogue: 12 replies."""
    corpus_import(stream=stream(jsonl_bytes([dialogue_record()])))
    run = runs.run_create(
        name="first",
        endpoints=[_endpoint(name, server) for name in MODELS],
        judges=[_endpoint("judge-a", server)],
        dialogues=Dialogue.objects.all(),
        conditions=["vanilla", "rubric_injected"],
    )
    runs.run_launch(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == RunStatus.DONE
    assert _calls(run, "reply") == 12 and _calls(run, "judgment") == 12
    return run


@pytest.fixture(autouse=True)
def _on_commit(django_capture_on_commit_callbacks):
    """The step enqueues once its transaction commits: the test's own transaction never does,
    so its callbacks run where they are registered."""
    global _capture
    _capture = django_capture_on_commit_callbacks
    yield


def judge_pairs(**kwargs):
    kwargs.setdefault("via", AuditVia.COMMAND)
    with _capture(execute=True):
        return pairwise.run_pairwise_judge(**kwargs)


def _calls(run, purpose):
    return ProviderCall.objects.filter(run=run, purpose=purpose).count()


def _verdicts(run, judge):
    return PairwiseJudgment.objects.filter(comparison__run=run, judge_name=judge)


# --- Parsing and the order mapping ------------------------------------------------------------


@pytest.mark.parametrize(
    ("choice", "a_first", "winner"),
    [
        ("1", True, BattleWinner.MODEL_A),
        ("2", True, BattleWinner.MODEL_B),
        ("1", False, BattleWinner.MODEL_B),
        ("2", False, BattleWinner.MODEL_A),
        ("tie", False, BattleWinner.TIE),
        ("both_bad", True, BattleWinner.TIE_BOTHBAD),
    ],
)
def test_a_screen_choice_is_mapped_back_to_a_side(choice, a_first, winner):
    assert pairwise_winner(choice, a_shown_first=a_first) == winner


def test_pairwise_output_is_parsed_strictly():
    assert parse_pairwise_output('```json\n{"choice": 2, "rationale": " R "}\n```').choice == "2"
    assert parse_pairwise_output(choice_json("Both bad")).choice == "both_bad"
    for bad, reason in (
        ("Response 1, clearly.", "not a JSON object"),
        (json.dumps({"choice": "1"}), "missing key(s): rationale"),
        (choice_json("3"), "choice must be one of"),
        (choice_json(True), "choice and rationale must be strings"),
        (json.dumps({"choice": "1", "rationale": " "}), "the rationale is empty"),
        (json.dumps({"choice": ["1"], "rationale": "r"}), "must be strings"),
    ):
        with pytest.raises(JudgeOutputError, match=re.escape(reason)):
            parse_pairwise_output(bad)


# --- The step on the engine -------------------------------------------------------------------


def test_consistent_and_flipping_judges_in_both_orders_without_a_reply_or_a_single_verdict(
    finished_run, server
):
    run = finished_run
    fair, biased = _endpoint("pj-fair", server), _endpoint("pj-biased", server)
    outcome = judge_pairs(run_id=run.pk, judges=[fair, biased], pairs="models")
    run.refresh_from_db()
    # 3 triggers × 2 conditions, one pair of models each; side A = alpha (its name sorts first).
    assert (outcome.candidates, outcome.chosen, outcome.created, outcome.units) == (6, 6, 6, 6)
    assert outcome.judges_added == ("pj-fair", "pj-biased")
    assert run.status == RunStatus.DONE and run.judging_only
    assert _calls(run, "reply") == 12 and _calls(run, "judgment") == 12  # none new
    assert _calls(run, "pairwise") == 6 * 2 * 2
    comparisons = PairwiseComparison.objects.filter(run=run)
    assert {c.unit_a.endpoint.name for c in comparisons} == {"alpha-model"}
    assert all(c.unit_a.trigger_id == c.unit_b.trigger_id == c.trigger_id for c in comparisons)
    # The fair judge picks alpha's reply in both orders: side A, consistent.
    fair_verdicts = _verdicts(run, "pj-fair")
    assert fair_verdicts.count() == 12
    assert set(fair_verdicts.values_list("winner", "state")) == {("model_a", "done")}
    # The biased one always says "1": A when A is first, B when B is: every pair flips.
    by_order = dict(_verdicts(run, "pj-biased").values_list("order", "winner").distinct())
    assert by_order == {"ab": "model_a", "ba": "model_b"}
    event = RunAuditEvent.objects.get(run=run, action="pairwise")
    assert "pairs models: 6 chosen, 6 new" in event.note and "pj-biased, pj-fair" in event.note
    assert set(EvaluationUnit.objects.filter(run=run).values_list("state", flat=True)) == {"done"}


def test_each_order_is_its_own_request_and_cache_key_and_names_no_model(finished_run, server):
    run = finished_run
    judge_pairs(run_id=run.pk, judges=[_endpoint("pj-fair", server)])
    asks = [r for r in server.requests() if r.body["model"] == "pj-fair"]
    assert len(asks) == 12 and len({r.request_hash for r in asks}) == 12
    keys = ProviderCall.objects.filter(run=run, purpose="pairwise").values_list(
        "cache_key", flat=True
    )
    assert len(set(keys)) == 12
    # Each comparison was shown both ways round: the two texts swap places.
    pairs = {}
    for ask in asks:
        responses = shown(ask.body)
        context = ask.body["messages"][0]["content"].split("## Response 1")[0]  # the trigger's
        pairs.setdefault((context, frozenset(responses.values())), []).append(responses["1"])
    assert len(pairs) == 6 and all(len(set(firsts)) == 2 for firsts in pairs.values())
    prompt = asks[0].body["messages"][0]["content"]
    assert "Connects the facts about the team offsite" in prompt  # the rubric
    words = {w.strip(".,()") for w in prompt.split()}
    assert not words & {*MODELS, "vanilla", "rubric_injected", "alpha", "beta"}


def test_asking_again_asks_nothing_and_a_new_judge_is_asked_only_its_own(finished_run, server):
    run = finished_run
    judge_pairs(run_id=run.pk, judges=[_endpoint("pj-fair", server)])
    again = judge_pairs(run_id=run.pk, judges=[_endpoint("pj-fair", server)])
    run.refresh_from_db()
    assert (again.created, again.units, again.judges_added) == (0, 0, ())
    assert run.status == RunStatus.DONE and _calls(run, "pairwise") == 12
    judge_pairs(run_id=run.pk, judges=[_endpoint("pj-biased", server)])
    assert _calls(run, "pairwise") == 24 and _verdicts(run, "pj-biased").count() == 12
    # New pairs are compared by every pairwise judge the run has, without naming one.
    third = judge_pairs(run_id=run.pk, pairs="conditions")
    assert (third.created, third.units) == (6, 6)
    assert _calls(run, "pairwise") == 24 + 6 * 2 * 2
    assert _calls(run, "reply") == 12 and _calls(run, "judgment") == 12


def test_malformed_then_good_is_kept_and_malformed_thrice_is_a_judge_error(
    finished_run, server, vendor
):
    run = finished_run

    def learns(body):  # the first try of each request is prose; told why, it answers in JSON
        return "Response 1 is better." if len(body["messages"]) == 1 else prefers_grounded(body)

    vendor.answers["pj-fair"] = learns
    vendor.answers["pj-biased"] = lambda body: '{"choice": "first"}'
    judge_pairs(
        run_id=run.pk,
        judges=[_endpoint("pj-fair", server), _endpoint("pj-biased", server)],
        max_pairs=1,
    )
    fair = _verdicts(run, "pj-fair")
    assert set(fair.values_list("state", "attempts", "winner")) == {("done", 2, "model_a")}
    retried = [r for r in server.requests() if r.body["model"] == "pj-fair"]
    assert len(retried) == 4  # two orders × two tries
    told = [r.body["messages"][-1]["content"] for r in retried if len(r.body["messages"]) > 1]
    assert told and all("not a JSON object" in text for text in told)
    errors = _verdicts(run, "pj-biased")
    assert errors.count() == 2
    for verdict in errors:
        assert (verdict.state, verdict.winner, verdict.attempts) == ("judge_error", "", 3)
        assert verdict.raw_output == '{"choice": "first"}'
        assert "missing key(s): rationale" in verdict.error
    assert _calls(run, "pairwise") == 4 + 6
    run.refresh_from_db()
    assert run.status == RunStatus.DONE


def test_a_provider_error_errs_the_unit_and_retry_errors_asks_only_what_is_missing(
    finished_run, server, vendor
):
    from tests.fakes.vendor_server import Fault

    run = finished_run
    fair = _endpoint("pj-fair", server)
    server.script(*[Fault.bad_request("no such judge today")] * 1)
    judge_pairs(run_id=run.pk, judges=[fair], max_pairs=1)
    comparison = PairwiseComparison.objects.get(run=run)
    unit_a = comparison.unit_a
    unit_a.refresh_from_db()
    assert unit_a.state == UnitState.ERROR and "no such judge today" in unit_a.error
    # The other order's answer is cached, not recorded: the unit is retried as a whole.
    assert not _verdicts(run, "pj-fair").exists()
    with _capture(execute=True):
        assert runs.run_retry_errors(run_id=run.pk) == 1
    unit_a.refresh_from_db()
    assert unit_a.state == UnitState.DONE and _verdicts(run, "pj-fair").count() == 2
    paid = ProviderCall.objects.filter(run=run, purpose="pairwise")
    assert (paid.filter(ok=True).count(), paid.filter(ok=False).count()) == (2, 1)
    assert _calls(run, "judgment") == 12 and _calls(run, "reply") == 12


def test_conditions_pair_each_models_vanilla_reply_with_its_injected_one(finished_run, server):
    run = finished_run
    judge_pairs(run_id=run.pk, judges=[_endpoint("pj-fair", server)], pairs="conditions")
    comparisons = PairwiseComparison.objects.filter(run=run).select_related("unit_a", "unit_b")
    assert comparisons.count() == 6
    for c in comparisons:
        assert (c.unit_a.condition, c.unit_b.condition) == ("vanilla", "rubric_injected")
        assert c.unit_a.endpoint_id == c.unit_b.endpoint_id
    # alpha vs alpha: both grounded (a tie); beta's injected reply is not grounded either.
    winners = {
        c.unit_a.endpoint.name: set(c.judgments.values_list("winner", flat=True))
        for c in comparisons
    }
    assert winners == {"alpha-model": {"tie"}, "beta-model": {"model_a", "model_b"}}


def test_max_pairs_is_a_seeded_sample_balanced_over_pairs_of_sources(finished_run, server):
    run = finished_run
    fair = _endpoint("pj-fair", server)
    first = judge_pairs(run_id=run.pk, judges=[fair], max_pairs=4, seed=7)
    assert (first.candidates, first.chosen, first.created) == (6, 4, 4)
    conditions = PairwiseComparison.objects.filter(run=run).values_list(
        "unit_a__condition", flat=True
    )
    assert sorted(conditions) == ["rubric_injected"] * 2 + ["vanilla"] * 2  # 2 per stratum
    same = judge_pairs(run_id=run.pk, max_pairs=4, seed=7)
    assert (same.created, same.units) == (0, 0)  # the same seed draws the same pairs
    other = judge_pairs(run_id=run.pk, max_pairs=4, seed=8)
    assert other.comparisons > 4  # another seed, another sample (here: some new pairs)


def test_sample_balanced_by_hand():
    c = [pairwise.Candidate(i, i + 100, 1, ("x", "y" if i < 10 else "z")) for i in range(12)]
    taken = pairwise.sample_balanced(c, max_pairs=5, seed=1)
    strata = [candidate.sources[1] for candidate in taken]
    assert len(taken) == 5 and strata.count("z") == 2 and strata.count("y") == 3
    assert taken == pairwise.sample_balanced(c, max_pairs=5, seed=1)
    assert pairwise.sample_balanced(c, max_pairs=50, seed=1) == c


def test_explicit_pairs_are_checked_and_nothing_is_written_for_a_bad_one(finished_run, server):
    run = finished_run
    fair = _endpoint("pj-fair", server)
    units = list(EvaluationUnit.objects.filter(run=run).order_by("trigger_id", "id"))
    same_trigger = [u for u in units if u.trigger_id == units[0].trigger_id]
    other_trigger = next(u for u in units if u.trigger_id != units[0].trigger_id)
    for pairs, message in (
        ([(units[0].pk, units[0].pk)], r"pair 1 \(units \d+, \d+\): a reply cannot be compared"),
        ([(units[0].pk, other_trigger.pk)], "different triggers"),
        ([(units[0].pk, 999_999)], f"unit 999999 is not a finished reply of run {run.pk}"),
    ):
        with pytest.raises(runs.RunActionError, match=message):
            judge_pairs(run_id=run.pk, judges=[fair], pairs=pairs)
    assert not PairwiseComparison.objects.exists() and not run.pairwise_judges.exists()
    outcome = judge_pairs(
        run_id=run.pk,
        judges=[fair],
        pairs=[(same_trigger[0].pk, same_trigger[1].pk), (same_trigger[1].pk, same_trigger[0].pk)],
    )
    assert (outcome.chosen, outcome.created) == (2, 1)  # one unordered pair
    comparison = PairwiseComparison.objects.get()
    assert (comparison.unit_a_id, comparison.unit_b_id) == (same_trigger[0].pk, same_trigger[1].pk)


def test_only_finished_runs_and_something_to_do(finished_run, server):
    run = finished_run
    with pytest.raises(runs.RunActionError, match="nothing to do: name a pairwise judge"):
        judge_pairs(run_id=run.pk)
    with pytest.raises(runs.RunActionError, match="unknown pairs 'judges'"):
        judge_pairs(run_id=run.pk, judges=[_endpoint("pj-fair", server)], pairs="judges")
    with pytest.raises(runs.RunActionError, match="max pairs must be between"):
        judge_pairs(run_id=run.pk, judges=[_endpoint("pj-fair", server)], max_pairs=0)
    EvaluationRun.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING)
    with pytest.raises(runs.RunActionError, match="only a done, cancelled or failed run"):
        judge_pairs(run_id=run.pk, judges=[_endpoint("pj-fair", server)])
    EvaluationRun.objects.filter(pk=run.pk).update(status=RunStatus.DONE)
    EvaluationUnit.objects.filter(run=run).update(state=UnitState.ERROR)
    with pytest.raises(runs.RunActionError, match="no two finished replies to compare"):
        judge_pairs(run_id=run.pk, judges=[_endpoint("pj-fair", server)])


def test_a_unit_not_of_side_a_or_without_pairs_is_never_asked(finished_run, server):
    """Dispatched by hand, a side-B unit (all its verdicts given) finishes with no call."""
    run = finished_run
    judge_pairs(run_id=run.pk, judges=[_endpoint("pj-fair", server)], max_pairs=1)
    comparison = PairwiseComparison.objects.get(run=run)
    before = ProviderCall.objects.count()
    EvaluationUnit.objects.filter(pk=comparison.unit_b_id).update(state=UnitState.PENDING)
    EvaluationRun.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING)
    assert units_execute(unit_ids=[comparison.unit_b_id]) == {comparison.unit_b_id: "done"}
    assert ProviderCall.objects.count() == before


# --- The command and the admin ----------------------------------------------------------------


def test_judge_pairs_command(finished_run, server):
    run = finished_run
    _endpoint("pj-fair", server)
    out = io.StringIO()
    with _capture(execute=True):  # (enqueued on commit: --no-wait, then watched once done)
        call_command(
            "judge_pairs",
            str(run.pk),
            "--judge",
            "pj-fair",
            "--max-pairs",
            "2",
            "--no-wait",
            stdout=out,
        )
    watch_run(run, OutputWrapper(out))
    text = out.getvalue()
    assert f"Run {run.pk}: 2 of 6 pairs (2 new, 2 in all); 2 replies enqueued" in text
    assert f"Run {run.pk} done" in text and "Pairwise verdicts (of 4 per judge): pj-fair 4" in text
    endpoints = text.split("\nEndpoints:\n")[1]
    assert "\n  pj-fair: 4 answered, 0 failed, 0 retried, 4 in the last minute" in endpoints
    event = RunAuditEvent.objects.get(run=run, action="pairwise")
    assert event.via == "command" and "(judge_pairs)" in event.actor_name
    assert "max 2, seed 0" in event.note


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["nope", "--judge", "pj-fair"], "RUN: no run with id or name 'nope'"),
        (["first", "--judge", "nobody"], "--judge: unknown endpoint(s): nobody"),
        (["first", "--judge", "pj-fair", "--pairs", "judges"], "--pairs: 'judges' is none of"),
        (["first", "--judge", "pj-fair", "--pairs", "study=x"], "--pairs: study=ID needs"),
        (["first", "--judge", "pj-fair", "--pairs", "study=4242"], "--pairs: no study with id"),
        (["first", "--judge", "pj-fair", "--max-pairs", "0"], "--max-pairs: must be between 1"),
        (["first"], "Not judged: nothing to do: name a pairwise judge."),
    ],
)
def test_judge_pairs_command_errors_name_the_option(finished_run, server, argv, message):
    _endpoint("pj-fair", server)
    with pytest.raises(CommandError, match=re.escape(message)):
        call_command("judge_pairs", *argv, stdout=io.StringIO())
    assert not PairwiseComparison.objects.exists()


def test_admin_judges_pairs_from_the_run_page_and_shows_the_verdicts(
    finished_run, server, admin_client
):
    run = finished_run
    fair = _endpoint("pj-fair", server)
    url = f"/admin/benchmark/evaluationrun/{run.pk}/pairwise/"
    page = admin_client.get(f"/admin/benchmark/evaluationrun/{run.pk}/change/")
    assert url in page.content.decode()
    form = admin_client.get(url)
    assert form.status_code == 200 and "every two models at each trigger" in form.content.decode()
    refused = admin_client.post(url, {"pairs": "models"})
    assert "Not judged: nothing to do: name a pairwise judge." in refused.content.decode()
    bad = admin_client.post(url, {"judges": [fair.pk], "pairs": "models", "max_pairs": 0})
    assert "greater than or equal to 1" in bad.content.decode()
    with _capture(execute=True):
        done = admin_client.post(
            url, {"judges": [fair.pk], "pairs": "models", "max_pairs": 3, "seed": 2}
        )
    assert done.status_code == 302
    assert _verdicts(run, "pj-fair").count() == 6
    event = RunAuditEvent.objects.get(run=run, action="pairwise")
    assert event.via == "admin" and event.actor is not None and "max 3, seed 2" in event.note
    progress = admin_client.get(f"/admin/benchmark/evaluationrun/{run.pk}/progress/")
    text = progress.content.decode()
    assert (
        "Pairwise verdicts (both orders, of 6 each)" in text
        and "pj-fair: <strong>6</strong>" in text
    )
    EvaluationRun.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING)
    refused = admin_client.post(url, {"judges": [fair.pk], "pairs": "models"})
    assert "Not judged: only a done, cancelled or failed run" in refused.content.decode()
