"""The workspace writes its radio and hidden inputs itself (``annotation_tags.radios`` and
``hidden``, for speed); they must be exactly what Django's widgets render, in every state a
form can be in: fresh, refilled after an undo, bound with an answer, bound with errors."""

import pytest
from django import forms
from django.template import Context, Template

from annotation import kinds
from annotation.kinds.dialogue_audit import AuditDecision
from annotation.kinds.failure_mode import FAILURE_MODE_KEYS
from annotation.kinds.proposal_review import proposal_field
from annotation.models import Assignment, FlagCategory, Study
from annotation.templatetags.annotation_tags import (
    check_cells,
    defined_options,
    flag_options,
    hidden,
    keyed_options,
    proposal_cells,
    radios,
    row_options,
    shift_options,
)

FORMS = {kind.key: kind.answer_form for kind in kinds.all_kinds()}


def _states(form_class, study, assignment):
    """The form fresh, with initial values, bound to a full answer, and bound to nothing."""
    fields = form_class(study=study, assignment=assignment).fields
    full = {}
    for name, field in fields.items():
        if isinstance(field.widget, forms.RadioSelect):
            full[name] = str(list(field.choices)[-1][0])
    full |= {"idempotency_key": "abcdefgh12", "elapsed_ms": "1200", "note": "why"}
    initial = {name: value for name, value in full.items() if name != "elapsed_ms"}
    initial |= {n: int(v) for n, v in initial.items() if n == "confidence"}  # as refilled
    yield form_class(study=study, assignment=assignment)
    yield form_class(initial=initial, study=study, assignment=assignment)
    bound = form_class(full, study=study, assignment=assignment)
    bound.is_valid()
    yield bound
    empty = form_class({}, study=study, assignment=assignment)
    assert not empty.is_valid()  # every radio field now carries an error
    yield empty


@pytest.mark.parametrize("kind", list(FORMS))
def test_radio_and_hidden_inputs_are_written_exactly_as_django_renders_them(kind):
    study = Study(kind=kind, name="s", reason_required=False)
    assignment = Assignment(display={"order": ["A", "B"]})
    radio_fields = 0
    for form in _states(FORMS[kind], study, assignment):
        for bound in form:
            widget = bound.field.widget
            if isinstance(widget, forms.RadioSelect):
                radio_fields += 1
                ours = radios(bound)
                django = list(bound)
                # As text (the templates print and compare them as text).
                assert [r.data["value"] for r in ours] == [str(r.data["value"]) for r in django]
                assert [r.choice_label for r in ours] == [str(r.choice_label) for r in django]
                assert [str(r.tag) for r in ours] == [str(r.tag()) for r in django]
            elif isinstance(widget, forms.HiddenInput):
                assert str(hidden(bound)) == str(bound)
    assert radio_fields  # the comparison really ran


def test_a_radio_value_is_escaped():
    class Hostile(forms.Form):
        pick = forms.ChoiceField(
            choices=[('"><script>x()</script>', "<b>label</b>")], widget=forms.RadioSelect
        )

    (radio,) = radios(Hostile()["pick"])
    assert "<script>" not in str(radio.tag) and "&lt;script&gt;" in str(radio.tag)
    assert str(radio.tag) == str(list(Hostile()["pick"])[0].tag())


# The loops over ``radios`` that ``keyed_options``, ``shift_options``, ``row_options``,
# ``check_cells`` and ``proposal_cells`` replaced, as they were.
LOOPS = {
    "keyed": '{% for radio in field|radios %}<label class="opt" data-keys="{{ radio.keys }}">'
    "{{ radio.tag }} {{ radio.choice_label }} <kbd>{{ radio.kbd }}</kbd></label>{% endfor %}",
    "verdict": '{% for radio in field|radios %}<label class="opt verdict-'
    '{{ radio.data.value|lower }}" data-keys="{{ radio.keys }}">{{ radio.tag }} '
    "{{ radio.choice_label }} <kbd>{{ radio.kbd }}</kbd></label>{% endfor %}",
    "shift": '{% for radio in field|radios %}<label class="opt" data-shift-keys='
    '"{{ radio.data.value }}">{{ radio.tag }} {{ radio.choice_label }}</label>{% endfor %}',
    "row": '{% for radio in field|radios %}<label class="opt" data-check-keys="{{ radio.keys }}">'
    "{{ radio.tag }} <kbd>{{ radio.kbd }}</kbd> {{ radio.choice_label }}</label> {% endfor %}",
    "cells": '{% for radio in field|radios %}<td><label class="opt" data-check="'
    '{{ radio.data.value }}" data-check-keys="{{ radio.keys }}">{{ radio.tag }}<span '
    'class="sr-only">{{ radio.choice_label }}</span></label></td>{% endfor %}',
    "proposal": '{% for radio in field|radios %}<td><label class="opt" data-check="'
    '{{ radio.data.value }}" data-check-keys="{{ radio.keys }}">{{ radio.tag }} <kbd>'
    '{{ radio.kbd }}</kbd><span class="sr-only"> {{ radio.choice_label }} proposal {{ number }}'
    "</span></label></td>{% endfor %}",
}


