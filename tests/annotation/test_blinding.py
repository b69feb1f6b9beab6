"""Double-blind: nothing an annotator can reach names a model, an endpoint, a judge, a
condition or a unit, and the side each reply is shown on is randomised and balanced."""

import re
from collections import Counter

import pytest
from django.urls import reverse

from annotation.kinds.arena import SIDE_WINS
from annotation.models import Answer, Assignment
from benchmark.models import (
    Condition,
    EvaluationRun,
    EvaluationUnit,
    Judgment,
    ModelEndpoint,
)
from tests.annotation.conftest import MODELS
from tests.annotation.test_arena import second_run
from tests.annotation.test_workspace_pages import HTMX, key_of, token_of
from tests.images import stored_turn_image, tagged_jpeg
from tests.proposal_review import import_contexts

pytestmark = pytest.mark.django_db


def forbidden_strings(run: EvaluationRun) -> list[str]:
    names = [
        value
        for endpoint in ModelEndpoint.objects.all()
        for value in (endpoint.name, endpoint.display_name, endpoint.model_name)
    ]
    conditions = [*Condition.values, *Condition.labels, "rubric-injected", "rubric injected"]
    units = [str(pk) for pk in EvaluationUnit.objects.values_list("pk", flat=True)]
    runs = list(EvaluationRun.objects.values_list("name", flat=True))
    return [*names, *conditions, *units, run.name, *runs, "Case A", "Case B", "model_a", "model_b"]


def assert_blind_of(response, secrets, where: str) -> None:
    """Nothing of ``secrets`` in the response's HTML or headers (any case)."""
    text = response.content.decode() + "\n" + "\n".join(f"{k}: {v}" for k, v in response.items())
    lowered = text.lower()
    for secret in secrets:
        assert secret.lower() not in lowered, f"{where} reveals {secret!r}"


def assert_blind(response, run: EvaluationRun, where: str) -> None:
    assert_blind_of(response, forbidden_strings(run), where)
    # The answer form speaks in screen positions only.
    assert not re.search(r'value="(A|B)"', response.content.decode()), where


def walk(client, study, run, record) -> None:
    """Every page and response an annotator reaches in the study, each checked."""
    assert_blind(client.get(reverse("annotation:home")), run, "home")
    assert_blind(client.get(reverse("annotation:workspace", args=[study.pk])), run, "start")
    response = client.post(reverse("annotation:next", args=[study.pk]), headers=HTMX)
    assert_blind(response, run, "next")
    while token := token_of(response):
        record(token, response)
        assert_blind(client.get(reverse("annotation:workspace", args=[study.pk])), run, "workspace")
        assert_blind(client.get(reverse("annotation:item", args=[study.pk, token])), run, "item")
        flagged = client.post(
            reverse("annotation:flag", args=[study.pk, token]),
            {"category": "unclear", "note": "?"},
            headers=HTMX,
        )
        assert_blind(flagged, run, "flag")
        response = client.post(
            reverse("annotation:answer", args=[study.pk, token]),
            {"idempotency_key": key_of(response), "choice": "2", "confidence": "3"},
            headers=HTMX,
        )
        assert_blind(response, run, "answer")
    assert_blind(client.get(reverse("annotation:my_answers", args=[study.pk])), run, "mine")
    undone = client.post(reverse("annotation:undo", args=[study.pk]), headers=HTMX)
    assert_blind(undone, run, "undo")
    assert_blind(
        client.get(reverse("annotation:item", args=[study.pk, token_of(undone)])), run, "reopened"
    )


def test_nothing_an_annotator_reaches_in_a_pairwise_study_reveals_models_or_conditions(
    run, make_study, make_annotators, client
):
    users = make_annotators(2)
    study = make_study(annotators=users, overlap=2)
    first_shown: dict[str, dict[str, str]] = {}  # user → item token → condition shown first
    replies = dict(EvaluationUnit.objects.values_list("reply", "condition"))
    for user in users:
        client.force_login(user)
        shown = first_shown.setdefault(user.username, {})

        def record(token, response, shown=shown):
            html = response.content.decode()
            first = re.search(
                r'id="response-1">\s*<h3>Response 1</h3>\s*<div class="md-text">.*?'
                r'<div class="md-raw">([^<]*)</div>',
                html,
                re.S,
            ).group(1)
            shown[token] = replies[first.replace("&#x27;", "'")]

        walk(client, study, run, record)
    one, two = first_shown.values()
    assert set(one) == set(two) == set(study.items.values_list("token", flat=True))
    # Per item the two annotators saw opposite sides; neither saw a constant side.
    assert all(one[token] != two[token] for token in one)
    for shown in (one, two):
        counts = Counter(shown.values())
        assert set(counts) == {Condition.VANILLA, Condition.RUBRIC_INJECTED}, counts
    # And the server mapped the positions back: "2" was chosen every time.
    for assignment in Assignment.objects.filter(item__study=study).prefetch_related("answers"):
        live = [a for a in assignment.answers.all() if a.retracted_at is None]
        for answer in live:
            assert answer.label == assignment.display["order"][1]


