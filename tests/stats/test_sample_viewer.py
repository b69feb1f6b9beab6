"""The per-trigger sample viewer: the filtered trigger list, a trigger's page (every reply in
both conditions, each judge's verdict, rationale and evidence marked with its status badge,
the disagreement and its adjudication, the failure-mode labels), prev / next links that keep
the filters, the leaderboard's links into it, refused filters, query counts and who may see it."""

import re
from urllib.parse import parse_qs, urlsplit

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from annotation.models import Study
from benchmark.models import (
    ClassificationState,
    EvaluationUnit,
    EvidenceStatus,
    JudgeDisagreement,
    Judgment,
    ModelEndpoint,
    Trigger,
    TriggerType,
)
from benchmark.vocabulary import FailureMode
from stats import viewer
from tests.stats.conftest import PRIMARY_JUDGE, answer_next, create_study, rater_of

pytestmark = pytest.mark.django_db


def triggers_url(run) -> str:
    return reverse("stats:run_triggers", args=[run.pk])


def detail_url(run, trigger_id) -> str:
    return reverse("stats:trigger_detail", args=[run.pk, trigger_id])


def listed_ids(html: str) -> list[int]:
    return [int(i) for i in re.findall(r"/triggers/(\d+)/", html)]


def test_the_list_shows_every_trigger_of_the_run_in_reading_order(
    study_run, client_for, researcher
):
    response = client_for(researcher).get(triggers_url(study_run))
    assert response.status_code == 200
    expected = list(
        Trigger.objects.order_by("turn__dialogue__unique_id_eval", "turn__index").values_list(
            "id", flat=True
        )
    )
    assert listed_ids(response.content.decode()) == expected
    assert f"{len(expected)} triggers with at least one matching reply" in response.content.decode()


def test_filters_narrow_the_list_to_triggers_with_a_matching_reply(
    study_run, client_for, researcher
):
    client = client_for(researcher)
    model = study_run.endpoints.order_by("name").first().name
    html = client.get(
        triggers_url(study_run), {"model": model, "type": "RECOVERY", "condition": "vanilla"}
    ).content.decode()
    recovery = set(Trigger.objects.filter(type=TriggerType.RECOVERY).values_list("id", flat=True))
    assert set(listed_ids(html)) == recovery

    # Verdict from the primary judge: exactly the triggers where this model's vanilla reply has it.
    failed = set(
        Judgment.objects.filter(
            judge_name=PRIMARY_JUDGE,
            verdict="FAIL",
            unit__endpoint__name=model,
            unit__condition="vanilla",
        ).values_list("unit__trigger_id", flat=True)
    )
    assert failed
    html = client.get(
        triggers_url(study_run), {"model": model, "condition": "vanilla", "verdict": "FAIL"}
    ).content.decode()
    assert set(listed_ids(html)) == failed

    # Judge disagreement: the triggers with a disagreement row; adjudicated ones.
    agreed = list(Trigger.objects.order_by("id").values_list("id", flat=True)[:6])
    JudgeDisagreement.objects.filter(unit__trigger_id__in=agreed).delete()
    disagreeing = set(
        JudgeDisagreement.objects.filter(unit__run=study_run).values_list(
            "unit__trigger_id", flat=True
        )
    )
    assert 0 < len(disagreeing) < Trigger.objects.count()
    html = client.get(triggers_url(study_run), {"disagreement": "any"}).content.decode()
    assert set(listed_ids(html)) == disagreeing
    html = client.get(triggers_url(study_run), {"disagreement": "resolved"}).content.decode()
    assert listed_ids(html) == []
    resolved = JudgeDisagreement.objects.filter(unit__run=study_run).order_by("id").first()
    resolved.final_verdict = "PASS"
    resolved.save()
    html = client.get(triggers_url(study_run), {"disagreement": "resolved"}).content.decode()
    assert listed_ids(html) == [resolved.unit.trigger_id]

    # Evidence not found: a judgment whose evidence is not in the reply.
    Judgment.objects.update(evidence_status=EvidenceStatus.EXACT)
    other = EvaluationUnit.objects.filter(run=study_run).order_by("id")[13]
    Judgment.objects.filter(unit=other).update(evidence_status=EvidenceStatus.NOT_FOUND)
    html = client.get(triggers_url(study_run), {"evidence": "not_found"}).content.decode()
    assert listed_ids(html) == [other.trigger_id]


