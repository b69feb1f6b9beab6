"""Showing a long text (a turn, a reply) cut, with "show all".

Corpus texts and model replies are untrusted and can be as long as a record may be
(``PROACTBENCH_MAX_RECORD_BYTES``): written out whole, one 8 MB reply makes every view of it an
8 MB page. A text longer than ``PROACTBENCH_DISPLAY_MAX_CHARS`` is therefore shown up to a cut,
followed by "… N more characters" and a "show all" control (``components/long_text.html``):

- with a ``full_url`` (staff pages), "show all" fetches the whole text from it (htmx; a plain
  link without JavaScript), so the page itself stays bounded;
- without one (the annotation workspace, whose URLs must reveal nothing about the reply), the
  rest is in a closed ``<details>``: in the page, but not laid out until opened.

The cut is made in the source text, before escaping or rendering (core/markdown.py renders
each side of it), so no entity or tag can be split. It falls on the last paragraph break, line
break or space in the window's last tenth, else at the cap, moved back off a combining mark or
a joiner so that no character is cut from its accents.
"""

from __future__ import annotations

import unicodedata

from django.conf import settings
from django.template.loader import render_to_string
from django.utils.safestring import SafeString

# A cut at a space this far back from the cap (a tenth of it) reads better than one mid-word.
_BOUNDARY_WINDOW = 10


def max_display_chars() -> int:
    return settings.PROACTBENCH_DISPLAY_MAX_CHARS


def display_cut(text: str, limit: int | None = None) -> int | None:
    """Where to cut ``text`` for display (the number of characters shown), or None when it is
    short enough to show whole."""
    limit = max_display_chars() if limit is None else limit
    if len(text) <= limit:
        return None
    floor = limit - limit // _BOUNDARY_WINDOW
    for separator in ("\n\n", "\n", " "):
        at = text.rfind(separator, floor, limit)
        if at > 0:
            return at + len(separator)
    cut = limit
    while cut > floor and _joins_previous(text[cut]):
        cut -= 1
    return cut


def _joins_previous(char: str) -> bool:
    """Whether ``char`` belongs with the character before it (an accent, a variation selector,
    a zero-width joiner): a cut just before it would separate them."""
    return bool(unicodedata.combining(char)) or unicodedata.category(char) in ("Mn", "Me", "Cf")


def cut_text(
    shown: SafeString,
    rest: SafeString,
    rest_chars: int,
    *,
    full_url: str = "",
    block: bool = False,
    target: str = "closest .long-text",
) -> SafeString:
    """The markup of a text shown cut: ``shown`` and ``rest`` are its two parts as HTML,
    already made safe (escaped text, a highlighter's escaped text with marks, or sanitised
    Markdown: ``block``, in a div rather than a span); ``rest`` is not written when there is a
    ``full_url`` to fetch the whole text from, swapped in for the ``target`` element (htmx's
    ``hx-target``)."""
    # An autoescaped template's output, with no whitespace around it (see the template).
    return render_to_string(
        "components/long_text.html",
        {
            "shown": shown,
            "rest": rest,
            "more": f"{rest_chars:,}",
            "rest_chars": rest_chars,
            "full_url": full_url,
            "tag": "div" if block else "span",
            "target": target,
        },
    )
