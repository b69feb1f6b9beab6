"""Bounded reading (core.limits): a line over the cap is refused by its number without being
held, the lines after it are still read, and a file over the cap is refused."""

import io

import pytest

from core.limits import bounded_lines, read_bounded


class _Watched(io.BytesIO):
    """A stream that records the most bytes one read handed out, and hides its size (as a
    pipe would), so the reader cannot refuse up front."""

    largest = 0

    def readline(self, size=-1):
        data = super().readline(size)
        self.largest = max(self.largest, len(data))
        return data

    def seek(self, *args):
        raise OSError("not seekable")


def test_a_long_line_is_refused_by_number_and_never_held_whole():
    stream = _Watched(b'{"a": 1}\n' + b"x" * 5_000_000 + b"\n" + b'{"b": 2}\r\n' + b"tail")
    lines = list(bounded_lines(stream, record_cap=1_000, file_cap=10_000_000))
    assert [(line.number, line.data, line.error) for line in lines] == [
        (1, b'{"a": 1}\n', ""),
        (2, b"", "record is longer than 1,000 bytes (PROACTBENCH_MAX_RECORD_BYTES)"),
        (3, b'{"b": 2}\r\n', ""),
        (4, b"tail", ""),
    ]
    assert stream.largest <= 1_001


def test_a_line_of_exactly_the_cap_is_accepted():
    lines = list(bounded_lines(io.BytesIO(b"y" * 10 + b"\n"), record_cap=10, file_cap=100))
    assert [line.error for line in lines] == [""]


def test_a_file_over_the_cap_is_refused_up_front_or_where_it_crosses_it():
    sized = list(bounded_lines(io.BytesIO(b"a\n" * 100), record_cap=10, file_cap=50))
    assert [(line.number, line.error) for line in sized] == [
        (1, "file is larger than 50 bytes (200 bytes) (PROACTBENCH_MAX_FILE_BYTES)")
    ]
    unsized = list(bounded_lines(_Watched(b"a\n" * 100), record_cap=10, file_cap=50))
    assert unsized[-1].number == 26 and "file is larger than 50 bytes" in unsized[-1].error
    assert len(unsized) == 26


def test_a_whole_document_over_the_cap_is_refused():
    assert read_bounded(io.BytesIO(b"[1]"), file_cap=3) == b"[1]"
    with pytest.raises(ValueError, match="file is larger than 3 bytes"):
        read_bounded(_Watched(b"[1, 2]"), file_cap=3)