@pytest.mark.parametrize("kind", ["pairwise", "arena", "direct_rating"])
def test_skips_the_time_limit_and_my_answers_are_blind(
    kind, run, make_study, make_annotators, client
):
    """Skip (with a reason), the timer, a time-limit skip and My answers with skipped rows: no
    page or swap names a model, condition, unit or run; the item order is the rater's own."""
    users = make_annotators(1)
    study = make_study(kind, annotators=users, overlap=1, item_time_limit_s=60, max_items=3)
    client.force_login(users[0])
    response = client.post(reverse("annotation:next", args=[study.pk]), headers=HTMX)
    assert "data-time-left-s" in response.content.decode()
    assert_blind(response, run, "timed item")
    skipped = client.post(
        reverse("annotation:skip", args=[study.pk, token_of(response)]),
        {"reason": "skip"},
        headers=HTMX,
    )
    assert_blind(skipped, run, "skip")
    Assignment.objects.filter(state="leased").update(time_limit_ends_at="2000-01-01T00:00Z")
    assert_blind(client.get(reverse("annotation:workspace", args=[study.pk])), run, "time up")
    following = client.post(reverse("annotation:next", args=[study.pk]), headers=HTMX)
    assert_blind(following, run, "after the time limit")
    mine = client.get(reverse("annotation:my_answers", args=[study.pk]))
    assert mine.content.decode().count("skipped</span>") == 2
    assert_blind(mine, run, "my answers")


def test_nothing_an_annotator_reaches_in_an_arena_study_reveals_a_source(
    run, make_study, make_annotators, client
):
    """Two runs, both models, both conditions (the second run: vanilla only): six sources whose
    labels (model · condition · run) live in the items' payload only. Sides are shown in
    opposite orders to an item's two raters, every source is shown first sometimes, and "2" is
    stored as the side it showed."""
    other = second_run(run, models=[name for name, _, _ in MODELS])
    users = make_annotators(2)
    study = make_study("arena", runs=[run, other], annotators=users, overlap=2, per_pair=1)
    replies = {
        reply: (endpoint, condition, run_id)
        for reply, endpoint, condition, run_id in EvaluationUnit.objects.values_list(
            "reply", "endpoint__name", "condition", "run_id"
        )
    }
    first_shown: dict[str, dict[str, tuple]] = {}
    for user in users:
        client.force_login(user)
        shown = first_shown.setdefault(user.username, {})

        def record(token, response, shown=shown):
            first = re.search(
                r'id="response-1">\s*<h3>Response 1</h3>\s*<div class="md-text">.*?'
                r'<div class="md-raw">([^<]*)</div>',
                response.content.decode(),
                re.S,
            ).group(1)
            shown[token] = replies[first.replace("&#x27;", "'")]

        walk(client, study, run, record)  # every run's name is among the secrets
    one, two = first_shown.values()
    assert set(one) == set(two) == set(study.items.values_list("token", flat=True))
    assert all(one[token] != two[token] for token in one)
    assert len(set(one.values()) | set(two.values())) == 6  # every source was Response 1
    for item in study.items.all():
        for label in item.payload["sources"].values():
            assert " · " in label  # a real label, kept server-side (walk checked the pages)
    for assignment in Assignment.objects.filter(item__study=study).prefetch_related("answers"):
        for answer in assignment.answers.all():
            if answer.retracted_at is None:
                assert answer.label == SIDE_WINS[assignment.display["order"][1]]


@pytest.mark.parametrize("kind", ["pairwise", "arena"])
def test_item_tokens_and_order_say_nothing_about_the_sources(kind, run, make_study):
    study = make_study(kind, overlap=1)
    items = list(study.items.order_by("position"))
    tokens = [i.token for i in items]
    assert len(set(tokens)) == len(tokens) and all(len(t) >= 20 for t in tokens)
    assert [i.unit_id for i in items] != sorted(i.unit_id for i in items)  # shuffled


