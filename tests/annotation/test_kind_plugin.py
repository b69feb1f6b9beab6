"""A study kind is one module: this test declares a toy kind here and nowhere else, registers
it, and drives it through everything a kind takes part in — created from the staff page, Next,
an answer, undo, the raw votes export and the human-agreement table — with no other file
changed. If one of those steps needs an edit outside the kind's module, this test fails."""

import csv
import io
import re

import pytest
from django import forms
from django.template import Template
from django.test import Client
from django.urls import reverse

from annotation import kinds
from annotation.forms import AnswerForm
from annotation.kinds.base import Shortcut, StudyKind
from annotation.kinds.selection import endpoint_names, run_units, unit_key
from annotation.models import Answer, Study
from annotation.selectors import reply_context
from annotation.services.assignments import AnswerInput
from annotation.services.studies import ItemDraft
from benchmark.models import Condition
from tests.annotation.conftest import MODELS

pytestmark = pytest.mark.django_db
HTMX = {"HX-Request": "true"}


class ThumbForm(AnswerForm):
    thumb = forms.ChoiceField(
        choices=[("up", "Helpful"), ("down", "Not helpful")], widget=forms.RadioSelect
    )
    keys = {"thumb": {"up": ("h",), "down": ("n",)}}

    def to_input(self) -> AnswerInput:
        return AnswerInput(label=self.cleaned_data["thumb"], note=self.cleaned_data["note"])


class Thumbs(StudyKind):
    """Is this one reply helpful? Up or down."""

    key = "thumbs"
    label = "Thumbs up or down"
    labels = ("down", "up")
    ordinal = True
    answer_form = ThumbForm
    template = Template(
        "{% load annotation_tags markdown %}"
        '<article class="response single" id="the-reply">{% markdown view.reply %}</article>'
        '{% if form %}{% include "annotation/items/form_start.html" %}'
        '{% for radio in form.thumb|radios %}<label class="opt" data-keys="{{ radio.keys }}">'
        "{{ radio.tag }} {{ radio.choice_label }} <kbd>{{ radio.kbd }}</kbd></label>{% endfor %}"
        '{% include "annotation/items/form_end.html" %}{% endif %}'
    )
    shortcuts = (Shortcut("h / n", "helpful / not helpful"),)

    def select(self, spec):
        return [
            ItemDraft(
                key=unit_key(unit),
                dialogue_id=unit.trigger.turn.dialogue_id,
                trigger_id=unit.trigger_id,
                unit_id=unit.pk,
                names=endpoint_names(unit.endpoint),
            )
            for unit in run_units(spec).filter(condition=Condition.VANILLA)
        ]

    def item_view(self, assignment, study):
        context = reply_context(assignment.item)
        return {"reply": context.replies[assignment.item.unit_id]}

    def form_initial(self, answer, assignment):
        initial = super().form_initial(answer, assignment)
        if answer is not None:
            initial["thumb"] = answer.label
        return initial


@pytest.fixture
def thumbs():
    with kinds.registered(Thumbs()) as kind:
        yield kind


def _token(response) -> str:
    return re.search(r'data-item="([^"]+)"', response.content.decode()).group(1)


def _key(response) -> str:
    return re.search(r'name="idempotency_key" value="([^"]+)"', response.content.decode()).group(1)


def _answer(client, study, response, thumb):
    return client.post(
        reverse("annotation:answer", args=[study.pk, _token(response)]),
        {"idempotency_key": _key(response), "thumb": thumb},
        headers=HTMX,
    )


