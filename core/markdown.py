"""Corpus and model texts as Markdown, safely, beside their raw text (issue #19).

Most model replies are Markdown, and so are many turns, rubrics and judges' rationales. Every
such text is shown twice in the page (``readable``): rendered, and raw as it was written (the
"show raw" switch, ``components/raw_switch.html``, shows one or the other; CSS only).

Rendering, in two independent layers, either of which alone keeps the page safe:

1. **markdown-it-py**, CommonMark with tables and strikethrough, with raw HTML *disabled*: a
   ``<script>`` in the text is text. Links are kept only for ``http``, ``https`` and ``mailto``
   (``_allowed_link``: ``javascript:``, ``data:``, relative and other URLs stay the literal
   Markdown). An image is never loaded — a tracking pixel would tell its owner who reads the
   reply (an annotator, at a time) — but shown as a link to it, with its alt text.
   Headings move down three levels (``#`` → ``<h4>``): a reply sits under the page's own h1–h3.
2. **nh3** (ammonia) with an allow-list (``ALLOWED_TAGS``, ``href`` on links, ``start`` on
   lists): whatever the first layer let through that is not on the list goes. Links get
   ``rel="noopener noreferrer nofollow"`` and open in a new tab (an annotator does not lose the
   item); relative URLs are dropped.

Judges' evidence marks (``annotation/highlight.py``) are located in the *source* text, as
grading does, so they survive rendering by alignment rather than by markers written into the
Markdown (a marker changes how Markdown parses: a list item, an emphasis run). ``mark_html``
walks the rendered text nodes in order and finds each in the source just after the previous one
(rendered text is the source minus its syntax, in the same order); every character found takes
the marks of its source position, one not found (an entity, an escape) those of the source
position the walk has reached.

A text longer than ``PROACTBENCH_DISPLAY_MAX_CHARS`` is cut (core/long_text.py) and each side
of the cut rendered on its own; a fenced code block open at the cut is opened again after it.
Rendering a text up to the display cap is cached by the text (``_render``), and so is its
``readable`` markup when unmarked (``_readable_short``): the workspace shows the same
conversation and replies at request after request. Both caches are per process; a text's
rendering is also shared between processes (core/render_cache.py), so that each long reply is
rendered once, not once in every web worker.
"""

from __future__ import annotations

import html as html_lib
import re
from collections.abc import Iterable, Iterator, Sequence
from functools import lru_cache
from typing import Any

import nh3
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml

from core import render_cache
from core.long_text import cut_text, display_cut, max_display_chars

# (start, end, css classes) over the source text: consecutive pieces from 0 to its end, each
# with the marks that cover it ("" for none).
Piece = tuple[int, int, str]

LINK_SCHEMES = frozenset({"http", "https", "mailto"})
HEADING_SHIFT = 3
ALLOWED_TAGS = frozenset(
    {
        "p", "br", "hr", "h4", "h5", "h6", "strong", "em", "s", "code", "pre", "blockquote",
        "ul", "ol", "li", "a", "span", "table", "thead", "tbody", "tr", "th", "td",
    }
)  # fmt: skip
# How far past the previous text node the next one is looked for: the syntax between two
# rendered text nodes (a link's URL, a fence line) is rarely longer.
_ALIGN_WINDOW = 4096
_TAG = re.compile(r"(<[^>]*>)")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")

_CLEANER = nh3.Cleaner(
    tags=set(ALLOWED_TAGS),
    attributes={"*": set(), "a": {"href"}, "ol": {"start"}},
    allowed_classes={"a": {"md-image"}, "span": {"md-image"}},
    link_rel="noopener noreferrer nofollow",
    url_schemes=set(LINK_SCHEMES),
    url_relative="deny",
    # A code block can be long: it scrolls, so it takes the keyboard's focus too.
    set_tag_attribute_values={"a": {"target": "_blank"}, "pre": {"tabindex": "0"}},
)


def _allowed_link(url: str) -> bool:
    scheme, colon, _ = url.strip().partition(":")
    return bool(colon) and scheme.lower() in LINK_SCHEMES


def _shift_headings(state: Any) -> None:
    for token in state.tokens:
        if token.type in ("heading_open", "heading_close"):
            token.tag = f"h{min(int(token.tag[1]) + HEADING_SHIFT, 6)}"


