"""``FastCopyFormMetaclass``: each form's fields are copied as Django's ``__deepcopy__`` hooks
copy them (the answer forms are built twice per answer, and Django's copy was most of it)."""

import copy

from django import forms
from django.contrib.auth.models import User
from django.utils.translation import gettext_lazy

from annotation import kinds
from core.forms import FastCopyFormMetaclass


class Assorted(forms.Form, metaclass=FastCopyFormMetaclass):
    """Fields of every shape the copy meets or hands back to Django: flat choices of text and
    numbers, lazy labels, option groups, a model choice, multiple choices, plain fields."""

    text = forms.CharField(max_length=10, required=False)
    number = forms.IntegerField(min_value=0, widget=forms.HiddenInput)
    flat = forms.ChoiceField(choices=[("a", "A"), ("b", "B")], widget=forms.RadioSelect)
    typed = forms.TypedChoiceField(choices=[(1, "1"), (2, "2")], coerce=int)
    lazy = forms.ChoiceField(choices=[("x", gettext_lazy("Yes"))], widget=forms.RadioSelect)
    grouped = forms.ChoiceField(choices=[("Group", [("g1", "G1"), ("g2", "G2")]), ("c", "C")])
    several = forms.MultipleChoiceField(
        choices=[("p", "P"), ("q", "Q")], widget=forms.CheckboxSelectMultiple
    )
    user = forms.ModelChoiceField(queryset=User.objects.all())


FORM_CLASSES = [Assorted, *(kind.answer_form for kind in kinds.all_kinds())]


def _state(field: forms.Field) -> tuple:
    """A field's attributes and its widget's; a model choice's queryset and choices (new
    objects in every copy, Django's too) by their query."""
    attributes = dict(vars(field))
    widget = dict(vars(attributes.pop("widget")))
    if isinstance(field, forms.ModelChoiceField):
        attributes["_queryset"] = str(attributes["_queryset"].query)
        widget["_choices"] = str(widget["_choices"].queryset.query)
    return type(field), attributes, type(field.widget), widget


def test_fields_are_copied_as_django_copies_them():
    for form_class in FORM_CLASSES:
        base = dict(form_class.base_fields)
        ours = copy.deepcopy(form_class.base_fields)
        djangos = copy.deepcopy(base)
        assert type(ours) is dict and list(ours) == list(base)
        for name, field in base.items():
            assert _state(ours[name]) == _state(djangos[name]), (form_class, name)


def test_every_copy_has_its_own_field_widget_and_lists():
    for form_class in FORM_CLASSES:
        for name, field in form_class.base_fields.items():
            copied = copy.deepcopy(form_class.base_fields)[name]
            assert copied is not field and copied.widget is not field.widget, name
            assert copied.error_messages is not field.error_messages
            assert copied.validators is not field.validators
            assert copied.widget.attrs is not field.widget.attrs
            if isinstance(field, forms.ChoiceField):
                assert copied.choices is not field.choices
                assert copied.widget.choices is not field.widget.choices


def test_a_change_to_one_forms_fields_reaches_no_other_form():
    first = Assorted()
    first.fields["text"].required = True
    first.fields["text"].error_messages["required"] = "changed"
    first.fields["text"].widget.attrs["class"] = "changed"
    first.fields["flat"].choices = [("z", "Z")]
    second = Assorted()
    assert second.fields["text"].required is False
    assert second.fields["text"].error_messages["required"] == "This field is required."
    assert "class" not in second.fields["text"].widget.attrs
    assert second.fields["flat"].choices == [("a", "A"), ("b", "B")]
    assert [str(option.data["value"]) for option in second["flat"]] == ["a", "b"]
