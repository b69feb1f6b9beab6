"""The multimodal demo in a workspace (issue #18): after ``load_demo``, a demo annotator's
direct-rating study of the replies to the demo photos shows each item's photo as a thumbnail
through the guarded image view, and — the blind-leak checks of test_blinding.py — nothing they
reach names a model, a judge, a condition or a run, in the pages, the image URLs, the image
responses' headers or their bytes."""

import io
import re

import pytest
from django.core.management import call_command
from django.urls import reverse

from annotation.demo import IMAGE_STUDY
from annotation.models import Answer, Study
from benchmark.evaluation.demo_run import DEMO_IMAGE_RUN_NAME
from benchmark.models import EvaluationRun, EvaluationUnit, TriggerType, TurnImage
from tests.annotation.test_blinding import assert_blind_of, forbidden_strings
from tests.annotation.test_workspace_pages import HTMX, key_of, token_of

pytestmark = pytest.mark.django_db
IMAGE_URL = re.compile(r'src="(/annotate/images/[^"]*)"')


@pytest.fixture
def demo(client, django_user_model):
    call_command("load_demo", stdout=io.StringIO())
    client.force_login(django_user_model.objects.get(username="annotator1"))
    return Study.objects.get(name=IMAGE_STUDY), EvaluationRun.objects.get(name=DEMO_IMAGE_RUN_NAME)


def test_load_demo_makes_the_photo_study_once(demo):
    study, run = demo
    items = study.items.select_related("unit__trigger")
    assert {item.unit.trigger.type for item in items} == {TriggerType.INTERVENTION}
    assert {item.unit.run_id for item in items} == {run.pk}
    # Every vanilla reply of the run at its INTERVENTION triggers.
    assert items.count() == run.units.filter(condition="vanilla").count() > 0
    assert set(study.raters.values_list("user__username", flat=True)) == {
        "annotator1",
        "annotator2",
    }
    out = io.StringIO()
    call_command("load_demo", stdout=out)
    assert "Demo studies: 0 created" in out.getvalue()
    assert EvaluationRun.objects.filter(name=DEMO_IMAGE_RUN_NAME).count() == 1
    assert Study.objects.filter(name=IMAGE_STUDY).count() == 1


def _names(run: EvaluationRun) -> list[str]:
    """test_blinding's forbidden strings but the units' ids: with the whole demo loaded they are
    three-digit numbers, found in any page (its Content-Length, a pixel size); the workspace's
    item tokens are checked to be random elsewhere (test_blinding.py)."""
    units = {str(pk) for pk in EvaluationUnit.objects.values_list("pk", flat=True)}
    return [secret for secret in forbidden_strings(run) if secret not in units]


def assert_blind(response, secrets: list[str], where: str) -> None:
    assert_blind_of(response, secrets, where)
    assert not re.search(r'value="(A|B)"', response.content.decode()), where


def test_the_demo_photo_study_shows_each_items_photo_blind(demo, client):
    study, run = demo
    secrets = _names(run)
    assert "demo-atlas-large" in secrets and "rubric_injected" in secrets and run.name in secrets
    seen: set[str] = set()
    response = client.post(reverse("annotation:next", args=[study.pk]), headers=HTMX)
    answered = 0
    while token := token_of(response):
        assert answered <= study.items.count(), "an answer was refused: the same item again"
        item = study.items.select_related("unit__trigger__turn").get(token=token)
        page = client.get(reverse("annotation:item", args=[study.pk, token]))
        assert_blind(page, secrets, "the photo item")
        assert_blind(response, secrets, "next")
        # The trigger turn's photo (and any earlier turn's), by its content's hash alone.
        expected = {
            reverse("annotation:turn_image", args=[image.sha256])
            for image in TurnImage.objects.filter(
                turn__dialogue_id=item.unit.trigger.turn.dialogue_id,
                turn__index__lte=item.unit.trigger.turn.index,
            )
        }
        found = set(IMAGE_URL.findall(page.content.decode()))
        assert expected and found == expected
        assert 'data-image-zoom data-keys="z"' in page.content.decode()
        seen |= found
        answer = {
            "idempotency_key": key_of(response),
            "verdict": "PASS",
            "confidence": "3",
            "note": "n",
        }
        response = client.post(
            reverse("annotation:answer", args=[study.pk, token]), answer, headers=HTMX
        )
        answered += 1
    assert answered == study.items.count()
    assert Answer.objects.filter(assignment__item__study=study).count() == answered
    for url in seen:
        image = client.get(url)
        assert image.status_code == 200
        served = b"".join(image.streaming_content).lower()
        headers = "\n".join(f"{k}: {v}" for k, v in image.items()).lower()
        for secret in secrets:
            assert secret.lower().encode() not in served, f"{url} carries {secret!r}"
            assert secret.lower() not in headers, f"{url}'s headers name {secret!r}"