def _image(renderer: Any, tokens: list, idx: int, options: Any, env: Any) -> str:
    """An image as a link to it, named by its alt text (never an ``<img>``)."""
    token = tokens[idx]
    src = token.attrGet("src") or ""
    alt = renderer.renderInlineAsText(token.children or [], options, env)
    return f'<a class="md-image" href="{escapeHtml(src)}">{escapeHtml(alt or src)}</a>'


def _parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable(["table", "strikethrough"])
    md.validateLink = _allowed_link  # type: ignore[method-assign]
    md.core.ruler.push("shift_headings", _shift_headings)
    md.add_render_rule("image", _image)
    return md


_MD = _parser()


def render_markdown(text: str) -> str:
    """``text`` as sanitised HTML."""
    if len(text) <= max_display_chars():
        return _render(text)
    return _render_here(text)


@lru_cache(maxsize=1024)
def _render(text: str) -> str:
    # Not yet rendered in this process: perhaps in another one (core/render_cache.py).
    return render_cache.rendered(text, _render_here)


def _render_here(text: str) -> str:
    return _CLEANER.clean(_MD.render(text))


# --- Marks --------------------------------------------------------------------------------------


def mark_html(rendered: str, source: str, pieces: Iterable[Piece]) -> str:
    """``rendered`` (``render_markdown(source)``) with each piece's classes marked on the
    rendered text that comes from it: ``<mark class="evidence …">`` around the text of a text
    node, so marks never straddle a tag. Time linear in the text (each text node is looked for
    within ``_ALIGN_WINDOW`` of the previous one); memory too (the pieces are read once, in
    order, as the walk moves forward)."""
    remaining = iter(pieces)
    current = next(remaining, (0, len(source), ""))
    out: list[str] = []
    at = 0  # the source position the walk has reached

    def classes_at(position: int) -> str:
        nonlocal current
        while position >= current[1]:
            following = next(remaining, None)
            if following is None:
                break
            current = following
        return current[2]

    for token in _TAG.split(rendered):
        if not token or token.startswith("<") or not token.strip():
            out.append(token)  # a tag, or the white space between two blocks
            continue
        text = html_lib.unescape(token)
        node = _Marker(text, out)
        found = source.find(text, at, at + len(text) + _ALIGN_WINDOW)
        if found >= 0:
            position, end = found, found + len(text)
            while position < end:
                classes = classes_at(position)
                stop = max(position + 1, min(end, current[1]))
                node.add(stop - position, classes)
                position = stop
            at = end
        else:  # an entity, an escape, a list's indentation: character by character
            for char in text:
                if char.isspace():  # the source's own white space here, if it has some
                    found = at if at < len(source) and source[at].isspace() else -1
                else:
                    found = source.find(char, at, at + _ALIGN_WINDOW)
                if found >= 0:
                    node.add(1, classes_at(found))
                    at = found + 1
                else:
                    node.add(1, classes_at(min(at, len(source) - 1)))
        node.flush()
    return "".join(out)


class _Marker:
    """Writes one text node's characters to ``out`` as runs of alike classes."""

    def __init__(self, text: str, out: list[str]):
        self.text, self.out = text, out
        self.start = self.end = 0
        self.classes = ""

    def add(self, length: int, classes: str) -> None:
        if classes != self.classes and self.end > self.start:
            self.flush()
        self.classes = classes
        self.end += length

    def flush(self) -> None:
        self.out.append(marked_piece(self.text[self.start : self.end], self.classes))
        self.start = self.end


def marked_piece(text: str, classes: str) -> str:
    """``text`` escaped, in a mark with ``classes`` when it has any."""
    if not text:
        return ""
    if classes:
        return f'<mark class="evidence {classes}">{html_lib.escape(text)}</mark>'
    return html_lib.escape(text)


def _marked_source(text: str, pieces: Iterable[Piece]) -> str:
    """The raw text escaped, with its marks."""
    return "".join(marked_piece(text[a:b], classes) for a, b, classes in pieces)


def _rendered(text: str, pieces: Sequence[Piece], start: int = 0, end: int | None = None) -> str:
    """``text`` rendered, marked with the pieces of the source range it was cut from."""
    end = len(text) + start if end is None else end
    html = render_markdown(text)
    if not any(classes for _, _, classes in pieces):
        return html
    return mark_html(html, text, _clip(pieces, start, end, len(text) - (end - start)))


