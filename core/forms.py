"""Form fields every app's forms may use, as does the admin of Django's own auth models
(``core/admin.py``)."""

from __future__ import annotations

from django import forms

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
