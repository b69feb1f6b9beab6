"""The table registry: a table declared and registered in this module only — no other file
knows it — is served by the API (JSON and CSV), ``export_stats``, the dashboard and the OpenAPI
schema, and is gone from all of them once unregistered. And the registry's own rules."""

import csv
import dataclasses
import io
import json
import re

import pytest
from django.core.management import CommandError, call_command
from django.db.models import Avg
from django.db.models.functions import Length
from django.urls import reverse

from benchmark.models import EvaluationUnit
from stats import selectors, tables
from stats.tables import RUN, Bootstrap, Cell, Column, Display, TableSpec

TOY = "reply-lengths"


def _reply_lengths(request: selectors.TableRequest) -> tables.Built:
    run = selectors.require_run(request)
    rows = (
        EvaluationUnit.objects.filter(run=run, condition=request.condition)
        .values("endpoint__name")
        .annotate(mean_length=Avg(Length("reply")))
        .order_by("endpoint__name")
    )
    out = [{"model": r["endpoint__name"], "mean_length": float(r["mean_length"])} for r in rows]
    return out, ["lengths in characters"]


REPLY_LENGTHS = TableSpec(
    name=TOY,
    title="Reply lengths",
    description="Per model: the mean length of its replies.",
    columns=(
        Column("model", "str", "The model's endpoint handle."),
        Column("mean_length", "float", "Mean reply length, in characters."),
    ),
    needs=RUN,
    build=_reply_lengths,
    display=Display(
        cells=(Cell("Model", "model"), Cell("Mean length", "mean_length", "num", digits=1))
    ),
    bootstrap=Bootstrap(123, "nothing at all"),  # only to show that the caption is the spec's
)


@pytest.fixture
def reply_lengths():
    with tables.registered(REPLY_LENGTHS):
        yield REPLY_LENGTHS
    assert TOY not in [spec.name for spec in tables.all_specs()]


def _expected(run) -> dict[str, float]:
    lengths: dict[str, list[int]] = {}
    for unit in EvaluationUnit.objects.filter(run=run, condition="vanilla").select_related(
        "endpoint"
    ):
        lengths.setdefault(unit.endpoint.name, []).append(len(unit.reply))
    return {model: sum(v) / len(v) for model, v in lengths.items()}