# --- A text as pages show it --------------------------------------------------------------------


def _clip(pieces: Sequence[Piece], start: int, end: int, offset: int = 0) -> Iterator[Piece]:
    """The pieces within [start, end), moved so that ``start`` is at ``offset`` (the text
    before ``offset`` belongs to no piece: it has no marks)."""
    if offset:
        yield (0, offset, "")
    for a, b, classes in pieces:
        if a < end and b > start:
            yield (max(a, start) - start + offset, min(b, end) - start + offset, classes)


def open_fence(text: str) -> str:
    """The line that opened a fenced code block still open at the end of ``text`` (with its
    newline), or ""."""
    opening: tuple[str, str] | None = None
    for line in text.splitlines():
        match = _FENCE.match(line)
        if not match:
            continue
        fence, info = match.groups()
        if opening is None:
            if not (fence[0] == "`" and "`" in info):
                opening = (fence, line)
        elif fence[0] == opening[0][0] and len(fence) >= len(opening[0]) and not info.strip():
            opening = None
    return opening[1] + "\n" if opening else ""


def readable(
    text: str,
    *,
    full_url: str = "",
    pieces: Sequence[Piece] | None = None,
    cut: int | None = None,
    whole: bool = False,
) -> SafeString:
    """``text`` as a page shows it: rendered (``.md``) and raw (``.md-raw``), each with the
    pieces' marks, cut at ``cut`` (by default ``display_cut``; never when ``whole``) with
    "show all". With a ``full_url`` the rest is not in the page: "show all" swaps the whole
    block for what the URL serves (the whole text's ``readable``)."""
    if pieces is None and cut is None and len(text) <= max_display_chars():
        # Unmarked and short enough never to be cut: the markup depends on the text alone
        # (not on full_url or whole, which only matter at a cut), so it is kept by the text.
        return _readable_short(text)
    return _readable(text, full_url=full_url, pieces=pieces, cut=cut, whole=whole)


@lru_cache(maxsize=1024)
def _readable_short(text: str) -> SafeString:
    """An unmarked text no longer than the display cap, as ``readable`` writes it. Kept per
    process like ``_render``: a workspace shows the same texts (turns, replies, rubrics) at
    request after request, and writing them again — the raw copy escaped, the wrapping — was
    up to a tenth of a workspace's render time (thirty texts in a dialogue audit's). Keyed by the
    content only, so sharing it between items, studies and annotators shows no one anything
    that is not in the text itself."""
    return _readable(text)


def _readable(
    text: str,
    *,
    full_url: str = "",
    pieces: Sequence[Piece] | None = None,
    cut: int | None = None,
    whole: bool = False,
) -> SafeString:
    pieces = pieces if pieces is not None else [(0, len(text), "")]
    if cut is None and not whole:
        cut = display_cut(text)
    if cut is None:
        rendered = _rendered(text, pieces)
        raw = _marked_source(text, pieces)
    else:
        target = "closest .md-text"
        head, tail = text[:cut], text[cut:]
        more = len(text) - cut
        rest_html = raw_rest = ""
        if not full_url:  # the rest is folded into the page
            # A code block open at the cut opens again after it (its fence line has no marks).
            rest_html = _rendered(open_fence(head) + tail, pieces, cut, len(text))
            raw_rest = _marked_source(tail, _clip(pieces, cut, len(text)))
        rendered = cut_text(
            mark_safe(_rendered(head, pieces, 0, cut)),  # noqa: S308 - sanitised, escaped
            mark_safe(rest_html),  # noqa: S308 - sanitised and escaped
            more,
            full_url=full_url,
            block=True,
            target=target,
        )
        raw = cut_text(
            mark_safe(_marked_source(head, _clip(pieces, 0, cut))),  # noqa: S308 - escaped
            mark_safe(raw_rest),  # noqa: S308 - escaped
            more,
            full_url=full_url,
            target=target,
        )
    return format_html(
        '<div class="md-text"><div class="md">{}</div><div class="md-raw">{}</div></div>',
        mark_safe(rendered),  # noqa: S308 - sanitised, escaped
        mark_safe(raw),  # noqa: S308 - escaped
    )
