"""The raw CSV exports on PostgreSQL: the same CSV as ``stats.exports.csv_chunks`` writes, byte
for byte, but formatted and quoted by the database itself (``COPY (SELECT …) TO STDOUT (FORMAT
csv)``) and streamed to the response as it arrives, so that the web process only passes bytes
on (issue #20 part 6: the Python writer spent most of its time building a datetime per row and
writing 24 fields per row through the csv module).

Each selected field is wrapped in a SQL expression (``CsvField``) that yields the text
``csv_value`` would, or NULL where ``csv_value`` writes an empty field:

- text: ``csv_text``'s formula guard (a leading ``'`` before ``= + - @``, a tab or a carriage
  return unless the whole text is a decimal number, ``\\d`` meaning what it means to Python's
  ``re``: any Unicode decimal digit); an empty text is NULL, because COPY writes an empty
  non-NULL text as ``""`` and the csv module writes nothing;
- float: Python's ``repr`` (``1.0``, ``1e-05``, ``inf``, shortest round-trip digits), NaN NULL;
- timestamp: ``datetime.isoformat()`` in UTC (microseconds only when non-zero, ``+00:00``);
- boolean: ``true`` / ``false``; integer: its digits, as COPY writes it.

COPY quotes a field that holds a comma, a quote, CR or LF (quotes doubled), as the csv module
does; it ends rows with LF, so each row (libpq returns COPY data one row at a time) has its
last byte replaced by CRLF — a line break inside a quoted field is left as it is, as the csv
module leaves it. tests/stats/test_export_writers.py holds this writer to the Python one on
every edge case, and with Hypothesis on generated values.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Iterator, Sequence

from django.db import connections, transaction
from django.db.models import F, Func, QuerySet, TextField

from stats.exports import _NUMERIC_TEXT, FORMULA_STARTS, csv_chunks

# Bytes handed to the response at a time: big enough that the per-chunk cost vanishes, small
# enough that memory stays flat.
CHUNK_BYTES = 256 * 1024


def _literal(text: str) -> str:
    """``text`` as a SQL string literal (standard_conforming_strings: a backslash is itself)."""
    if "\x00" in text or "%" in text:  # neither is needed; "%" would be read as a placeholder
        raise ValueError(f"cannot write {text!r} as a literal here")
    return "'" + text.replace("'", "''") + "'"


@functools.cache
def _numeric_text_pattern() -> str:
    """``stats.exports._NUMERIC_TEXT`` as a PostgreSQL regular expression. Python's ``\\d``
    matches every Unicode decimal digit (``str.isdecimal``), PostgreSQL's only what the
    database's locale calls a digit, so the class is spelt out from Python's own tables."""
    digits = [c for c in range(0x110000) if chr(c).isdecimal()]
    ranges, start = [], digits[0]
    for previous, current in zip(digits, digits[1:] + [-1], strict=True):
        if current != previous + 1:
            ranges.append(chr(start) if start == previous else f"{chr(start)}-{chr(previous)}")
            start = current
    # The rest of the pattern reads the same in both (PostgreSQL's AREs have ``(?:``).
    pattern = _NUMERIC_TEXT.pattern.replace(r"\d", "[" + "".join(ranges) + "]")
    return f"^(?:{pattern})$"


def _text_sql(x: str) -> str:
    starts = ", ".join(_literal(s) for s in FORMULA_STARTS)
    pattern = _literal(_numeric_text_pattern())
    # Nested CASE: the regular expression runs only on the rare text that starts a formula.
    return (
        f"NULLIF(CASE WHEN left({x}, 1) IN ({starts}) THEN CASE WHEN {x} ~ {pattern} "
        f"THEN {x} ELSE '''' || {x} END ELSE {x} END, '')"
    )


# The largest float8, exactly (a neighbour above it would not read back: an error, not a float).
_FLOAT_MAX = f"{int(sys.float_info.max)}::numeric"


def _float_sql(x: str) -> str:
    # PostgreSQL writes a float8 with the shortest round-trip digits (extra_float_digits ≥ 1,
    # set on the connection before the COPY), as Python's repr does. They differ in four ways,
    # mended here: an integral value has no ".0" ("1", not "1.0"); the exponent form starts at
    # 1e15, Python's at 1e16 (1e15 ≤ |x| < 1e16 is written out in full); the specials are
    # Infinity and -Infinity (inf, -inf), and NaN is an empty field; and PostgreSQL's Ryu never
    # takes a decimal that lies exactly on the edge of the value's rounding interval, where
    # Python's repr takes it if it is shorter (1e23 is 9.999999999999999e+22 to PostgreSQL).
    # An edge is a short decimal only for |x| ≥ 2**53 (below, it needs ≥ 17 significant
    # digits, and a 17-digit decimal inside the interval is always nearer to x), so only there
    # are the shorter decimals tried: for k = 1…17 digits, the two k-digit neighbours of
    # PostgreSQL's digits, the first that reads back as x (ties to even, as both parse).
    v = f"({x})::float8"
    t = f"{v}::text"
    digits = f"replace(replace(split_part({t}, 'e', 1), '-', ''), '.', '')"
    sign = f"CASE WHEN {v} < 0 THEN '-' ELSE '' END"
    full = (
        f"{sign} || CASE WHEN length({digits}) <= 16 "
        f"THEN rpad({digits}, 16, '0') || '.0' "
        f"ELSE left({digits}, 16) || '.' || substr({digits}, 17) END"
    )
    a = f"abs({t}::numeric)"
    unit = f"10::numeric ^ (floor(log({a})) - k + 1)"
    shortest = (
        f"(SELECT c FROM generate_series(1, 17) AS k, LATERAL (VALUES "  # noqa: S608
        f"(trunc({a} / {unit}) * {unit}), (trunc({a} / {unit}) * {unit} + {unit})) AS d(c) "
        f"WHERE CASE WHEN c <= {_FLOAT_MAX} THEN c::float8 = abs({v}) END "
        f"ORDER BY k, abs(c - {a}) LIMIT 1)"
    )
    # |x| ≥ 2**53: fixed "d….0" below 1e16, else "d.ddde+NN" (the exponent has 2+ digits).
    big = (
        f"(SELECT {sign} || CASE WHEN c < 1e16 THEN trim_scale(c)::text || '.0' "  # noqa: S608
        f"ELSE left(m, 1) || CASE WHEN length(m) > 1 THEN '.' || substr(m, 2) ELSE '' END "
        f"|| 'e+' || (length(trunc(c)::text) - 1)::text END "
        f"FROM (SELECT c, rtrim(trunc(c)::text, '0') AS m "
        f"FROM (SELECT {shortest} AS c OFFSET 0) AS s) AS f)"
    )
    return (
        f"CASE WHEN {v} = 'NaN'::float8 THEN NULL "
        f"WHEN {v} = 'Infinity'::float8 THEN 'inf' "
        f"WHEN {v} = '-Infinity'::float8 THEN '-inf' "
        f"WHEN abs({v}) < '1e15'::float8 THEN CASE WHEN {v} = trunc({v}) THEN {t} || '.0' "
        f"ELSE {t} END "
        f"WHEN abs({v}) < '9007199254740992'::float8 THEN {full} "
        f"ELSE {big} END"
    )


def _timestamp_sql(x: str) -> str:
    # isoformat() leaves out the microseconds when they are 0; ".000000+" can only be them.
    return (
        f"replace(to_char(({x}) AT TIME ZONE 'UTC', "
        f"'YYYY-MM-DD\"T\"HH24:MI:SS.US\"+00:00\"'), '.000000+', '+')"
    )


def _boolean_sql(x: str) -> str:
    return f"CASE WHEN {x} THEN 'true' WHEN NOT {x} THEN 'false' END"


def _integer_sql(x: str) -> str:
    return f"({x})::text"


_FIELD_SQL = {
    "CharField": _text_sql,
    "TextField": _text_sql,
    "SlugField": _text_sql,
    "FloatField": _float_sql,
    "DateTimeField": _timestamp_sql,
    "BooleanField": _boolean_sql,
    **{
        kind: _integer_sql
        for kind in (
            "AutoField",
            "BigAutoField",
            "SmallAutoField",
            "IntegerField",
            "BigIntegerField",
            "SmallIntegerField",
            "PositiveIntegerField",
            "PositiveBigIntegerField",
            "PositiveSmallIntegerField",
        )
    },
}


class CsvField(Func):
    """One field as the text ``csv_value`` writes for it (NULL: an empty field), in SQL."""

    output_field = TextField()

    def as_sql(self, compiler, connection, function=None, template=None, arg_joiner=None, **extra):
        (source,) = self.get_source_expressions()
        kind = source.output_field.get_internal_type()
        if kind not in _FIELD_SQL:
            raise TypeError(f"no COPY form for a {kind} column (only {', '.join(_FIELD_SQL)})")
        sql, params = compiler.compile(source)
        # The field's SQL appears several times in the expression, so do its parameters.
        placeholder = "\x00"
        text = _FIELD_SQL[kind](placeholder)
        return text.replace(placeholder, f"({sql})"), tuple(params) * text.count(placeholder)


def copy_csv_chunks(
    *, header: Sequence[str], queryset: QuerySet, fields: Sequence[str]
) -> Iterator[bytes]:
    """The CSV of ``queryset``'s ``fields`` under ``header``, as ``csv_chunks`` writes it, in
    UTF-8 chunks of about ``CHUNK_BYTES``. PostgreSQL only. The COPY holds the connection until
    the last chunk is read; a stream abandoned part way (closed) cancels it."""
    if len(header) != len(fields):
        raise ValueError(f"{len(header)} columns but {len(fields)} fields")
    connection = connections[queryset.db]
    if connection.vendor != "postgresql":
        raise ValueError(f"COPY needs PostgreSQL, not {connection.vendor}")
    values = queryset.values_list(*(CsvField(F(name)) for name in fields))
    sql, params = values.query.sql_with_params()
    yield "".join(csv_chunks(list(header), [])).encode("utf-8")
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('extra_float_digits'), current_setting('jit')")
        previous = cursor.fetchone()
        # Shortest round-trip floats (the default); and no JIT: the float expression's planned
        # cost sets it off, and compiling took longer than the whole COPY runs without it.
        cursor.execute("SET extra_float_digits = 1; SET jit = off")
        try:
            # A stream abandoned part way cancels the COPY, which fails the transaction it runs
            # in: in its own transaction, or a savepoint inside the caller's, only that is
            # rolled back and the connection stays usable (the settings are restored after).
            with (
                transaction.atomic(using=queryset.db),
                cursor.cursor.copy(f"COPY ({sql}) TO STDOUT (FORMAT csv)", params) as copy,
            ):
                rows: list[memoryview | bytes] = []
                size = 0
                for row in copy:
                    # One row per message (libpq's PQgetCopyData), ending with COPY's LF.
                    rows.append(row[:-1])
                    size += len(row)
                    if size >= CHUNK_BYTES:
                        yield b"\r\n".join(rows) + b"\r\n"
                        rows, size = [], 0
                if rows:
                    yield b"\r\n".join(rows) + b"\r\n"
        finally:
            cursor.execute(
                "SELECT set_config('extra_float_digits', %s, false), set_config('jit', %s, false)",
                previous,
            )
