"""Long texts (issue #14, F5): a turn or a reply longer than PROACTBENCH_DISPLAY_MAX_CHARS is
shown cut with "… N more characters" and "show all"; the whole text stays reachable (fetched on
the staff pages, folded in the page in the annotation workspace); a short text is unchanged."""

import html
import re
from pathlib import Path

import pytest
from django.db import connection
from django.urls import reverse
from django.utils.html import escape

from annotation.templatetags.annotation_tags import chat_bubbles
from benchmark.corpus.importer import corpus_import
from benchmark.models import Dialogue, Turn
from core.long_text import display_cut
from core.markdown import readable
from tests.factories import dialogue_record, jsonl_bytes, stream
from tests.texts import raw_of, rendered_of

CAP = 20_000
HTMX = {"HX-Request": "true"}


@pytest.fixture(autouse=True)
def display_cap(settings):
    settings.PROACTBENCH_DISPLAY_MAX_CHARS = CAP


def words(n_chars: int, word: str = "lorem ") -> str:
    return (word * (n_chars // len(word) + 1))[:n_chars]


# --- Where the cut falls ------------------------------------------------------------------------


def test_a_text_up_to_the_cap_is_not_cut():
    assert display_cut("x" * CAP) is None
    assert display_cut("x" * (CAP + 1)) == CAP


def test_the_cut_prefers_a_paragraph_then_a_line_then_a_space_near_the_cap():
    spaced = words(CAP * 2)
    assert spaced[display_cut(spaced) - 1] == " " and display_cut(spaced) > CAP * 0.9
    lines = words(CAP - 500) + "\nlast line " + words(CAP)
    assert display_cut(lines) == CAP - 500 + 1
    paragraphs = words(CAP - 900) + "\n\n" + words(400) + "\n" + words(CAP)
    assert display_cut(paragraphs) == CAP - 900 + 2


def test_a_cut_without_spaces_keeps_accents_with_their_letter():
    text = "e" * (CAP - 1) + "e\u0301" + "x" * 100  # é as e + combining acute, across the cap
    cut = display_cut(text)
    assert cut == CAP - 1 and text[cut:].startswith("e\u0301")


def test_a_short_text_is_not_cut():
    text = "Hi <b>there</b> & 'you'\nsecond line"
    for out in (readable(text), readable(text, full_url="/x/")):
        assert raw_of(out) == html.escape(text)
        assert rendered_of(out) == "<p>Hi &lt;b&gt;there&lt;/b&gt; &amp; 'you'\nsecond line</p>\n"
    assert chat_bubbles([{"role": "user", "text": text}]) == (
        f'<div class="bubble user is-current"><div class="who">User</div>{readable(text)}</div>'
    )


def test_a_long_text_is_escaped_on_both_sides_of_the_cut():
    text = words(CAP + 5_000, "<b>x</b> ")
    out = raw_of(readable(text))
    assert "<b>" not in readable(text)
    shown, rest = re.fullmatch(
        r'<span class="long-text">(.*)<span class="long-text-more">… ([\d,]+) more characters'
        r'</span><details class="long-text-rest"><summary>Show all</summary>(.*)</details></span>',
        out,
        re.S,
    ).group(1, 3)
    assert html.unescape(shown) + html.unescape(rest) == text


# --- The corpus reading page (researchers) -------------------------------------------------------


@pytest.fixture
def long_dialogue(db):
    record = dialogue_record()
    record["turn_records"][1]["user_message"] = "Start <here> " + words(100_000 - 13)
    record["turn_records"][1]["assistant_response"] = "A short reply."
    corpus_import(stream=stream(jsonl_bytes([record])))
    return Dialogue.objects.get()


def test_the_reading_page_of_a_100k_character_turn_is_bounded_and_says_what_is_left(
    long_dialogue, client_for, researcher
):
    client = client_for(researcher)
    url = reverse("benchmark:dialogue_detail", args=[long_dialogue.pk])
    page = client.get(url).content.decode()
    turn = Turn.objects.get(dialogue=long_dialogue, index=2)
    turn_user = turn.user_message
    Turn.objects.filter(pk=turn.pk).update(user_message="Start")
    overhead = len(client.get(url).content)
    assert len(page) < 3 * CAP + overhead
    cut = display_cut(turn_user)
    assert f"… {len(turn_user) - cut:,} more characters" in page
    assert "Start &lt;here&gt;" in page and "A short reply." in page
    full_url = reverse("benchmark:turn_text", args=[long_dialogue.pk, 2, "user"])
    assert f'href="{full_url}" hx-get="{full_url}"' in page


def test_show_all_gives_the_whole_text_as_a_page_and_as_an_htmx_swap(
    long_dialogue, client_for, researcher
):
    client = client_for(researcher)
    text = Turn.objects.get(dialogue=long_dialogue, index=2).user_message
    url = reverse("benchmark:turn_text", args=[long_dialogue.pk, 2, "user"])
    swap = client.get(url, headers=HTMX)
    assert swap.status_code == 200
    assert swap.content.decode() == readable(text, whole=True)  # what "show all" swaps in
    assert raw_of(swap.content.decode()) == escape(text)
    page = client.get(url).content.decode()
    assert readable(text, whole=True) in page and "<html" in page
    assert reverse("benchmark:dialogue_detail", args=[long_dialogue.pk]) in page
    assistant = client.get(reverse("benchmark:turn_text", args=[long_dialogue.pk, 2, "assistant"]))
    assert assistant.content.decode().count("A short reply.") == 2  # rendered, and raw


def test_show_all_is_a_404_for_a_missing_turn_or_part_and_staff_only(
    long_dialogue, client_for, researcher, annotator
):
    client = client_for(researcher)
    for args in (
        (long_dialogue.pk, 99, "user"),
        (long_dialogue.pk, 2, "planner"),
        (999, 1, "user"),
    ):
        assert client.get(reverse("benchmark:turn_text", args=args)).status_code == 404, args
    client = client_for(annotator)
    url = reverse("benchmark:turn_text", args=[long_dialogue.pk, 2, "user"])
    assert client.get(url).status_code == 404


@pytest.fixture
def async_unsafe(monkeypatch):
    """Playwright's sync API runs an event loop in this thread; the ORM calls here are safe.
    (Asked for before the fixtures that use the ORM.)"""
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_show_all_swaps_in_the_whole_text_in_a_browser(
    async_unsafe, researcher, browser, live_server, client
):
    record = dialogue_record()
    text = "<script>window.__xss=1</script> " + words(100_000)
    record["turn_records"][1]["user_message"] = text
    corpus_import(stream=stream(jsonl_bytes([record])))
    dialogue = Dialogue.objects.get()
    client.force_login(researcher)
    context = browser.new_context()
    context.add_cookies(
        [{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": live_server.url}]
    )
    page = context.new_page()
    page.goto(live_server.url + reverse("benchmark:dialogue_detail", args=[dialogue.pk]))
    bubble = page.locator("#turn-2 .bubble.user .md-text")
    assert len(bubble.inner_text()) < CAP + 100 and "more characters" in bubble.inner_text()
    bubble.locator(".md").get_by_text("Show all").click()
    page.wait_for_function("!document.querySelector('#turn-2 .long-text')")
    # The whole text, rendered (a paragraph: the text, its spaces collapsed) and raw.
    assert page.locator("#turn-2 .bubble.user .md").inner_text() == text.strip()
    assert page.locator("#turn-2 .bubble.user .md-raw").text_content() == text
    assert page.evaluate("window.__xss") is None
    context.close()
    connection.close()  # the ORM's connection from this thread (see the untrusted-text test)


@pytest.mark.slow
def test_opening_show_all_in_a_bubble_reads_on_as_the_whole_text(browser):
    """The workspace's fold, in Chromium with the app's stylesheet: closed, the cut text, the
    marker and Show all; opened, the whole text and nothing else."""
    text = ("Line of a long reply here. " * 12 + "\n") * 100
    css = (Path(__file__).resolve().parents[2] / "static" / "css" / "app.css").read_text()
    page = browser.new_page()
    bubbles = chat_bubbles([{"role": "assistant", "text": text}])
    page.set_content(
        f"<style>{css}</style><body><main><div class='chat'>{bubbles}</div>"
        '<input type="checkbox" id="show-raw"></main></body>'
    )
    page.check("#show-raw")  # the raw side reads exactly as the text was written
    closed = page.inner_text(".bubble .md-raw")
    more = len(text) - display_cut(text)
    assert closed.endswith(f"… {more:,} more characters\nShow all") and len(closed) < CAP + 100
    page.click(".md-raw summary")
    assert page.inner_text(".bubble .md-raw") == text
    page.close()
