"""Reading ``core.markdown.readable``'s markup in tests: a text's rendered side and raw side."""

import re

READABLE = re.compile(
    r'<div class="md-text"><div class="md">(?P<rendered>.*)</div><div class="md-raw">'
    r"(?P<raw>.*?)</div></div>",
    re.S,
)


def sides(html: str) -> tuple[str, str]:
    """(rendered, raw) of one ``readable`` block (the whole of ``html``)."""
    match = READABLE.fullmatch(str(html))
    assert match, f"not one readable block: {str(html)[:200]!r}"
    return match.group("rendered"), match.group("raw")


def raw_of(html: str) -> str:
    return sides(html)[1]


def rendered_of(html: str) -> str:
    return sides(html)[0]
