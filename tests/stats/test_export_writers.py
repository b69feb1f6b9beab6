"""The raw exports' writers: ``csv_chunks`` and ``jsonl_chunks`` take fast paths (a column at a
time, values the formats already write correctly left untouched), so their output is checked
here against the plain definition — every field through ``csv_value`` / ``json_value`` — on
generated rows whose columns hold one type, mixed types, NaN, formula starts and timestamps,
across chunk boundaries."""

from __future__ import annotations

import csv
import io
import json
import math
from datetime import UTC, datetime, timedelta

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stats.exports import CHUNK_ROWS, csv_chunks, csv_value, json_value, jsonl_chunks

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
