"""``field__in`` on integer columns (ids included) with values no integer column can hold.

Django drops out-of-range values from ``exact``, ``gt``, ``lt`` … lookups on integer fields
(``IntegerFieldOverflow``: they match no row), but not from ``in``: there SQLite cannot bind an
integer beyond 64 bits and raises ``OverflowError`` from inside whatever asked — an admin form's
many-to-many field posted ``99999999999999999999`` (a group's permissions, a run's judges) was a
500 instead of "not one of the available choices". This lookup drops such values the same way
(an ``in`` left empty matches nothing), on every database, for every integer field; registered
by ``CoreConfig.ready``.
"""

from __future__ import annotations

from django.db.models import IntegerField
from django.db.models.lookups import In


class IntegerFieldIn(In):
    def process_rhs(self, compiler, connection):
        if self.rhs_is_direct_value():
            low, high = connection.ops.integer_field_range(
                self.lhs.output_field.get_internal_type()
            )
            self.rhs = [
                value
                for value in self.rhs
                if not isinstance(value, int)
                or ((low is None or value >= low) and (high is None or value <= high))
            ]
        return super().process_rhs(compiler, connection)


def register() -> None:
    IntegerField.register_lookup(IntegerFieldIn)
