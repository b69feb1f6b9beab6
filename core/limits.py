"""Reading uploaded and imported files in bounded memory: every import (corpus, results, studies,
scores; admin upload and command line) reads its lines here, so one record or one file can
never be larger than the settings allow (``PROACTBENCH_MAX_RECORD_BYTES``,
``PROACTBENCH_MAX_FILE_BYTES``).

A line is read with ``readline(cap + 1)``: a line longer than the cap is refused by its number
before more than ``cap + 1`` bytes of it are held, and the rest of it is skipped in chunks of the
same size, so the lines after it are still checked (every error is listed).
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import IO

from django.conf import settings


def max_record_bytes() -> int:
    return settings.PROACTBENCH_MAX_RECORD_BYTES


def max_file_bytes() -> int:
    return settings.PROACTBENCH_MAX_FILE_BYTES


def max_json_depth() -> int:
    return settings.PROACTBENCH_MAX_JSON_DEPTH


def too_deep(limit: int) -> str:
    return f"nested more than {limit} levels deep (PROACTBENCH_MAX_JSON_DEPTH)"


def json_deeper_than(value: object, limit: int) -> bool:
    """Whether parsed JSON nests lists/objects more than ``limit`` levels. Iterative: the
    value may be nested as deeply as the parser allows, deeper than Python's recursion limit
    leaves room for in the code that walks it next."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children: Iterable[object]
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack += [(child, depth + 1) for child in children if isinstance(child, (dict, list))]
    return False


_JSON_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def line_nested_deeper_than(data: bytes, limit: int) -> int | None:
    """The line of a JSON text where its nesting first goes deeper than ``limit``, or None: for
    naming the line when the parser itself gave up (a RecursionError has no position)."""
    depth = 0
    for token in _JSON_TOKEN.finditer(data):
        char = token.group()[:1]
        if char in (b"[", b"{"):
            depth += 1
            if depth > limit:
                return data.count(b"\n", 0, token.start()) + 1
        elif char in (b"]", b"}"):
            depth -= 1
    return None


def record_too_long(cap: int) -> str:
    return f"record is longer than {cap:,} bytes (PROACTBENCH_MAX_RECORD_BYTES)"


def file_too_large(size: int | None, cap: int) -> str:
    actual = f" ({size:,} bytes)" if size is not None else ""
    return f"file is larger than {cap:,} bytes{actual} (PROACTBENCH_MAX_FILE_BYTES)"


@dataclass(frozen=True)
class Line:
    """One line of a file: its 1-based number and bytes, or ``error`` when it was refused
    (``data`` is then empty)."""

    number: int
    data: bytes
    error: str = ""


def stream_size(stream: IO[bytes]) -> int | None:
    """The stream's total size when it can be told without reading it (a file on disk, an
    upload Django spooled to a temporary file or holds in memory), else None."""
    size = getattr(stream, "size", None)
    if isinstance(size, int):
        return size
    try:
        here = stream.tell()
        end = stream.seek(0, io.SEEK_END)
        stream.seek(here)
    except (AttributeError, OSError, ValueError):
        return None
    return end - here


def bounded_lines(
    stream: IO[bytes], *, record_cap: int | None = None, file_cap: int | None = None
) -> Iterator[Line]:
    """The stream's lines, none longer than ``record_cap`` bytes (newline excluded), the file no
    larger than ``file_cap`` bytes. A file over the cap yields one error (line 1, or the line
    where the cap was crossed when its size could not be told up front) and stops."""
    record_cap = max_record_bytes() if record_cap is None else record_cap
    file_cap = max_file_bytes() if file_cap is None else file_cap
    size = stream_size(stream)
    if size is not None and size > file_cap:
        yield Line(1, b"", file_too_large(size, file_cap))
        return
    read = 0
    number = 0
    while True:
        data = stream.readline(record_cap + 1)
        if not data:
            return
        number += 1
        read += len(data)
        ended = data.endswith(b"\n")
        body = data[:-1] if ended else data
        if body.endswith(b"\r"):
            body = body[:-1]
        if len(body) > record_cap:
            # Skip the rest of this line without holding it.
            while not ended:
                rest = stream.readline(record_cap + 1)
                if not rest:
                    break
                read += len(rest)
                ended = rest.endswith(b"\n")
                if read > file_cap:
                    break
            if read > file_cap:
                yield Line(number, b"", file_too_large(None, file_cap))
                return
            yield Line(number, b"", record_too_long(record_cap))
            continue
        if read > file_cap:
            yield Line(number, b"", file_too_large(None, file_cap))
            return
        yield Line(number, data)


def read_bounded(stream: IO[bytes], *, file_cap: int | None = None) -> bytes:
    """The whole stream (a format that is one document, e.g. a JSON array) if it is no larger
    than ``file_cap``; ``ValueError`` naming the cap otherwise. Never reads more than the cap
    plus one byte."""
    file_cap = max_file_bytes() if file_cap is None else file_cap
    size = stream_size(stream)
    if size is not None and size > file_cap:
        raise ValueError(file_too_large(size, file_cap))
    data = stream.read(file_cap + 1)
    if len(data) > file_cap:
        raise ValueError(file_too_large(None, file_cap))
    return data