def test_the_adjudicated_verdict_source_takes_the_final_verdict(study_run, client_for, researcher):
    unit = EvaluationUnit.objects.filter(run=study_run).order_by("id")[2]
    primary = Judgment.objects.get(unit=unit, judge_name=PRIMARY_JUDGE).verdict
    final = next(v for v in ("PASS", "PARTIAL", "FAIL") if v != primary)
    JudgeDisagreement.objects.create(unit=unit, verdicts={}, final_verdict=final)
    query = {"model": unit.endpoint.name, "condition": unit.condition}
    ids = viewer.trigger_ids(study_run, {**query, "verdict": final, "verdicts": "adjudicated"})
    assert unit.trigger_id in ids
    ids = viewer.trigger_ids(study_run, {**query, "verdict": final})
    assert unit.trigger_id not in ids
    # Named as the dashboard names it, the primary judge is the default source.
    form = viewer.TriggerFilterForm({**query, "verdicts": "primary"}, run=study_run)
    assert form.is_valid() and form.query() == query


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"model": "no-such-model"}, "model"),
        ({"type": "SOMETIMES"}, "type"),
        ({"condition": "both"}, "condition"),
        ({"verdict": "MAYBE"}, "verdict"),
        ({"disagreement": "yes please"}, "disagreement"),
        ({"evidence": "exact"}, "evidence"),
        ({"verdicts": "no-such-judge"}, "verdicts"),
    ],
)
def test_a_refused_filter_is_a_400_naming_the_field(
    study_run, client_for, researcher, params, field
):
    client = client_for(researcher)
    trigger = Trigger.objects.first()
    for url in (triggers_url(study_run), detail_url(study_run, trigger.pk)):
        response = client.get(url, params)
        assert response.status_code == 400
        assert response.content.decode().startswith(f"Bad filter: {field}:")


def test_the_trigger_page_shows_every_reply_judge_and_label(
    study_run, client_for, researcher, make_annotators, admin_user
):
    trigger = Trigger.objects.filter(type=TriggerType.RECOVERY).order_by("id").first()
    units = list(EvaluationUnit.objects.filter(run=study_run, trigger=trigger).order_by("id"))
    assert len(units) == 4  # two models × two conditions
    first = units[0]
    first.reply = "<script>alert('reply')</script> " + first.reply
    first.save()
    quote = first.reply.split(".")[0][-30:]
    Judgment.objects.filter(unit=first, judge_name=PRIMARY_JUDGE).update(
        evidence=quote, evidence_status=EvidenceStatus.EXACT, rationale="Names the <b>anchor</b>."
    )
    Judgment.objects.filter(unit=first).exclude(judge_name=PRIMARY_JUDGE).update(
        evidence="words the reply never says", evidence_status=EvidenceStatus.NOT_FOUND
    )
    JudgeDisagreement.objects.create(
        unit=first,
        verdicts={PRIMARY_JUDGE: "PASS", "sibyl-judge-beta": "FAIL"},
        final_verdict="PARTIAL",
        resolved_by=admin_user,
        resolved_at=timezone.now(),
        resolution_note="Half of the anchor.",
    )
    first.failure_mode_classifications.create(
        classifier_name="demo-classifier",
        state=ClassificationState.DONE,
        failure_mode=FailureMode.GENERIC_CLOSING,
        quote=quote,
        quote_status=EvidenceStatus.CLOSE,
    )
    response = client_for(researcher).get(detail_url(study_run, trigger.pk))
    assert response.status_code == 200
    html = response.content.decode()
    # The conversation up to the trigger turn (its user message last), and the rubric.
    turn = trigger.turn
    assert f"turn {turn.index}" in html
    assert trigger.pass_criteria in html and trigger.fail_criteria in html
    # Every model in both conditions.
    for unit in units:
        assert f'id="unit-{unit.pk}"' in html
        assert unit.endpoint.display_name in html
    assert html.count("Rubric-injected</span>") == 2 and html.count("Vanilla</span>") == 2
    # Each judge's verdict and rationale (escaped), evidence marked with its badge.
    assert "Names the &lt;b&gt;anchor&lt;/b&gt;." in html
    assert "<script>alert" not in html and "&lt;script&gt;alert(&#x27;reply&#x27;)" in html
    assert re.search(r'<mark class="evidence judge-a">[^<]*' + re.escape(quote[:10]), html)
    assert 'class="badge evidence-exact"' in html and ">exact</span>" in html
    assert 'class="badge evidence-not_found"' in html and ">not found</span>" in html
    # The disagreement and its adjudication.
    assert "Judges disagree" in html and "Adjudicated" in html
    assert "Half of the anchor." in html and admin_user.get_username() in html
    # The LLM failure-mode label with its quote and badge.
    assert "Failure mode (LLM, demo-classifier)" in html and "Generic closing" in html
    assert 'class="badge evidence-close"' in html


