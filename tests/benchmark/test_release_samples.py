import io
import json

import pytest
from django.core.management import call_command

from benchmark.corpus.exporter import corpus_export
from benchmark.models import Dialogue, Trigger
from tests.release import release_file

pytestmark = pytest.mark.django_db


def test_official_dialogue_sample_imports_with_its_known_findings():
    path = release_file("final_dialogues.sample.jsonl")
    out = io.StringIO()
    call_command("import_corpus", str(path), stdout=out)
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert Dialogue.objects.count() == len(records)
    assert Trigger.objects.count() == sum(len(r["trigger_points"]) for r in records)
    # The release places some triggers outside the nominal windows (a known quirk): imported,
    # and flagged for the audit rather than rejected.
    flagged = Dialogue.objects.exclude(findings=[])
    assert flagged.exists()
    assert "protocol findings" in out.getvalue()
    for dialogue in Dialogue.objects.select_related("style"):
        # our style table agrees with the release's labels
        assert "style_code_mismatch" not in {f["code"] for f in dialogue.findings}


def test_official_dialogue_sample_round_trips():
    path = release_file("final_dialogues.sample.jsonl")
    call_command("import_corpus", str(path), stdout=io.StringIO())
    out = io.StringIO()
    corpus_export(out=out, official_only=True)
    original = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    exported = [json.loads(line) for line in out.getvalue().splitlines()]
    assert exported == original
