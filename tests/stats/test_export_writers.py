"""The raw exports' writers: ``csv_chunks`` and ``jsonl_chunks`` take fast paths (a column at a
time, values the formats already write correctly left untouched), so their output is checked
here against the plain definition — every field through ``csv_value`` / ``json_value`` — on
generated rows whose columns hold one type, mixed types, NaN, formula starts and timestamps,
across chunk boundaries. On PostgreSQL the judgments export is written by the database
(``stats.csv_copy``): it is held here to the same definition, byte for byte, on planted edge
cases and on generated values."""

from __future__ import annotations

import csv
import io
import json
import math
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from django.db import connection
from django.db.models import F
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmark.models import EvaluationRun, Judgment, ModelEndpoint
from stats.csv_copy import CHUNK_BYTES, CsvField, copy_csv_chunks
from stats.exports import (
    CHUNK_ROWS,
    RAW_EXPORTS,
    csv_chunks,
    csv_value,
    json_value,
    jsonl_chunks,
)
from tests.annotation.conftest import build_run

FORMULA_TEXT = st.sampled_from(["=1+2", "+3", "-0.25", "-x", "@SUM(A1)", "\tx", "\rx", "-1e-05"])
TEXT = st.one_of(st.text(max_size=12), FORMULA_TEXT)
INSTANT = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
)
FLOAT = st.floats(allow_nan=True, allow_infinity=True)
VALUE = st.one_of(
    st.none(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.booleans(),
    FLOAT,
    TEXT,
    INSTANT,
    FLOAT.map(np.float64),
)
# A column either holds one kind of value (with or without NULLs), as a database column does,
# or anything at all.
COLUMN_KIND = st.sampled_from(
    [
        st.integers(min_value=0, max_value=10**6),
        TEXT,
        st.text(alphabet="abc xyz", max_size=8),
        FLOAT,
        st.floats(allow_nan=False),
        INSTANT,
        st.booleans(),
        VALUE,
    ]
)


@st.composite
def tables(draw, max_rows: int = 40):
    kinds = draw(st.lists(COLUMN_KIND, min_size=1, max_size=6))
    nullable = draw(st.lists(st.booleans(), min_size=len(kinds), max_size=len(kinds)))
    rows = draw(
        st.lists(
            st.tuples(
                *(
                    st.one_of(st.none(), kind) if null else kind
                    for kind, null in zip(kinds, nullable, strict=True)
                )
            ),
            max_size=max_rows,
        )
    )
    return [f"c{i}" for i in range(len(kinds))], rows


def reference_csv(header, rows) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow(header)
    writer.writerows([csv_value(v) for v in row] for row in rows)
    return buffer.getvalue()


def reference_jsonl(header, rows) -> str:
    return "".join(
        json.dumps({k: json_value(v) for k, v in zip(header, row, strict=True)}, ensure_ascii=False)
        + "\n"
        for row in rows
    )


@settings(max_examples=300, deadline=None)
@given(tables())
def test_csv_is_every_field_through_csv_value(table):
    header, rows = table
    assert "".join(csv_chunks(header, rows)) == reference_csv(header, rows)


@settings(max_examples=300, deadline=None)
@given(tables())
def test_jsonl_is_every_field_through_json_value(table):
    header, rows = table
    assert "".join(jsonl_chunks(header, rows)) == reference_jsonl(header, rows)


def test_a_formula_or_nan_in_one_chunk_does_not_leak_into_the_next():
    # Chunk 1's columns are clean, chunk 2 holds one formula text and one NaN: each chunk's path
    # is its own, and the second is neutralised while the first passes untouched.
    start = datetime(2026, 1, 1, tzinfo=UTC)
    rows = [(i, f"text {i}", i / 7, start + timedelta(seconds=i)) for i in range(CHUNK_ROWS)]
    rows += [(CHUNK_ROWS, "=HYPERLINK(1)", math.nan, None)]
    rows += [(i, "plain", 0.5, start) for i in range(CHUNK_ROWS + 1, CHUNK_ROWS * 2 + 3)]
    header = ["id", "text", "share", "at"]
    text = "".join(csv_chunks(header, rows))
    assert text == reference_csv(header, rows)
    assert "\r\n500,'=HYPERLINK(1),,\r\n" in text
    assert f"\r\n0,text 0,0.0,{start.isoformat()}\r\n" in text


def test_rows_without_fields_and_no_rows():
    assert "".join(csv_chunks([], [(), ()])) == reference_csv([], [(), ()])
    assert "".join(csv_chunks(["a"], [])) == "a\r\n"
    assert "".join(jsonl_chunks(["a"], [])) == ""


# --- PostgreSQL's COPY writer (stats/csv_copy.py) ---------------------------------------------
# The judgments export on PostgreSQL is written by the database; it must be the Python writer's
# file byte for byte. Values are planted in a run's judgments and read back both ways.

needs_postgresql = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="COPY is PostgreSQL's (SQLite keeps the writer)"
)