def test_human_failure_mode_labels_show_beside_the_reply(
    study_run, client_for, researcher, make_annotators
):
    annotators = make_annotators(1)
    study = create_study(study_run, "failure_mode", annotators, overlap=1)
    answer = answer_next(
        rater_of(study, annotators[0]),
        lambda a: {"label": FailureMode.PREMATURE_CLOSURE, "note": "stops early"},
    )
    item = answer.assignment.item
    assert Study.objects.get(pk=study.pk).kind == "failure_mode"
    html = client_for(researcher).get(detail_url(study_run, item.trigger_id)).content.decode()
    assert "Failure mode (human, " in html
    assert "Premature closure" in html and "stops early" in html


def test_prev_next_follow_the_filtered_list_and_carry_the_filters(
    study_run, client_for, researcher
):
    client = client_for(researcher)
    query = {"type": "CRITICAL", "condition": "vanilla"}
    ids = viewer.trigger_ids(study_run, query)
    assert len(ids) == 4
    html = client.get(detail_url(study_run, ids[1]), query).content.decode()
    previous = re.search(r'href="([^"]+)" rel="prev"', html)[1].replace("&amp;", "&")
    following = re.search(r'href="([^"]+)" rel="next"', html)[1].replace("&amp;", "&")
    assert urlsplit(previous).path == detail_url(study_run, ids[0])
    assert urlsplit(following).path == detail_url(study_run, ids[2])
    assert parse_qs(urlsplit(following).query) == {k: [v] for k, v in query.items()}
    assert "2 of 4" in html
    first = client.get(detail_url(study_run, ids[0]), query).content.decode()
    last = client.get(detail_url(study_run, ids[-1]), query).content.decode()
    assert 'rel="prev"' not in first and 'rel="next"' not in last
    assert "js/trigger_viewer.js" in first


def test_a_trigger_the_run_has_no_reply_at_is_a_404(study_run, client_for, researcher):
    trigger = Trigger.objects.first()
    EvaluationUnit.objects.filter(trigger=trigger).delete()
    assert client_for(researcher).get(detail_url(study_run, trigger.pk)).status_code == 404
    missing_run = reverse("stats:run_triggers", args=[study_run.pk + 1000])
    assert client_for(researcher).get(missing_run).status_code == 404


