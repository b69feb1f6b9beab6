"""The conversation's bubbles are written in Python (``annotation_tags.chat_bubbles``): the
texts are model and corpus output, shown as sanitised Markdown beside their escaped raw text."""

import re
from types import SimpleNamespace

from annotation.templatetags.annotation_tags import CHAT_FOLD_AFTER, _bubbles, chat_bubbles
from tests.texts import sides


def test_chat_bubbles_escape_every_text_and_mark_the_last_message():
    hostile = "<script>alert(1)</script><img src=x onerror=\"boom()\"> & 'quoted'"
    html = str(
        chat_bubbles(
            [
                {"role": "user", "text": "Hi, the coordinator is out today."},
                {"role": "assistant", "text": hostile},
                {"role": "user", "text": hostile},
            ]
        )
    )
    assert "<script>" not in html and "<img" not in html
    assert not re.search(r"<[^>]*onerror", html)  # in text only, never in a tag
    assert html.count("&lt;script&gt;alert(1)&lt;/script&gt;") == 4  # rendered and raw, twice
    assert "&amp; &#x27;quoted&#x27;" in html  # raw
    assert "&amp; 'quoted'" in html  # rendered (a quote is inert in text)
    bubbles = html.split("\n")
    assert len(bubbles) == 3 * 2  # the rendered side of each text ends with a line break
    starts = [b for b in bubbles if b.startswith('<div class="bubble')]
    assert starts[0].startswith('<div class="bubble user"><div class="who">User</div>')
    assert starts[1].startswith('<div class="bubble assistant"><div class="who">Assistant</div>')
    assert starts[2].startswith('<div class="bubble user is-current">')
    assert "is-current" not in starts[0] + starts[1]


def test_markdown_in_a_bubble_is_rendered_beside_the_raw_text():
    html = str(chat_bubbles([{"role": "assistant", "text": "**Pack** the stand:\n\n- van"}]))
    block = html[html.index('<div class="md-text">') : -len("</div>")]  # the bubble's end
    rendered, raw = sides(block)
    assert "<strong>Pack</strong>" in rendered and "<li>van</li>" in rendered
    assert raw == "**Pack** the stand:\n\n- van"


def test_a_long_conversation_folds_its_earlier_messages_open():
    messages = [
        {"role": "user" if n % 2 == 0 else "assistant", "text": f"message {n}"}
        for n in range(CHAT_FOLD_AFTER + 2)
    ]
    html = str(chat_bubbles(messages))
    folded = re.search(r'<details class="earlier" open>(.*)</details>', html, re.S).group(1)
    assert f"Earlier messages ({len(messages) - 2})" in folded
    assert "message 0" in folded and f"message {len(messages) - 3}" in folded
    after = html.split("</details>")[-1]
    assert f"message {len(messages) - 2}" in after and "is-current" in after
    short = str(chat_bubbles(messages[:CHAT_FOLD_AFTER]))
    assert "<details" not in short


def test_an_empty_conversation_is_empty():
    assert str(chat_bubbles([])) == ""


def test_a_conversation_is_rendered_once_per_process_and_never_served_stale(settings):
    """The bubbles are kept by their content (issue #20 part 5): the same conversation again
    is the same markup without rendering; any change to what it shows renders afresh."""
    messages = [
        {"role": "user", "text": "Which **stand** first? " + "word " * 40},
        {"role": "assistant", "text": "The *north* one."},
    ]
    first = str(chat_bubbles(messages))
    before = _bubbles.cache_info()
    again = str(chat_bubbles([dict(m) for m in messages]))  # equal content, new objects
    assert again == first
    assert _bubbles.cache_info().hits == before.hits + 1
    edited = str(chat_bubbles([messages[0], {"role": "assistant", "text": "The *south* one."}]))
    assert "<em>south</em>" in edited and "north" not in edited
    settings.PROACTBENCH_DISPLAY_MAX_CHARS = 60  # the display cap moves the cut
    cut = str(chat_bubbles(messages))
    assert cut != first and "show all" in cut.lower()
    image = {"role": "user", "text": "Look.", "images": [SimpleNamespace(sha256="a" * 64, alt="x")]}
    other = {"role": "user", "text": "Look.", "images": [SimpleNamespace(sha256="b" * 64, alt="x")]}
    assert ("a" * 64) in str(chat_bubbles([image])) and ("b" * 64) in str(chat_bubbles([other]))
