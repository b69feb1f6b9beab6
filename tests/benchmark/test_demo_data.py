"""The hand-written demo corpus: loadable, rich enough to show every workflow, and honest
(every judge's evidence really occurs in the reply it judges)."""

import io
import json
from collections import Counter, defaultdict

import pytest
from django.conf import settings
from django.contrib.auth import authenticate
from django.core.management import call_command
from django.test import RequestFactory

from benchmark.models import Dialogue, ModelEndpoint, Scenario, Trigger, Turn
from core.roles import is_annotator, is_researcher

DEMO_DIR = settings.BASE_DIR / "benchmark" / "demo_data"
DEMO_MODELS = {"demo-atlas-large", "demo-birch-medium", "demo-cedar-small"}
JUDGES = {"demo-judge-primary", "demo-judge-crossfamily"}
CONDITIONS = {"vanilla", "rubric_injected"}


def _lines(name: str) -> list[dict]:
    with (DEMO_DIR / name).open(encoding="utf-8") as stream:
        return [json.loads(line) for line in stream if line.strip()]


@pytest.fixture
def demo(db):
    call_command("load_demo", stdout=io.StringIO())


def test_demo_corpus_covers_domains_styles_and_every_trigger_type(demo):
    assert Dialogue.objects.filter(is_demo=True).count() >= 10
    assert Dialogue.objects.values("domain").distinct().count() == 5
    assert Dialogue.objects.values("style").distinct().count() >= 6
    # The multimodal demo's short dialogues (make_images.py: one trigger at the photo) aside.
    for dialogue in Dialogue.objects.exclude(turns__images__isnull=False):
        types = set(Trigger.objects.filter(turn__dialogue=dialogue).values_list("type", flat=True))
        assert types == {"EMERGENT", "CRITICAL", "RECOVERY"}, dialogue.unique_id_eval
        assert dialogue.anchors.exists() and dialogue.scenario.hidden_goal


def test_demo_findings_are_exactly_the_two_planted_ones(demo):
    findings = Counter(f["code"] for d in Dialogue.objects.all() for f in d.findings)
    assert findings == {"trigger_outside_window": 1, "anchor_drip": 1}


def test_demo_user_messages_respect_their_style_word_bounds(demo):
    for turn in Turn.objects.select_related("dialogue__style"):
        style = turn.dialogue.style
        words = len(turn.user_message.split())
        assert style.min_words <= words <= style.max_words, (
            f"{turn}: {words} words, style {style.code} allows {style.min_words}-{style.max_words}"
        )


def test_recorded_replies_cover_every_trigger_model_and_condition():
    dialogues = {d["unique_id_eval"]: d for d in _lines("dialogues.jsonl")}
    expected = {
        (uid, tp["turn"], model, condition)
        for uid, d in dialogues.items()
        for tp in d["trigger_points"]
        for model in DEMO_MODELS
        for condition in CONDITIONS
    }
    keys = [
        (r["unique_id_eval"], r["turn"], r["model"], r["condition"])
        for r in _lines("replies.jsonl")
    ]
    assert len(keys) == len(set(keys))  # no duplicates
    assert set(keys) == expected
    assert all(r["reply"].strip() for r in _lines("replies.jsonl"))


def test_two_judges_judge_every_reply_with_verbatim_evidence_and_sometimes_disagree():
    replies = {
        (r["unique_id_eval"], r["turn"], r["model"], r["condition"]): r["reply"]
        for r in _lines("replies.jsonl")
    }
    verdicts: dict[tuple, dict[str, str]] = defaultdict(dict)
    for j in _lines("judgments.jsonl"):
        key = (j["unique_id_eval"], j["turn"], j["model"], j["condition"])
        assert j["verdict"] in {"PASS", "PARTIAL", "FAIL"}
        assert j["rationale"].strip()
        assert j["evidence"] in replies[key], f"evidence not in reply for {key}"
        verdicts[key][j["judge"]] = j["verdict"]
    assert set(verdicts) == set(replies)
    assert all(set(v) == JUDGES for v in verdicts.values())
    disagreements = sum(len(set(v.values())) > 1 for v in verdicts.values())
    assert 0.10 <= disagreements / len(verdicts) <= 0.30


def test_load_demo_is_repeatable_and_creates_role_logins(db):
    call_command("load_demo", stdout=io.StringIO())
    out = io.StringIO()
    call_command("load_demo", stdout=out)
    assert "(0 new, 0 updated, 10 unchanged)" in out.getvalue()
    assert ModelEndpoint.objects.filter(provider="replay").count() == 6  # + the classifier
    assert _authenticate("admin", "demo-admin").is_superuser
    assert is_researcher(_authenticate("researcher", "demo-researcher"))
    for name in ("annotator1", "annotator2"):
        assert is_annotator(_authenticate(name, f"demo-{name}"))
    assert "annotator   annotator1 / demo-annotator1" in out.getvalue()


def _authenticate(username: str, password: str):
    """As the login page does: login throttling (django-axes) needs the request."""
    request = RequestFactory().post("/accounts/login/")
    return authenticate(request, username=username, password=password)


def test_demo_scenarios_carry_the_anchors_curation_needs(demo):
    """Curation refuses a scenario with fewer than two anchors; the demo scenarios take theirs
    from their dialogues' ``x_workbench.anchors``, in order."""
    records = {r["scenario_id"]: r for r in _lines("dialogues.jsonl")}
    scenarios = Scenario.objects.filter(key__in=records)
    assert scenarios.count() == len(records)
    for scenario in scenarios:
        expected = [a["text"] for a in records[scenario.key]["x_workbench"]["anchors"]]
        assert len(expected) >= 2
        assert scenario.anchors == expected, scenario.key
