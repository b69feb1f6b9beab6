"""Long replies and messages in the annotation workspace (issue #14, F5): cut at
PROACTBENCH_DISPLAY_MAX_CHARS, the rest folded under "show all" in the page (the workspace's
URLs must not tell replies apart, so nothing is fetched), judges' marks on both sides of the
cut. The staff pages' side is tests/proactweb/test_long_text.py."""

import html
import re

import pytest
from django.urls import reverse

from annotation.highlight import highlight
from benchmark.models import EvaluationUnit, Judgment, Turn
from tests.texts import raw_of, sides

CAP = 20_000


@pytest.fixture(autouse=True)
def display_cap(settings):
    settings.PROACTBENCH_DISPLAY_MAX_CHARS = CAP


def words(n_chars: int, word: str = "lorem ") -> str:
    return (word * (n_chars // len(word) + 1))[:n_chars]


def test_a_long_reply_in_the_workspace_is_cut_with_the_rest_folded_and_its_marks_kept(
    make_study, client
):
    study = make_study("adjudication", n_annotators=1, overlap=1)
    # Every reply: one quote well before the cut, one only in the folded rest.
    reply = "Book the van. " + words(60_000) + "Pack the projector last. " + words(40_000)
    EvaluationUnit.objects.update(reply=reply)
    Judgment.objects.filter(evidence="book the van").update(evidence="Book the van")
    Judgment.objects.exclude(evidence="Book the van").update(evidence="Pack the projector last")
    long_turn = "Here is my plan: " + words(50_000)
    Turn.objects.update(user_message=long_turn)
    user = study.raters.get().user
    client.force_login(user)
    next_url = reverse("annotation:next", args=[study.pk])
    page = client.post(next_url, follow=True).content.decode()
    # The reply: cut, both quotes marked, the second inside the folded rest.
    reply_html = re.search(
        r'<article class="response single">(<div class="md-text">.*?</div></div>)</article>',
        page,
        re.S,
    )
    assert reply_html, "no reply in the workspace"
    rendered, raw = sides(reply_html.group(1))
    for side in (rendered, raw):
        shown, rest = side.split('<details class="long-text-rest"><summary>Show all</summary>')
        assert '<mark class="evidence judge-' in shown and "Book the van</mark>" in shown
        assert "Pack the projector last</mark>" in rest
    shown, rest = raw.split('<details class="long-text-rest"><summary>Show all</summary>')
    visible = re.sub(r"<[^>]+>", "", shown.split('<span class="long-text-more">')[0])
    hidden = re.sub(r"<[^>]+>", "", rest.removesuffix("</details></span>"))
    assert html.unescape(visible) + html.unescape(hidden) == reply
    # The conversation's long user messages: cut in their bubbles, the rest folded.
    assert page.count("Here is my plan: ") >= 1
    assert page.count('<span class="long-text-more">') >= 2


def test_a_quote_across_the_cut_moves_the_cut_to_its_start():
    reply = words(CAP - 10) + "keep this quote whole " + words(CAP)
    out = raw_of(highlight(reply, [("judge-a", "keep this quote whole")]))
    shown, rest = out.split("<details", 1)
    assert '<mark class="evidence judge-a">keep this quote whole</mark>' in rest
    assert "<mark" not in shown


def test_a_very_long_quote_across_the_cut_is_marked_on_both_sides():
    quote = words(CAP, "quote ")
    reply = "Intro. " + quote + " outro " + words(CAP)
    out = raw_of(highlight(reply, [("judge-a", quote.strip())]))
    shown, rest = out.split("<details", 1)
    assert '<mark class="evidence judge-a">' in shown and '<mark class="evidence judge-a">' in rest


@pytest.mark.parametrize("kind", ["direct_rating", "failure_mode", "pairwise", "dialogue_audit"])
def test_every_workspace_cuts_a_long_reply_and_folds_the_whole_rest_into_the_page(
    kind, make_study, client
):
    tail = "the very last words of the reply"
    reply = words(100_000) + tail
    EvaluationUnit.objects.update(reply=reply)
    Turn.objects.update(assistant_response=reply)  # what a dialogue audit shows
    audit = kind == "dialogue_audit"  # two auditors per dialogue, a third person to adjudicate
    study = make_study(kind, n_annotators=3 if audit else 1, overlap=2 if audit else 1)
    client.force_login(study.raters.first().user)
    page = client.post(reverse("annotation:next", args=[study.pk]), follow=True).content.decode()
    assert '<details class="long-text-rest"><summary>Show all</summary>' in page
    assert tail in page  # the whole text is reachable, folded
    # Nothing long is shown in full: the page holds one copy of each text's rest at most on
    # each side (rendered and raw), each side cut.
    assert page.count(tail) <= page.count('<span class="long-text-more">')
