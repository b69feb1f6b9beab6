"""Texts as Markdown, safely (core/markdown.py): the parser with raw HTML off, the allow-list
sanitiser after it, links and images, and evidence marks carried onto the rendered text."""

import re

import pytest

from annotation.highlight import highlight
from core.markdown import (
    ALLOWED_TAGS,
    _readable,
    _readable_short,
    _render,
    mark_html,
    open_fence,
    readable,
    render_markdown,
)
from tests.texts import raw_of, rendered_of

CAP = 2_000


@pytest.fixture(autouse=True)
def display_cap(settings):
    settings.PROACTBENCH_DISPLAY_MAX_CHARS = CAP


def tags_in(html: str) -> set[str]:
    return {tag.lower() for tag in re.findall(r"<([a-zA-Z][a-zA-Z0-9]*)", html)}


# --- What is rendered ---------------------------------------------------------------------------


def test_common_markdown_is_rendered():
    html = render_markdown(
        "# Plan\n\nSome **bold**, *em*, ~~gone~~ and `code`.\n\n"
        "1. first\n2. second\n\n- a\n- b\n\n> quoted\n\n---\n\n"
        "| col | n |\n|---|--:|\n| x | 1 |\n"
    )
    for fragment in (
        "<h4>Plan</h4>",
        "<strong>bold</strong>",
        "<em>em</em>",
        "<s>gone</s>",
        "<code>code</code>",
        "<ol>",
        "<li>first</li>",
        "<ul>",
        "<blockquote>",
        "<hr>",
        "<table>",
        "<td>x</td>",
    ):
        assert fragment in html, fragment


def test_headings_move_down_three_levels_so_a_reply_sits_under_the_page_headings():
    html = render_markdown("# one\n\n## two\n\n### three\n\n###### six")
    assert "<h4>one</h4>" in html and "<h5>two</h5>" in html
    assert "<h6>three</h6>" in html and "<h6>six</h6>" in html
    assert not tags_in(html) & {"h1", "h2", "h3"}


def test_a_code_block_keeps_its_text_and_can_take_focus_to_scroll():
    html = render_markdown("```python\nif a < b:\n    print('<b>')\n```")
    assert '<pre tabindex="0"><code>' in html  # no language class: classes are allow-listed
    assert "if a &lt; b:\n    print('&lt;b&gt;')" in html


# --- What is never let through ------------------------------------------------------------------

HOSTILE = [
    "<script>alert(1)</script>",
    '<img src="x" onerror="alert(1)">',
    '<a href="https://x.test" onclick="alert(1)">x</a>',
    "<iframe src=https://x.test></iframe>",
    "<style>body{display:none}</style>",
    '<div style="position:fixed">over</div>',
    "<!-- comment --><b>bold</b>",
    '<svg onload="alert(1)"></svg>',
    "[click](javascript:alert(1))",
    "[click](JAVASCRIPT:alert(1))",
    "[click](  javascript:alert(1))",
    "[data](data:text/html;base64,PHNjcmlwdD4=)",
    "[vb](vbscript:msgbox)",
    "[rel](/admin/)",
    "[proto](//evil.test/x)",
    "<javascript:alert(1)>",
    "![pixel](https://tracker.test/p.gif)",
    "![inline](data:image/png;base64,iVBORw0KGgo=)",
    '[a](https://x.test "title onmouseover=alert(1)")',
]


@pytest.mark.parametrize("text", HOSTILE)
def test_no_markup_from_the_text_gets_through(text):
    html = render_markdown(text)
    assert tags_in(html) <= ALLOWED_TAGS
    assert not tags_in(html) & {"script", "img", "iframe", "style", "svg", "div", "b"}
    assert not re.search(r"<[^>]*\son[a-z]+=", html), html  # no event handler in any tag
    assert not re.search(r"<[^>]*\s(style|src|title)=", html), html
    for href in re.findall(r'href="([^"]*)"', html):
        assert href.startswith(("https://", "http://", "mailto:")), href


def test_raw_html_is_shown_as_text():
    html = render_markdown("Hi <b>there</b> <script>x()</script>")
    assert html == "<p>Hi &lt;b&gt;there&lt;/b&gt; &lt;script&gt;x()&lt;/script&gt;</p>\n"


def test_links_open_in_a_new_tab_without_opener_referrer_or_follow():
    html = render_markdown("[docs](https://example.test/a?b=1) and <mailto:a@example.test>")
    assert (
        '<a href="https://example.test/a?b=1" target="_blank" '
        'rel="noopener noreferrer nofollow">docs</a>'
    ) in html
    assert 'href="mailto:a@example.test"' in html


def test_a_link_with_another_scheme_stays_the_literal_markdown():
    assert render_markdown("[x](javascript:alert(1))") == "<p>[x](javascript:alert(1))</p>\n"
    assert render_markdown("[x](/relative)") == "<p>[x](/relative)</p>\n"


def test_an_image_is_never_loaded_but_linked_by_its_alt_text():
    html = render_markdown("See ![the chart](https://tracker.test/pixel.gif?id=42).")
    assert "<img" not in html and "src=" not in html
    assert (
        '<a class="md-image" href="https://tracker.test/pixel.gif?id=42" target="_blank" '
        'rel="noopener noreferrer nofollow">the chart</a>'
    ) in html
    assert "<img" not in render_markdown("![x](data:image/gif;base64,R0lGODlhAQABAAAAACw=)")