@pytest.mark.parametrize("kind", ["adjudication", "direct_rating", "failure_mode"])
def test_the_other_reply_workspaces_are_blind_too(kind, run, make_study, make_annotators, client):
    users = make_annotators(1)
    study = make_study(kind, annotators=users, overlap=1, condition="")
    client.force_login(users[0])
    response = client.post(reverse("annotation:next", args=[study.pk]), headers=HTMX)
    for _ in range(4):
        assert_blind(response, run, kind)
        data = {"idempotency_key": key_of(response), "note": "n", "confidence": "3"}
        data.update(verdict="FAIL", label="other")
        response = client.post(
            reverse("annotation:answer", args=[study.pk, token_of(response)]), data, headers=HTMX
        )
    assert_blind(response, run, kind)


def test_judges_are_letters_in_a_per_item_random_order(run, make_study, make_annotators, client):
    users = make_annotators(1)
    study = make_study("adjudication", annotators=users, overlap=1)
    client.force_login(users[0])
    response = client.post(reverse("annotation:next", args=[study.pk]), headers=HTMX)
    judge_a = Counter()
    while token := token_of(response):
        html = response.content.decode()
        assert "Judge A" in html and "Judge B" in html
        judge_a[re.search(r"Judge A:.*?Rationale (\d)", html, re.S).group(1)] += 1
        response = client.post(
            reverse("annotation:answer", args=[study.pk, token]),
            {"idempotency_key": key_of(response), "verdict": "PASS"},
            headers=HTMX,
        )
    assert set(judge_a) == {"0", "1"}, judge_a  # either judge can be "Judge A"


def test_a_reply_with_a_script_stays_inert_and_its_evidence_is_still_marked(
    run, make_study, make_annotators, client
):
    evil = "Sure.\n<script>alert('pwned')</script> <img src=x onerror=alert(1)> pack it last"
    EvaluationUnit.objects.update(reply=evil)
    Judgment.objects.update(evidence="<script>alert('pwned')</script>")
    users = make_annotators(1)
    for kind in ("adjudication", "pairwise", "arena", "direct_rating"):
        study = make_study(kind, annotators=users, overlap=1, name=f"evil {kind}")
        client.force_login(users[0])
        html = client.post(
            reverse("annotation:next", args=[study.pk]), headers=HTMX
        ).content.decode()
        assert "<script>alert" not in html and "<img src=x" not in html
        assert "&lt;script&gt;alert(&#x27;pwned&#x27;)&lt;/script&gt;" in html
        if kind == "adjudication":
            assert re.search(r'<mark class="evidence judge-[ab][^"]*">&lt;script&gt;', html)


def test_a_halo_workspace_is_blind_and_each_annotator_sees_its_own_reply_order(
    run, make_study, make_annotators, client
):
    """HALO diagnosis (issue #17): every page of the walk is blind, the replies are "Reply 1 …
    n" in an order that differs between a checkpoint's two annotators, and the answers posted
    by position are stored by response."""
    users = make_annotators(2)
    study = make_study("halo", annotators=users, overlap=2, condition=Condition.VANILLA)
    replies = dict(EvaluationUnit.objects.values_list("reply", "pk"))
    first_shown: dict[str, dict[str, int]] = {}
    for user in users:
        client.force_login(user)
        shown = first_shown.setdefault(user.username, {})
        assert_blind(client.get(reverse("annotation:home")), run, "home")
        response = client.post(reverse("annotation:next", args=[study.pk]), headers=HTMX)
        while token := token_of(response):
            assert_blind(response, run, "halo item")
            assert_blind(
                client.get(reverse("annotation:item", args=[study.pk, token])), run, "halo page"
            )
            first = re.search(
                r'id="reply-1">\s*<h3>Reply 1</h3>\s*<div class="md-text">.*?'
                r'<div class="md-raw">([^<]*)</div>',
                response.content.decode(),
                re.S,
            ).group(1)
            shown[token] = replies[first.replace("&#x27;", "'")]
            data = {"idempotency_key": key_of(response)}
            for n in (1, 2):
                data.update({f"level_{n}": "L0", f"acceptable_{n}": "yes" if n == 1 else "no"})
            response = client.post(
                reverse("annotation:answer", args=[study.pk, token]), data, headers=HTMX
            )
            assert_blind(response, run, "halo answer")
        undone = client.post(reverse("annotation:undo", args=[study.pk]), headers=HTMX)
        assert_blind(undone, run, "halo undo")
    one, two = first_shown.values()
    assert set(one) == set(two) == set(study.items.values_list("token", flat=True))
    assert all(one[token] != two[token] for token in one)  # each saw the other reply first
    # Whatever the order, "Reply 1" was accepted: stored by response, mapped back from it.
    for assignment in Assignment.objects.filter(item__study=study).prefetch_related("answers"):
        for answer in assignment.answers.all():
            accepted = [r["response"] for r in answer.details["replies"] if r["acceptable"]]
            assert accepted == [assignment.display["order"][0]]


