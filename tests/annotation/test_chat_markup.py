"""The conversation's bubbles are written in Python (``annotation_tags.chat_bubbles``): the
texts are model and corpus output and must stay text."""

from annotation.templatetags.annotation_tags import chat_bubbles


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
    assert "<script>" not in html and "<img" not in html and 'onerror="' not in html
    assert html.count("&lt;script&gt;alert(1)&lt;/script&gt;") == 2
    assert "&amp; &#x27;quoted&#x27;" in html
    bubbles = html.split("\n")
    assert len(bubbles) == 3
    assert bubbles[0].startswith('<div class="bubble user"><div class="who">User</div>')
    assert bubbles[1].startswith('<div class="bubble assistant"><div class="who">Assistant</div>')
    assert bubbles[2].startswith('<div class="bubble user is-current">')
    assert "is-current" not in bubbles[0] + bubbles[1]


def test_an_empty_conversation_is_empty():
    assert str(chat_bubbles([])) == ""