def _export(*args) -> str:
    out = io.StringIO()
    call_command("export_stats", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def test_a_table_registered_in_one_module_is_served_everywhere(
    demo_run, client_for, researcher, reply_lengths
):
    expected = _expected(demo_run)
    client = client_for(researcher)
    url = reverse("stats_api:table", args=[TOY])

    body = client.get(url, {"run": demo_run.pk}).json()
    assert (body["table"], body["title"], body["columns"]) == (
        TOY,
        "Reply lengths",
        ["model", "mean_length"],
    )
    assert {r["model"]: r["mean_length"] for r in body["rows"]} == pytest.approx(expected)
    assert body["notes"] == ["lengths in characters"] and body["params"]["run"] == demo_run.pk

    response = client.get(url, {"run": demo_run.pk, "format": "csv"})
    assert response["Content-Disposition"] == f'attachment; filename="{TOY}.csv"'
    header, *rows = csv.reader(io.StringIO(response.content.decode(), newline=""))
    assert header == ["model", "mean_length"]
    assert [{"model": m, "mean_length": float(v)} for m, v in rows] == body["rows"]

    # The command's choices and its default run (the newest finished one) come from the spec.
    assert json.loads(_export(TOY, "--format", "json"))["rows"] == body["rows"]

    html = client.get(reverse("stats:dashboard")).content.decode()
    section = re.search(rf'<section class="card" id="{TOY}">.*?</section>', html, re.S)
    assert section is not None
    panel = section.group(0)
    assert "<h2>Reply lengths" in panel and "<th>Mean length</th>" in panel
    assert (
        "lengths in characters" in panel and "bootstrap: 123 resamples of nothing at all" in panel
    )
    for model, length in expected.items():
        assert f"<td>{model}</td><td>{length:.1f}</td>" in panel
    assert f"/api/v1/tables/{TOY}/?" in panel

    schema = client.get(reverse("stats_api:schema") + "?format=json").json()
    operation = schema["paths"][f"/api/v1/tables/{TOY}/"]["get"]
    assert operation["operationId"] == "table_reply_lengths"
    assert operation["summary"] == "Reply lengths"
    assert operation["description"].startswith("Per model: the mean length of its replies.")
    row = schema["components"]["schemas"]["ReplyLengthsRow"]["properties"]
    assert row["mean_length"]["description"] == "Mean reply length, in characters."


def test_an_unregistered_table_is_gone_everywhere(demo_run, client_for, researcher):
    with tables.registered(REPLY_LENGTHS):
        pass
    client = client_for(researcher)
    response = client.get(reverse("stats_api:table", args=[TOY]))
    assert (
        response.status_code == 404 and "unknown table 'reply-lengths'" in response.json()["detail"]
    )
    schema = client.get(reverse("stats_api:schema") + "?format=json").json()
    assert f"/api/v1/tables/{TOY}/" not in schema["paths"]
    assert f'id="{TOY}"' not in client.get(reverse("stats:dashboard")).content.decode()
    with pytest.raises(CommandError, match="invalid choice"):
        _export(TOY)


def test_registration_order_is_the_listed_modules_order():
    assert [spec.name for spec in tables.all_specs()] == [
        "leaderboard",
        "leaderboard-by-domain",
        "injection-effect",
        "judge-agreement",
        "judge-self-consistency",
        "pairwise-judge-consistency",
        "style-sensitivity",
        "style-sensitivity-by-phase",
        "style-logits",
        "disclosure-distance",
        "benchmark-correlation",
        "preference",
        "preference-raters",
        "arena-ranking",
        "arena-pairs",
        "pairwise-judge-human",
        "failure-modes",
        "failure-modes-llm",
        "failure-modes-llm-vs-human",
        "proposal-acceptance",
        "proposal-decisions",
        "proposal-agreement",
        "human-agreement",
        "judge-human-alignment",
        "halo-acceptability",
        "halo-proactivity",
        "halo-timing-intensity",
        "halo-levels",
        "halo-paired",
        "halo-effort",
        "halo-effort-correlation",
        "halo-agreement",
    ]


def _toy(**fields) -> TableSpec:
    return dataclasses.replace(REPLY_LENGTHS, **fields)


def test_the_registry_refuses_what_could_not_be_served():
    with pytest.raises(ValueError, match="already registered"):
        tables.register(_toy(name="leaderboard"))
    with pytest.raises(ValueError, match="not a slug"):
        tables.register(_toy(name="reply lengths"))
    with pytest.raises(ValueError, match="needs is"):
        tables.register(_toy(needs="corpus"))
    with pytest.raises(ValueError, match="no column median_length"):
        tables.register(_toy(display=Display(cells=(Cell("Median", "median_length"),))))
    with pytest.raises(ValueError, match="unknown format 'percent'"):
        tables.register(_toy(display=Display(cells=(Cell("Mean", "mean_length", "percent"),))))
    with pytest.raises(ValueError, match="no column n_replies"):
        aside = tables.Aside("({n_replies})", when=bool)
        tables.register(_toy(display=Display(cells=(Cell("Mean", "mean_length", aside=aside),))))
    assert TOY not in [spec.name for spec in tables.all_specs()]


def test_registered_unregisters_when_the_block_fails():
    with pytest.raises(RuntimeError), tables.registered(REPLY_LENGTHS):
        assert tables.get(TOY) is REPLY_LENGTHS
        raise RuntimeError
    with pytest.raises(tables.UnknownTable):
        tables.get(TOY)