@pytest.mark.parametrize("kind", list(FORMS))
def test_option_labels_are_written_as_the_template_loops_wrote_them(kind):
    study = Study(kind=kind, name="s", reason_required=False)
    assignment = Assignment(display={"order": ["A", "B"]})
    loops = {name: Template("{% load annotation_tags %}" + loop) for name, loop in LOOPS.items()}
    compared = 0
    for form in _states(FORMS[kind], study, assignment):
        for bound in form:
            if isinstance(bound.field.widget, forms.RadioSelect):
                context = Context({"field": bound, "number": 12})
                assert keyed_options(bound) == loops["keyed"].render(context)
                assert keyed_options(bound, "verdict") == loops["verdict"].render(context)
                assert shift_options(bound) == loops["shift"].render(context)
                assert row_options(bound) == loops["row"].render(context)
                assert check_cells(bound) == loops["cells"].render(context)
                assert proposal_cells(bound, 12) == loops["proposal"].render(context)
                compared += 1
    assert compared  # the comparison really ran


def test_cached_option_markup_is_each_fields_and_each_proposals_own():
    # Written once per combination of what it depends on (per process, whoever asks): two
    # fields, or two proposals' rows, never share it.
    study = Study(kind="proposal_review", name="s", reason_required=False)
    form = FORMS["proposal_review"](
        study=study, assignment=Assignment(display={"order": ["a", "b"]})
    )
    first, second = form[proposal_field(1)], form[proposal_field(2)]
    second_row = proposal_cells(first, 2)
    assert "proposal 2<" in second_row and "proposal 1<" not in second_row
    assert proposal_cells(first, 1) != second_row
    assert check_cells(first) != check_cells(second)
    assert row_options(first) != row_options(second)
    assert f'name="{second.html_name}"' in row_options(second)


def test_option_labels_escape_the_value_and_label():
    class Hostile(forms.Form):
        pick = forms.ChoiceField(
            choices=[('"><script>x()</script>', "<b>label</b>")], widget=forms.RadioSelect
        )

    for markup in (
        keyed_options(Hostile()["pick"], "verdict"),
        shift_options(Hostile()["pick"]),
        row_options(Hostile()["pick"]),
        check_cells(Hostile()["pick"]),
        proposal_cells(Hostile()["pick"], 1),
        defined_options(Hostile()["pick"], [('"><script>x()</script>', "", "<b>", "<b>")], ""),
    ):
        assert "<script>" not in markup and "<b>" not in markup


# The failure-mode options' loop that ``defined_options`` replaced, as it was.
DEFINED_LOOP = (
    "{% for radio in form.label|radios %}{% for value, key, name, definition in view.definitions"
    " %}{% if value == radio.data.value %}\n"
    '    <label class="opt block" data-keys="{{ radio.keys }}">{{ radio.tag }} <kbd>{{ radio.kbd }}'
    "</kbd> <strong>{{ name }}</strong>{% if value == view.suggestion.label %} <span "
    'class="badge">suggested</span>{% endif %}\n'
    '      <span class="muted small definition">{{ definition }}</span></label>\n'
    "    {% endif %}{% endfor %}{% endfor %}"
)


def test_failure_mode_options_are_written_as_the_template_loop_wrote_them():
    study = Study(kind="failure_mode", name="s", reason_required=False)
    loop = Template("{% load annotation_tags %}" + DEFINED_LOOP)
    definitions = [
        (v, k[0], f"Mode <{v}>", f"What {v} means & why") for v, k in FAILURE_MODE_KEYS.items()
    ]
    compared = 0
    for form in _states(FORMS["failure_mode"], study, Assignment(display={})):
        for suggested in ("", definitions[1][0]):
            view = {"definitions": definitions, "suggestion": {"label": suggested}}
            expected = loop.render(Context({"form": form, "view": view}))
            assert defined_options(form["label"], definitions, suggested) == expected
            compared += 1
    # Only the options with a definition are shown.
    assert defined_options(form["label"], definitions[:2], "").count("<label") == 2
    assert compared


def test_the_audit_decisions_verdict_classes_are_its_values_as_they_are():
    # The dialogue audit's decision options are keyed_options(…, "verdict"), which lower-cases
    # the value in the class; the loop it replaced printed the value as it was.
    assert all(value == value.lower() for value in AuditDecision.values)


def test_flag_options_are_written_as_the_template_loop_wrote_them():
    loop = Template(
        '{% for value, label in flag_categories %}<label class="opt"><input type="radio" '
        'name="category" value="{{ value }}" required{% if forloop.first %} autofocus'
        "{% endif %}> {{ label }}</label>{% endfor %}"
    )
    assert flag_options() == loop.render(Context({"flag_categories": FlagCategory.choices}))
    assert flag_options().count('type="radio"') == len(FlagCategory.choices)