EDGE_TEXTS = [
    "",
    "plain",
    "a, comma",
    'a "quote"',
    "line\nbreak",
    "crlf\r\nin the middle",
    "\\.",
    "\\",
    "=1+2",
    "+3",
    "-0.25",
    "-x",
    "@SUM(A1)",
    "\tx",
    "\rx",
    "-1e-05",
    "+.5E+3",
    "-\u0663",  # an Arabic-Indic digit: a number to Python's re, so left as it is
    "-\u0663x",
    "-\U0001d7ce",  # MATHEMATICAL BOLD DIGIT ZERO
    "-1.",
    "-.",
    "- 1",
    "ünïcödé ☕ \u2028 \x7f",
    " leading space",
    "'quoted'",
]
EDGE_FLOATS = [
    None,
    math.nan,
    math.inf,
    -math.inf,
    0.0,
    -0.0,
    1.0,
    -3.0,
    0.5,
    0.1,
    1 / 3,
    1e-4,
    1e-05,
    1.5e-07,
    5e-324,
    2.2250738585072014e-308,
    1.7976931348623157e308,
    123456789012345.67,
    999999999999999.9,
    1e15,
    -1e15,
    1e15 + 0.125,
    1234567890123456.0,
    9999999999999998.0,
    1e16,
    1.5e16,
    1e22,
    1e23,
]
EDGE_INSTANTS = [
    datetime(2026, 1, 1, tzinfo=UTC),
    datetime(2026, 12, 6, 18, 13, 28, 123456, tzinfo=UTC),
    datetime(2026, 12, 6, 18, 13, 28, 1, tzinfo=UTC),
    datetime(2026, 12, 6, 18, 13, 28, 100000, tzinfo=UTC),
    datetime(5, 3, 4, 5, 6, 7, tzinfo=UTC),
    datetime(999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
    datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC),
]


def _plant(judgments, texts, floats, instants) -> None:
    """Write the values into the judgments, cycling each list (one judgment per value at
    least); the run's and a model's names get formula text too."""
    for n, judgment in enumerate(judgments):
        judgment.rationale = texts[n % len(texts)]
        judgment.evidence = texts[(n + 1) % len(texts)]
        judgment.error = texts[(n + 2) % len(texts)]
        judgment.evidence_found_share = floats[n % len(floats)]
        judgment.created_at = instants[n % len(instants)]
    Judgment.objects.bulk_update(
        judgments, ["rationale", "evidence", "error", "evidence_found_share", "created_at"]
    )


def _both_ways(filters) -> tuple[bytes, bytes]:
    export = RAW_EXPORTS["judgments"]
    queryset, fields = export.query(filters)
    copied = b"".join(copy_csv_chunks(header=export.header, queryset=queryset, fields=fields))
    written = "".join(csv_chunks(export.header, export.rows(filters))).encode("utf-8")
    # The writer's own reference: every field through csv_value.
    assert written == reference_csv(export.header, list(export.rows(filters))).encode("utf-8")
    return copied, written