def test_a_kind_registered_in_one_module_runs_end_to_end(thumbs, run, make_annotators, researcher):
    people = make_annotators(2)
    staff, client = Client(), Client()
    staff.force_login(researcher)

    # Created from the staff page: the kind is in the menu and shows its selection fields.
    form_page = staff.get(reverse("annotation:study_new"), {"kind": "thumbs"}, headers=HTMX)
    assert (
        '<option value="thumbs" selected>Thumbs up or down</option>' in form_page.content.decode()
    )
    created = staff.post(
        reverse("annotation:study_new"),
        {
            "kind": "thumbs",
            "name": "Helpful or not?",
            "overlap": "2",
            "lease_minutes": "30",
            "annotators": [str(p.pk) for p in people],
            "run": str(run.pk),
            "trigger_type": "RECOVERY",
            "seed": "7",
        },
    )
    assert created.status_code == 302, created.content.decode()[:2000]
    study = Study.objects.get()
    assert study.kind == "thumbs" and study.get_kind_display() == "Thumbs up or down"
    assert study.items.count() == 4 * len(MODELS)  # one RECOVERY trigger a dialogue, vanilla

    # Next, blind: the kind's template shows the reply, its keys and its overlay row.
    for person, thumb in zip(people, ("up", "down"), strict=True):
        client.force_login(person)
        shown = client.post(reverse("annotation:next", args=[study.pk]), headers=HTMX)
        html = shown.content.decode()
        assert 'id="the-reply"' in html and 'data-keys="h"' in html and "<kbd>n</kbd>" in html
        assert (
            "helpful / not helpful"
            in client.get(reverse("annotation:workspace", args=[study.pk])).content.decode()
        )
        for name, display, model in MODELS:
            assert name not in html and display not in html and model not in html

        # An answer, an undo (the form comes back as answered), and the answer again.
        following = _answer(client, study, shown, "up")
        assert following.status_code == 200 and _token(following) != _token(shown)
        undone = client.post(reverse("annotation:undo", args=[study.pk]), headers=HTMX)
        assert _token(undone) == _token(shown)
        assert re.search(r'value="up"[^>]*checked', undone.content.decode())
        assert _answer(client, study, undone, thumb).status_code == 200

    live = Answer.objects.filter(retracted_at__isnull=True)
    assert sorted(live.values_list("label", flat=True)) == ["down", "up"]
    assert Answer.objects.filter(retraction_reason="undo").count() == 2
    assert len({a.assignment.item_id for a in live}) == 1  # both rated the first item

    # The raw votes export carries every answer, the undone ones flagged.
    votes = staff.get(reverse("stats_api:raw-export", args=["votes", "csv"]), {"study": study.pk})
    rows = list(csv.DictReader(io.StringIO(b"".join(votes.streaming_content).decode())))
    assert sorted((r["study_kind"], r["label"], r["retracted"]) for r in rows) == [
        ("thumbs", "down", "false"),
        ("thumbs", "up", "false"),
        ("thumbs", "up", "true"),
        ("thumbs", "up", "true"),
    ]

    # The human-agreement table reads the kind's labels: one item, two raters, split.
    table = staff.get(
        reverse("stats_api:table", args=["human-agreement"]), {"study": study.pk, "run": run.pk}
    ).json()
    overall = next(r for r in table["rows"] if r["group"] == "ALL")
    assert (overall["n_items"], overall["n_ratings"], overall["n_raters"]) == (1, 2, 2)
    # Two labels on one item that disagree: observed disagreement equals the expected one.
    assert overall["alpha_nominal"] == pytest.approx(0.0)


def test_a_kind_that_is_not_registered_is_not_offered(run, make_annotators, client_for, researcher):
    staff = client_for(researcher)
    page = staff.get(reverse("annotation:study_new")).content.decode()
    assert 'value="thumbs"' not in page
    response = staff.post(
        reverse("annotation:study_new"),
        {
            "kind": "thumbs",
            "name": "Helpful or not?",
            "overlap": "1",
            "lease_minutes": "30",
            "annotators": [str(make_annotators(1)[0].pk)],
            "run": str(run.pk),
        },
    )
    assert response.status_code == 200 and not Study.objects.exists()
    assert "Select a valid choice. thumbs is not one of the available choices." in (
        response.content.decode()
    )


def test_a_kind_that_cannot_select_or_show_its_items_cannot_be_made():
    class Incomplete(StudyKind):
        key = "incomplete"
        label = "Incomplete"
        labels = ("x",)
        answer_form = ThumbForm
        template = "annotation/items/pairwise.html"

    with pytest.raises(TypeError, match="item_view, select"):
        Incomplete()