def test_query_counts_are_fixed(study_run, client_for, researcher, django_assert_max_num_queries):
    client = client_for(researcher)
    trigger = Trigger.objects.order_by("id").first()
    client.get(triggers_url(study_run))  # warm the session
    with django_assert_max_num_queries(8):
        assert client.get(triggers_url(study_run), {"verdict": "PASS"}).status_code == 200
    # The session's 3, the run, the form's models and judges, the trigger, the filtered ids
    # (the primary judge's name, the ids), then the turns and their images, replies, their
    # judgments and classifications, the replies matching the filters (and the judge's name)
    # and the human labels: the same for any number of models, judges or labels.
    with django_assert_max_num_queries(17):
        response = client.get(detail_url(study_run, trigger.pk), {"verdict": "PASS"})
        assert response.status_code == 200


def test_the_trigger_page_reads_as_many_queries_with_more_models_judges_and_labels(
    study_run, client_for, researcher
):
    client = client_for(researcher)
    trigger = Trigger.objects.filter(type=TriggerType.RECOVERY).order_by("id").first()
    url = detail_url(study_run, trigger.pk)
    client.get(url)

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert client.get(url, {"verdict": "FAIL"}).status_code == 200
        return len(captured)

    before = queries()
    extra = ModelEndpoint.objects.create(
        name="third-model", display_name="Third Model", provider="replay", model_name="m3"
    )
    study_run.endpoints.add(extra)
    for condition in ("vanilla", "rubric_injected"):
        unit = EvaluationUnit.objects.create(
            run=study_run, trigger=trigger, endpoint=extra, condition=condition, reply="Bye."
        )
        for judge in ("oracle-judge-alpha", "sibyl-judge-beta", "third-judge"):
            Judgment.objects.create(
                unit=unit, judge_name=judge, state="done", verdict="FAIL", evidence="Bye"
            )
        unit.failure_mode_classifications.create(
            classifier_name="c", state=ClassificationState.DONE, failure_mode="other", quote="Bye"
        )
    html = client.get(url).content.decode()
    assert "Third Model" in html and "third-judge" in html
    assert queries() == before


def test_every_leaderboard_row_links_to_its_prefiltered_triggers(demo_run, client_for, researcher):
    client = client_for(researcher)
    html = client.get(
        reverse("stats:dashboard"), {"run": demo_run.pk, "condition": "rubric_injected"}
    ).content.decode()
    section = html[html.index('id="leaderboard"') : html.index('id="judge-agreement"')]
    found = re.findall(r'href="([^"]+)" class="drill-down"', section)
    links = [link.replace("&amp;", "&") for link in found]
    assert len(links) == 3 * 4  # three models: ALL and each phase
    for link in links:
        parts = urlsplit(link)
        assert parts.path == triggers_url(demo_run)
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        assert query["condition"] == "rubric_injected"
        response = client.get(link)
        assert response.status_code == 200
        shown = listed_ids(response.content.decode())
        expected = Trigger.objects.filter(
            units__run=demo_run,
            units__endpoint__name=query["model"],
            units__condition="rubric_injected",
        )
        if "type" in query:
            expected = expected.filter(type=query["type"])
        assert sorted(shown) == sorted(set(expected.values_list("id", flat=True)))


def test_annotators_never_reach_the_viewer(study_run, client_for, annotator, study_rater, client):
    trigger = Trigger.objects.first()
    for url in (triggers_url(study_run), detail_url(study_run, trigger.pk)):
        for user in (annotator, study_rater):
            assert client_for(user).get(url).status_code == 404
        client.logout()
        assert client.get(url).status_code == 302


def test_the_trigger_page_shows_the_conversations_turn_images(study_run, client_for, researcher):
    from tests.images import stored_turn_image

    trigger = Trigger.objects.filter(type=TriggerType.RECOVERY).order_by("id").first()
    first_turn = trigger.turn.dialogue.turns.get(index=1)
    image = stored_turn_image(first_turn, alt="the occluded mug")
    client = client_for(researcher)
    html = client.get(detail_url(study_run, trigger.pk)).content.decode()
    url = reverse("annotation:turn_image", args=[image.sha256])
    assert f'src="{url}"' in html and "<figcaption>the occluded mug</figcaption>" in html
    assert client.get(url).status_code == 200