@needs_postgresql
@pytest.mark.django_db
def test_copy_writes_the_writers_file_byte_for_byte_on_every_edge_case():
    run = build_run()
    EvaluationRun.objects.filter(pk=run.pk).update(name='=run, "named"\n')
    ModelEndpoint.objects.filter(pk=run.endpoints.first().pk).update(display_name="-Model")
    judgments = list(Judgment.objects.order_by("id"))
    assert len(judgments) >= max(len(EDGE_TEXTS), len(EDGE_FLOATS), len(EDGE_INSTANTS))
    _plant(judgments, EDGE_TEXTS, EDGE_FLOATS, EDGE_INSTANTS)
    copied, written = _both_ways({})
    assert copied == written
    assert _both_ways({"run": run.pk})[0] == copied
    text = copied.decode("utf-8")
    # The edge cases are really in the file, written as csv_value writes them.
    for expected in (
        ",'=1+2,",
        ",-0.25,",
        ',"line\nbreak",',
        ',"a ""quote""",',
        ",\\.,",
        ",-\u0663,",
        ",'-\u0663x,",
        ",1000000000000000.0,",
        ",1000000000000000.1,",  # 1e15 + 0.125: its shortest digits
        ",1e+16,",
        ",5e-324,",
        ",inf,",
        ",2026-12-06T18:13:28.123456+00:00\r\n",
        ",2026-01-01T00:00:00+00:00\r\n",
        ",0005-03-04T05:06:07+00:00\r\n",
        ',"\'=run, ""named""\n",',
    ):
        assert expected in text, expected
    assert text.count("\r\n") == len(judgments) + 1 + text.count("crlf\r\nin")


TEXT_VALUE = st.one_of(
    # PostgreSQL text holds no NUL, UTF-8 no lone surrogate.
    st.text(
        alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), max_size=12
    ),
    st.sampled_from(EDGE_TEXTS),
    st.builds(
        lambda sign, digits: sign + digits,
        st.sampled_from(["-", "+", "=", "@", ""]),
        st.text(alphabet=st.characters(categories=["Nd"]) | st.sampled_from(".eE+-"), max_size=6),
    ),
)
FLOAT_VALUE = st.one_of(st.none(), st.floats(), st.sampled_from(EDGE_FLOATS))
INSTANT_VALUE = st.datetimes(
    min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31), timezones=st.just(UTC)
)


@needs_postgresql
@pytest.mark.django_db
def test_copy_is_every_field_through_csv_value_on_generated_values():
    run = build_run(dialogues=1)
    judgments = list(Judgment.objects.filter(unit__run=run).order_by("id"))

    @settings(max_examples=150, deadline=None)
    @given(
        st.lists(TEXT_VALUE, min_size=1, max_size=len(judgments)),
        st.lists(FLOAT_VALUE, min_size=1, max_size=len(judgments)),
        st.lists(INSTANT_VALUE, min_size=1, max_size=len(judgments)),
    )
    def check(texts, floats, instants):
        _plant(judgments, texts, floats, instants)
        copied, written = _both_ways({"run": run.pk})
        assert copied == written

    check()


def _abandon_a_copy_and_read_again():
    build_run(dialogues=1)
    # Enough text that the COPY is still sending when the reader walks away.
    Judgment.objects.update(rationale="x" * 1_000_000)
    export = RAW_EXPORTS["judgments"]
    queryset, fields = export.query({})
    chunks = copy_csv_chunks(header=export.header, queryset=queryset, fields=fields)
    assert next(chunks).startswith(b"judgment_id,")
    assert len(next(chunks)) >= CHUNK_BYTES
    chunks.close()
    assert Judgment.objects.count() > 0


@needs_postgresql
@pytest.mark.django_db
def test_an_abandoned_copy_leaves_the_connection_usable_inside_a_transaction():
    # The cancelled COPY fails only its savepoint, not the caller's transaction.
    _abandon_a_copy_and_read_again()


@needs_postgresql
@pytest.mark.django_db(transaction=True)
def test_an_abandoned_copy_leaves_the_connection_usable_in_autocommit():
    # As the web server streams it: no transaction around the view's response.
    _abandon_a_copy_and_read_again()


def test_copy_refuses_a_column_it_has_no_form_for(db):
    from annotation.models import Answer

    with pytest.raises(TypeError, match="no COPY form for a JSONField"):
        str(Answer.objects.values_list(CsvField(F("details"))).query)
