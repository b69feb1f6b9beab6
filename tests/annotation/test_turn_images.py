"""Turn images in the workspaces: shown as thumbnails with their alt text, served only to
someone who was shown their turn (another study's image, a later turn's: 404; anonymous: the
login page), without metadata, private to the browser's cache."""

import io
import re

import pytest
from django.urls import reverse
from PIL import Image

from annotation.services.assignments import assignment_next
from benchmark.models import Turn
from tests.annotation.conftest import rater
from tests.annotation.test_workspace_pages import HTMX
from tests.images import stored_turn_image, tagged_jpeg

pytestmark = pytest.mark.django_db

IMAGE_URL = re.compile(r'src="(/annotate/images/[0-9a-f]{64})"')


@pytest.fixture
def handed_out(make_study, make_annotators):
    """A direct-rating study; its first annotator holds an item whose trigger turn carries an
    image (EXIF naming a model) and whose next turn carries another."""
    users = make_annotators(2)
    study = make_study("direct_rating", annotators=users, overlap=1)
    assignment = assignment_next(rater=rater(study, users[0]))
    trigger_turn = assignment.item.trigger.turn
    shown = stored_turn_image(
        trigger_turn, tagged_jpeg("gpt-secret", "rubric_injected"), alt="a mug behind a box"
    )
    later = Turn.objects.filter(dialogue_id=trigger_turn.dialogue_id, index=trigger_turn.index + 1)
    hidden = stored_turn_image(later.get()) if later.exists() else None
    return study, users, assignment, shown, hidden


def test_the_workspace_shows_the_turns_image_with_its_alt_text(handed_out, client):
    study, users, assignment, shown, _ = handed_out
    client.force_login(users[0])
    html = client.get(reverse("annotation:item", args=[study.pk, assignment.item.token])).content
    html = html.decode()
    assert IMAGE_URL.findall(html) == [reverse("annotation:turn_image", args=[shown.sha256])]
    assert 'alt="a mug behind a box"' in html and "<figcaption>a mug behind a box" in html
    assert 'data-image-zoom data-keys="z"' in html
    # The htmx partial carries it too.
    partial = client.get(reverse("annotation:workspace", args=[study.pk]), headers=HTMX)
    assert IMAGE_URL.findall(partial.content.decode())


def test_the_image_is_served_without_metadata_privately_with_an_etag(handed_out, client):
    study, users, _, shown, _ = handed_out
    client.force_login(users[0])
    url = reverse("annotation:turn_image", args=[shown.sha256])
    response = client.get(url)
    assert response.status_code == 200
    body = b"".join(response.streaming_content)
    assert response["Content-Type"] == "image/jpeg"
    assert response["Cache-Control"] == "private, max-age=86400"
    assert response["ETag"] == f'"{shown.sha256}"'
    assert b"gpt-secret" not in body and b"rubric_injected" not in body
    with Image.open(io.BytesIO(body)) as image:
        assert image.size == (shown.width, shown.height) and not image.getexif()
    again = client.get(url, headers={"If-None-Match": f'"{shown.sha256}"'})
    assert again.status_code == 304 and again["ETag"] == f'"{shown.sha256}"'


def test_only_who_was_shown_the_turn_gets_the_image(
    handed_out, client, make_study, make_annotators, researcher
):
    study, users, _, shown, hidden = handed_out
    url = reverse("annotation:turn_image", args=[shown.sha256])
    assert client.get(url).status_code == 302  # anonymous: to the login page
    assert client.get(url)["Location"].startswith(reverse("login"))
    # The study's other annotator holds nothing of that dialogue (yet).
    client.force_login(users[1])
    assert client.get(url).status_code == 404
    # An annotator of another study, and one of no study.
    outsider = make_annotators(1, prefix="outsider")[0]
    other = make_study("direct_rating", annotators=[outsider], overlap=1, name="Other study")
    assignment_next(rater=rater(other, outsider))
    for user in (outsider, make_annotators(1, prefix="nobody")[0]):
        client.force_login(user)
        if (
            user is outsider
            and other.items.filter(
                assignments__rater__user=user,
                trigger__turn__dialogue_id=shown.turn.dialogue_id,
                trigger__turn__index__gte=shown.turn.index,
            ).exists()
        ):
            continue  # the other study handed them the same turn: they were shown it
        assert client.get(url).status_code == 404
    # A turn after the item's trigger was never shown to its annotator.
    client.force_login(users[0])
    if hidden is not None:
        assert client.get(reverse("annotation:turn_image", args=[hidden.sha256])).status_code == 404
    assert client.get(reverse("annotation:turn_image", args=["0" * 64])).status_code == 404
    # Staff see every image (the dialogue page shows them).
    client.force_login(researcher)
    assert client.get(url).status_code == 200
    page = client.get(reverse("benchmark:dialogue_detail", args=[shown.turn.dialogue_id]))
    assert reverse("annotation:turn_image", args=[shown.sha256]) in page.content.decode()


def test_the_audit_workspace_shows_every_turns_images(make_study, make_annotators, client):
    users = make_annotators(3)
    study = make_study("dialogue_audit", annotators=users, overlap=2)
    assignment = assignment_next(rater=rater(study, users[0]))
    last = Turn.objects.filter(dialogue_id=assignment.item.dialogue_id).order_by("index").last()
    image = stored_turn_image(last, alt="the last turn's photo")
    client.force_login(users[0])
    html = client.get(reverse("annotation:item", args=[study.pk, assignment.item.token])).content
    url = reverse("annotation:turn_image", args=[image.sha256])
    assert url in html.decode() and "the last turn&#x27;s photo" in html.decode()
    assert client.get(url).status_code == 200
