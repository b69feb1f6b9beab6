"""Form fields every app's forms may use, as does the admin of Django's own auth models
(``core/admin.py``), and ``FastCopyFormMetaclass`` for forms built on every request."""

from __future__ import annotations

import copy
from functools import cache
from typing import Any

from django import forms
from django.forms.forms import DeclarativeFieldsMetaclass
from django.forms.widgets import ChoiceWidget
from django.utils.functional import Promise

# The largest id either database can compare with (a 64-bit integer).
LARGEST_ID = 2**63 - 1


class ModelIdsField(forms.ModelMultipleChoiceField):
    """A multiple choice of rows by id. A value no 64-bit id can be is refused before the
    query (SQLite's ``IN`` lookup raises OverflowError on it), and an id in other digits
    (Arabic-Indic, full-width) is read as the number it writes, as Django's single-choice and
    integer fields read it, rather than refused as an unknown choice."""

    def _check_values(self, value):
        ids = []
        for pk in value:
            try:
                number = int(str(pk))
            except ValueError:
                ids.append(pk)  # not a number at all: the parent names it as an invalid value
                continue
            if not 0 < number <= LARGEST_ID:
                raise forms.ValidationError(
                    self.error_messages["invalid_pk_value"],
                    code="invalid_pk_value",
                    params={"pk": str(pk)[:40]},
                )
            ids.append(str(number))
        # A private hook of Django's ModelMultipleChoiceField (django-stubs omits it).
        return super()._check_values(ids)  # type: ignore[misc]


# --- Copying a form's fields -------------------------------------------------------------------

# The only copy hooks ``_copy_field`` stands in for: Django's own, whose effect it repeats.
_FIELD_DEEPCOPIES = frozenset(vars(cls)["__deepcopy__"] for cls in (forms.Field, forms.ChoiceField))
_WIDGET_DEEPCOPIES = frozenset(vars(cls)["__deepcopy__"] for cls in (forms.Widget, ChoiceWidget))
# Values a choice may be made of that are never changed in place: deepcopy returns them as
# they are (a lazy translation too: its own ``__deepcopy__`` returns itself).
_IMMUTABLE = (str, int, float, bool, type(None), Promise)


class FastCopyFormMetaclass(DeclarativeFieldsMetaclass):
    """A form class whose fields are copied for each form (``BaseForm.__init__`` deep-copies
    ``base_fields``) by ``_copy_field``: the same copies as Django's ``__deepcopy__`` hooks make,
    without ``copy``'s generic protocol walk, which was most of building an answer form, and
    two are built on every answer (the one posted, and the next item's)."""

    def __new__(mcs, name, bases, attrs):
        new_class: Any = super().__new__(mcs, name, bases, attrs)
        new_class.base_fields = _FastCopiedFields(new_class.base_fields)
        return new_class


class _FastCopiedFields(dict):
    def __deepcopy__(self, memo: dict) -> dict:
        return {name: _copy_field(field, memo) for name, field in self.items()}


def _copy_field(field: Any, memo: dict) -> Any:
    """What ``copy.deepcopy(field)`` returns, for a field and widget whose only copy hooks are
    Django's ``Field``, ``ChoiceField``, ``Widget`` and ``ChoiceWidget`` ones (any other field,
    a ``ModelChoiceField`` say, is deep-copied as Django does): a shallow copy of the field
    and of its widget, each with its own ``attrs``, ``error_messages``, ``validators`` and
    choices list. Choices that are (value, label) pairs of immutable values are copied as a
    new list of the same pairs: what ``deepcopy`` makes of the field's, and (but for the pairs'
    identity) what the widget's ``choices`` setter, which normalises them again and was most
    of the cost, makes of the widget's."""
    widget = field.widget
    if not (
        _plain(field.__class__)
        and _plain(widget.__class__)
        and type(field).__deepcopy__ in _FIELD_DEEPCOPIES
        and type(widget).__deepcopy__ in _WIDGET_DEEPCOPIES
    ):
        return copy.deepcopy(field, memo)
    result = _shallow_copy(field)
    memo[id(field)] = result
    result.widget = _shallow_copy(widget)
    memo[id(widget)] = result.widget
    result.widget.attrs = widget.attrs.copy()
    if isinstance(widget, ChoiceWidget):  # its choices are ``_choices`` behind a property
        if _flat(widget._choices):  # type: ignore[attr-defined]
            result.widget._choices = list(widget._choices)  # type: ignore[attr-defined]
        else:
            result.widget.choices = copy.copy(widget.choices)
    result.error_messages = field.error_messages.copy()
    result.validators = field.validators[:]
    if isinstance(field, forms.ChoiceField):
        choices = field._choices  # type: ignore[attr-defined]
        result._choices = list(choices) if _flat(choices) else copy.deepcopy(choices, memo)
    return result


def _flat(choices: object) -> bool:
    """Whether ``choices`` is a list of (value, label) pairs of immutable values."""
    if type(choices) is not list:
        return False
    for choice in choices:
        if not (
            type(choice) is tuple
            and len(choice) == 2
            and isinstance(choice[0], _IMMUTABLE)
            and isinstance(choice[1], _IMMUTABLE)
        ):
            return False
    return True


@cache
def _plain(cls: Any) -> bool:
    """Whether ``copy.copy`` of an instance of ``cls`` is ``_shallow_copy``: no ``__slots__``,
    no ``__new__`` of its own, and none of the hooks ``copy`` and pickling consult."""
    hooks = ("__copy__", "__reduce__", "__reduce_ex__", "__getstate__", "__setstate__")
    return (
        cls.__new__ is object.__new__
        and all(getattr(cls, hook, None) is getattr(object, hook, None) for hook in hooks)
        and not any("__slots__" in vars(base) for base in cls.__mro__)
    )


def _shallow_copy(obj: Any) -> Any:
    new = object.__new__(type(obj))
    new.__dict__.update(obj.__dict__)
    return new