def test_rendering_is_cached_by_text_up_to_the_display_cap():
    _render.cache_clear()
    text = "**cached** " * 10
    assert render_markdown(text) is render_markdown(text)
    assert _render.cache_info().hits == 1
    long = "x " * CAP
    render_markdown(long)
    assert _render.cache_info().currsize == 1  # a text over the cap is not kept


def test_a_short_texts_page_markup_is_kept_by_its_text_alone(settings):
    _readable_short.cache_clear()
    first, second = "**one** reply", "*another* reply"
    assert readable(first) is readable(first, full_url="/x", whole=True)  # the same markup
    assert readable(second) == _readable(second) != readable(first)  # each text its own
    assert _readable_short.cache_info().currsize == 2
    # Marks, a cut and a long text are written each time, never from the cache.
    readable(first, pieces=[(0, 3, "j1"), (3, len(first), "")])
    readable(first, cut=5)
    long = "x " * CAP
    assert "long-text" in readable(long)  # cut
    assert _readable_short.cache_info().currsize == 2
    # A smaller cap cuts a text that was kept whole under the larger one.
    settings.PROACTBENCH_DISPLAY_MAX_CHARS = 8
    assert readable(first) == _readable(first) != _readable_short(first)


# --- Marks on the rendered text -----------------------------------------------------------------


def marks(html: str) -> list[tuple[str, str]]:
    return re.findall(r'<mark class="evidence ([^"]+)">(.*?)</mark>', html)


def test_a_quote_is_marked_inside_bold_list_items_links_and_code():
    reply = (
        "First, **book the van** today.\n\n"
        "- pack the [projector](https://x.test/p) last\n"
        "- then `load it in reverse`\n"
    )
    html = rendered_of(
        highlight(
            reply,
            [
                ("judge-a", "book the van"),
                ("judge-b", "pack the [projector](https://x.test/p) last"),
                ("judge-a", "load it in reverse"),
            ],
        )
    )
    assert '<strong><mark class="evidence judge-a">book the van</mark></strong>' in html
    # The quote spans the link: marked on both sides of it and inside it, never across a tag.
    assert (
        '<li><mark class="evidence judge-b">pack the </mark><a href="https://x.test/p" '
        'target="_blank" rel="noopener noreferrer nofollow">'
        '<mark class="evidence judge-b">projector</mark></a>'
        '<mark class="evidence judge-b"> last</mark></li>'
    ) in html
    assert '<code><mark class="evidence judge-a">load it in reverse</mark></code>' in html


def test_a_quote_across_markdown_syntax_marks_the_text_and_not_the_syntax():
    reply = "Do it **now**, then rest."
    html = rendered_of(highlight(reply, [("judge-a", "Do it **now**, then")]))
    assert marks(html) == [("judge-a", "Do it "), ("judge-a", "now"), ("judge-a", ", then")]


def test_a_quote_with_escapes_and_entities_is_marked_through_them():
    reply = "Tip: 5 \\* 3 = 15 &amp; then &copy; done."
    html = rendered_of(highlight(reply, [("judge-a", "5 \\* 3 = 15"), ("judge-b", "done")]))
    assert marks(html) == [("judge-a", "5 * 3 = 15"), ("judge-b", "done")]


def test_marks_never_break_the_html():
    reply = "# Title with the quote\n\n1. the quote again\n\n```\nthe quote in code\n```\n"
    html = rendered_of(highlight(reply, [("judge-a", "the quote")]))
    assert len(marks(html)) == 3
    # Every mark closes before the next tag: balanced, never wrapping a tag.
    assert not re.search(r"<mark[^>]*>[^<]*<(?!/mark)", html)


def test_unmarked_text_is_rendered_as_is():
    text = "Plain **text**"
    assert mark_html(render_markdown(text), text, [(0, len(text), "")]) == render_markdown(text)


def test_the_raw_side_is_the_escaped_source_with_the_same_marks():
    reply = "Keep **this** <b>safe</b>"
    out = highlight(reply, [("judge-a", "Keep **this**")])
    assert raw_of(out) == (
        '<mark class="evidence judge-a">Keep **this**</mark> &lt;b&gt;safe&lt;/b&gt;'
    )


# --- Long texts ----------------------------------------------------------------------------------


def test_a_long_text_is_rendered_on_both_sides_of_the_cut():
    text = "**start** " + "word " * CAP + "**end**"
    rendered = rendered_of(readable(text))
    assert rendered.startswith('<div class="long-text"><p><strong>start</strong>')
    shown, rest = rendered.split('<details class="long-text-rest"><summary>Show all</summary>')
    assert "<strong>end</strong>" in rest and "end" not in shown


def test_a_code_block_open_at_the_cut_opens_again_after_it():
    code = "\n".join(f"line_{n} = {n}" for n in range(400))
    text = "Intro.\n\n```python\n" + code + "\n```\n\nAfter the code."
    assert open_fence(text[: text.index("line_300")]) == "```python\n"
    assert open_fence(text) == ""
    _, rest = rendered_of(readable(text)).split("<summary>Show all</summary>")
    assert rest.startswith('<pre tabindex="0"><code>')  # the rest of the code is still code
    assert "<p>After the code.</p>" in rest


def test_a_long_text_with_a_full_url_leaves_its_rest_out_and_swaps_the_whole_block():
    text = "word " * CAP + "the very end"
    out = readable(text, full_url="/whole/")
    assert "the very end" not in out
    assert out.count('hx-get="/whole/" hx-target="closest .md-text"') == 2  # rendered, raw
