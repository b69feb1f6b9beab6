"""Evidence marks: found in the raw reply, built from escaped slices, never trusting markup;
the same marks on the rendered Markdown."""

from annotation.highlight import highlight as readable_highlight
from annotation.highlight import quote_spans
from tests.texts import raw_of, rendered_of


def highlight(reply, marks) -> str:
    """The raw side of the reply as pages show it."""
    return raw_of(readable_highlight(reply, marks))


def test_a_quote_is_marked_where_it_occurs():
    html = highlight("Pack the projector last. Good luck!", [("judge-a", "the projector last")])
    assert html == 'Pack <mark class="evidence judge-a">the projector last</mark>. Good luck!'


def test_curly_quotes_and_whitespace_do_not_stop_a_match():
    reply = "She said “load it\n   in reverse” before noon."
    spans = quote_spans(reply, '"load it in reverse"')
    assert spans == [(reply.index("load"), reply.index("”"))]


def test_fragments_joined_by_ellipses_are_each_marked():
    reply = "First, book the van. Later, pack the projector last."
    html = str(highlight(reply, [("judge-b", '"book the van" … "pack the projector last"')]))
    assert html.count('<mark class="evidence judge-b">') == 2


def test_overlapping_quotes_of_two_judges_share_a_mark():
    html = str(
        highlight("abc defgh ijklmnop", [("judge-a", "abc defgh"), ("judge-b", "defgh ijklmnop")])
    )
    assert '<mark class="evidence judge-a judge-b">defgh</mark>' in html


def test_markup_in_the_reply_and_in_the_quote_stays_text():
    reply = "Hi <script>alert('x')</script> & <b>bold</b>"
    html = str(highlight(reply, [("judge-a", "<script>alert('x')</script>")]))
    assert "<script>" not in html and "<b>" not in html
    assert (
        '<mark class="evidence judge-a">&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;</mark>'
        in html
    )
    assert "&amp; &lt;b&gt;bold&lt;/b&gt;" in html


def test_an_absent_quote_marks_nothing():
    assert str(highlight("a < b", [("judge-a", "not in the reply at all")])) == "a &lt; b"


def test_marking_a_long_reply_takes_memory_linear_in_it():
    """Issue #14 (F4): a set of classes per character took ~270 bytes a character (1 MB
    reply: 270 MB and 6 s a render)."""
    import tracemalloc

    reply = ("Keep the card safe and copy it twice before you format anything. " * 4_000)[:250_000]
    highlight(reply, [])  # loads the template engine (its imports are not the reply's memory)
    tracemalloc.start()
    try:
        quotes = [("judge-a", "copy it twice"), ("judge-b", "it twice before")]
        html = str(readable_highlight(reply, quotes))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    for side in (raw_of(html), rendered_of(html)):
        assert side.count('<mark class="evidence judge-a judge-b">it twice</mark>') == reply.count(
            "copy it twice"
        )
    # Twice the bound of the raw text alone: a page holds the reply rendered and raw (#19).
    assert peak < 80 * len(reply), peak


def test_adjacent_spans_of_one_class_make_one_mark():
    html = str(highlight("abcdefgh ijkl", [("judge-a", "abcdefgh"), ("judge-a", "abcdefgh ijkl")]))
    assert html == '<mark class="evidence judge-a">abcdefgh ijkl</mark>'