# --- Proposal review ------------------------------------------------------------------------------

SECRET_CONTEXTS = [
    {
        "context_id": f"ctxkey-zephyr-{n}",
        "events": [
            {"time": "2026-03-02T09:00:00", "kind": "user activity", "text": "Opens the list"},
            {"time": "2026-03-02T09:01:00", "text": "Adds “tent” to it"},
        ],
        "proposals": [
            {"id": "pid-zephyr-a", "source": "zephyr-secret-large", "text": "Sort the list"},
            {"id": "pid-quartz-b", "source": "quartz-hidden-mini", "text": "Check the weather"},
        ],
        "silent": ["onyx-covert-medium"],
    }
    for n in range(3)
]


def test_nothing_an_annotator_reaches_in_a_proposal_review_reveals_a_source(
    run, make_study, make_annotators, client
):
    """An imported study (sources, proposal ids and context ids that name models) and one made
    from the run (its models' replies): every page, answer and undo is blind."""
    users = make_annotators(2)
    imported = import_contexts(SECRET_CONTEXTS, users, overlap=2)
    from_run = make_study("proposal_review", annotators=users, condition=Condition.VANILLA)
    secrets_of_file = ["onyx-covert-medium", "pid-zephyr", "pid-quartz", "ctxkey"]
    for study in (imported, from_run):
        for user in users:
            client.force_login(user)
            response = client.post(reverse("annotation:next", args=[study.pk]), headers=HTMX)
            pages = [client.get(reverse("annotation:home")), response]
            while token := token_of(response):
                pages.append(client.get(reverse("annotation:item", args=[study.pk, token])))
                response = client.post(
                    reverse("annotation:answer", args=[study.pk, token]),
                    {"idempotency_key": key_of(response), "proposal_1": "accept"}
                    | {"proposal_2": "reject"},
                    headers=HTMX,
                )
                pages.append(response)
            pages.append(client.post(reverse("annotation:undo", args=[study.pk]), headers=HTMX))
            for page in pages:
                assert_blind(page, run, study.name)
                text = page.content.decode().lower()
                for secret in secrets_of_file:
                    assert secret not in text, f"{study.name} reveals {secret!r}"
                # The form speaks in positions: never a proposal's id as a field or a value.
                assert not re.search(r'name="proposal_(?!\d+")', text)
                assert not re.search(r'value="p\d"', text)
        # Every context answered by both (then each one's last undone), so every page was seen.
        answers = Answer.objects.filter(assignment__item__study=study)
        assert answers.count() == 2 * study.items.count()


def test_turn_images_are_blind_in_their_urls_headers_and_bytes(
    run, make_study, make_annotators, client
):
    """Every trigger turn carries an image whose EXIF names the models and the conditions:
    the pages show it under its content's hash alone, and what is served names nothing."""
    users = make_annotators(2)
    study = make_study(annotators=users, overlap=2)
    secrets = forbidden_strings(run)
    endpoints = list(ModelEndpoint.objects.all())
    for n, turn in enumerate(
        {item.trigger.turn for item in study.items.select_related("trigger__turn")}
    ):
        endpoint = endpoints[n % len(endpoints)]
        stored_turn_image(
            turn, tagged_jpeg(endpoint.model_name, endpoint.display_name, Condition.RUBRIC_INJECTED)
        )
    client.force_login(users[0])
    urls: set[str] = set()

    def record(token, response):
        html = response.content.decode()
        found = re.findall(r'src="(/annotate/images/[^"]*)"', html)
        assert found and all(re.fullmatch(r"/annotate/images/[0-9a-f]{64}", u) for u in found)
        urls.update(found)

    walk(client, study, run, record)
    assert urls
    for url in urls:
        response = client.get(url)
        assert response.status_code == 200
        served = b"".join(response.streaming_content).lower()
        headers = "\n".join(f"{k}: {v}" for k, v in response.items()).lower()
        for secret in secrets:
            assert secret.lower().encode() not in served, f"{url} carries {secret!r}"
            assert secret.lower() not in headers, f"{url}'s headers name {secret!r}"
