"""The REST API: who may read it, both renderers, token auth, the schema and docs, and the raw
exports (every export parses back with Python's csv/json modules to the same values)."""

import csv
import io
import json
import math
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from rest_framework.authtoken.models import Token

from benchmark.models import EvaluationRun, Judgment, JudgmentState
from stats import tables
from stats.exports import JUDGMENT_COLUMNS, RAW_EXPORTS, csv_chunks

RUN_TABLES = [spec.name for spec in tables.all_specs() if spec.needs == tables.RUN]


def _url(name, **query):
    url = reverse("stats_api:table", args=[name])
    if query:
        url += "?" + "&".join(f"{k}={v}" for k, v in query.items())
    return url


def _export_url(fmt, run=None):
    url = reverse("stats_api:raw-export", args=["judgments", fmt])
    return url + (f"?run={run}" if run else "")


@pytest.mark.parametrize("name", RUN_TABLES)
def test_researchers_and_admins_read_every_run_table(
    demo_run, client_for, researcher, admin_user, name
):
    for user in (researcher, admin_user):
        response = client_for(user).get(_url(name, run=demo_run.pk))
        assert response.status_code == 200, response.content
        body = response.json()
        assert body["table"] == name and body["columns"] == [
            c.name for c in tables.get(name).columns
        ]
        assert body["params"]["run"] == demo_run.pk


@pytest.mark.parametrize(
    "url",
    [
        _url("leaderboard"),
        _url("preference"),
        _export_url("csv"),
        reverse("stats_api:schema"),
        reverse("stats_api:docs"),
    ],
)
def test_annotators_and_outsiders_get_404_and_the_anonymous_are_refused(
    demo_run, client, client_for, annotator, outsider, url
):
    assert client.get(url).status_code in (401, 403)
    for user in (annotator, outsider):
        assert client_for(user).get(url).status_code == 404


@pytest.mark.parametrize("spec", tables.all_specs(), ids=lambda spec: spec.name)
def test_every_registered_table_for_each_role(
    demo_run, client, client_for, annotator, outsider, researcher, spec
):
    """One route serves every table: the anonymous are refused, annotators and outsiders get
    404, researchers the table — or, for a study table without ?study=, a 400 that says how to
    choose one."""
    url = _url(spec.name)
    assert client.get(url).status_code in (401, 403)
    for user in (annotator, outsider):
        assert client_for(user).get(url).status_code == 404
    response = client_for(researcher).get(url)
    if spec.needs == tables.RUN:
        assert response.status_code == 200 and response.json()["table"] == spec.name
    else:
        assert response.status_code == 400
        assert f"the {spec.name} table reads a human study" in response.json()["detail"]


def test_an_unknown_table_is_404_naming_the_tables(db, client_for, researcher):
    response = client_for(researcher).get(_url("nope"))
    assert response.status_code == 404
    assert "unknown table 'nope' (one of leaderboard, " in response.json()["detail"]


def test_token_auth_for_scripts(demo_run, client, researcher, annotator):
    token = Token.objects.create(user=researcher)
    response = client.get(_url("leaderboard"), HTTP_AUTHORIZATION=f"Token {token.key}")
    assert response.status_code == 200
    assert response.json()["params"]["run"] == demo_run.pk  # the default run: load_demo pins it
    other = Token.objects.create(user=annotator)
    response = client.get(_url("leaderboard"), HTTP_AUTHORIZATION=f"Token {other.key}")
    assert response.status_code == 404
    response = client.get(_url("leaderboard"), HTTP_AUTHORIZATION="Token not-a-key")
    assert response.status_code == 401


def _csv_value(text, kind):
    if text == "":
        return None
    return {"int": int, "float": float, "bool": lambda t: t == "true"}.get(kind, str)(text)


@pytest.mark.parametrize(
    "name", ["leaderboard", "judge-agreement", "style-sensitivity", "style-sensitivity-by-phase"]
)
def test_csv_parses_back_to_the_json_values(demo_run, client_for, researcher, name):
    client = client_for(researcher)
    as_json = client.get(_url(name, run=demo_run.pk)).json()
    response = client.get(_url(name, run=demo_run.pk, format="csv"))
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"] == f'attachment; filename="{name}.csv"'
    text = response.content.decode("utf-8")
    assert text.endswith("\r\n")
    rows = list(csv.reader(io.StringIO(text, newline="")))
    kinds = {c.name: c.kind for c in tables.get(name).columns}
    assert rows[0] == as_json["columns"]
    parsed = [
        {k: _csv_value(v, kinds[k]) for k, v in zip(rows[0], row, strict=True)} for row in rows[1:]
    ]
    assert parsed == as_json["rows"]  # floats exactly: repr round-trips


def test_verdict_source_and_condition_filters(demo_run, client_for, researcher):
    client = client_for(researcher)
    primary = client.get(_url("leaderboard", run=demo_run.pk)).json()["rows"]
    cross = client.get(
        _url("leaderboard", run=demo_run.pk, verdicts="demo-judge-crossfamily")
    ).json()["rows"]
    injected = client.get(_url("leaderboard", run=demo_run.pk, condition="rubric_injected")).json()[
        "rows"
    ]
    assert [r["n_pass"] for r in primary] != [r["n_pass"] for r in cross]
    assert {r["condition"] for r in injected} == {"rubric_injected"}
    response = client.get(_url("leaderboard", run=demo_run.pk, verdicts="nobody"))
    assert response.status_code == 400 and "no judge 'nobody'" in response.json()["detail"]
    assert client.get(_url("leaderboard", run=99999)).status_code == 404
    assert client.get(_url("leaderboard", condition="both")).status_code == 400


def test_schema_documents_every_table_and_the_docs_load_nothing_from_outside(
    db, client_for, researcher
):
    client = client_for(researcher)
    schema = client.get(reverse("stats_api:schema") + "?format=json").json()
    for spec in tables.all_specs():
        operation = schema["paths"][f"/api/v1/tables/{spec.name}/"]["get"]
        assert operation["summary"] == spec.title
        assert {"run", "verdicts", "condition", "study", "seed"} <= {
            p["name"] for p in operation["parameters"]
        }
    leaderboard_row = schema["components"]["schemas"]["LeaderboardRow"]["properties"]
    assert leaderboard_row["pass_rate"]["description"] == "n_pass / n."
    html = client.get(reverse("stats_api:docs")).content.decode()
    urls = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert urls and all(u.startswith("/") for u in urls), urls
    assert "https://" not in html


TRICKY = 'Says "no"; then, a line break\nand a quote " — ünïcödé ☕'


def _expected_judgments(run):
    return {j.pk: j for j in Judgment.objects.filter(unit__run=run).select_related("unit")}


def test_judgments_export_csv_round_trips(demo_run, client_for, researcher):
    judgment = Judgment.objects.filter(unit__run=demo_run).first()
    judgment.rationale = TRICKY
    judgment.save()
    response = client_for(researcher).get(_export_url("csv", demo_run.pk))
    assert response.streaming
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    text = b"".join(response.streaming_content).decode("utf-8")
    assert not text.startswith("\ufeff") and text.endswith("\r\n")
    rows = list(csv.DictReader(io.StringIO(text, newline="")))
    assert list(rows[0]) == [c.name for c in JUDGMENT_COLUMNS]
    expected = _expected_judgments(demo_run)
    assert len(rows) == len(expected)
    for row in rows:
        j = expected[int(row["judgment_id"])]
        assert row["rationale"] == j.rationale and row["evidence"] == j.evidence
        assert row["verdict"] == j.verdict and row["judge"] == j.judge_name
        assert row["condition"] == j.unit.condition and int(row["unit_id"]) == j.unit_id
        assert float(row["score"]) == {"PASS": 1.0, "PARTIAL": 0.5, "FAIL": 0.0}[j.verdict]
        share = row["evidence_found_share"]
        assert (share == "" and j.evidence_found_share is None) or float(
            share
        ) == j.evidence_found_share
        assert row["created_at"] == j.created_at.isoformat()
    assert any(r["rationale"] == TRICKY for r in rows)


def test_judgments_csv_is_the_writers_file_on_either_database(demo_run, client_for, researcher):
    Judgment.objects.update(rationale=TRICKY, evidence="=1+2")
    with CaptureQueriesContext(connection) as queries:
        body = b"".join(client_for(researcher).get(_export_url("csv")).streaming_content)
    export = RAW_EXPORTS["judgments"]
    assert body == "".join(csv_chunks(export.header, export.rows({}))).encode("utf-8")
    assert body.count(b"'=1+2") == Judgment.objects.count() > 0
    # On PostgreSQL the database writes the file (a COPY, which Django's cursor does not log);
    # elsewhere the rows are read through Django.
    read_by_django = any("benchmark_judgment" in q["sql"] for q in queries.captured_queries)
    assert read_by_django == (connection.vendor != "postgresql")


def test_judgments_export_jsonl_round_trips_and_filters_by_run(demo_run, client_for, researcher):
    error = Judgment.objects.filter(unit__run=demo_run).first()
    error.state, error.verdict, error.error = JudgmentState.JUDGE_ERROR, "", "unparseable"
    error.save()
    response = client_for(researcher).get(_export_url("jsonl", demo_run.pk))
    assert response["Content-Type"] == "application/jsonl; charset=utf-8"
    lines = b"".join(response.streaming_content).decode("utf-8").splitlines()
    records = [json.loads(line) for line in lines]
    expected = _expected_judgments(demo_run)
    assert len(records) == len(expected)
    by_id = {r["judgment_id"]: r for r in records}
    assert by_id[error.pk]["verdict"] == "" and by_id[error.pk]["score"] is None
    assert by_id[error.pk]["judgment_state"] == "judge_error"
    assert list(records[0]) == [c.name for c in JUDGMENT_COLUMNS]
    no_run = EvaluationRun.objects.order_by("-pk").first().pk + 1  # the demo has more than one
    other_run = client_for(researcher).get(_export_url("jsonl", no_run))
    assert b"".join(other_run.streaming_content) == b""


def test_adjudicated_verdict_appears_in_the_export(demo_run, client_for, researcher):
    from benchmark.models import JudgeDisagreement

    disagreement = JudgeDisagreement.objects.filter(unit__run=demo_run).first()
    disagreement.final_verdict = "PARTIAL"
    disagreement.save()
    text = b"".join(
        client_for(researcher).get(_export_url("csv", demo_run.pk)).streaming_content
    ).decode()
    rows = list(csv.DictReader(io.StringIO(text, newline="")))
    marked = {r["adjudicated_verdict"] for r in rows if int(r["unit_id"]) == disagreement.unit_id}
    assert marked == {"PARTIAL"}
    assert {
        r["adjudicated_verdict"] for r in rows if int(r["unit_id"]) != disagreement.unit_id
    } == {""}


def test_unknown_export_or_format_is_404(demo_run, client_for, researcher):
    client = client_for(researcher)
    assert client.get(reverse("stats_api:raw-export", args=["nothing", "csv"])).status_code == 404
    assert (
        client.get(reverse("stats_api:raw-export", args=["judgments", "xlsx"])).status_code == 404
    )
    assert client.get(_export_url("csv") + "?run=x").status_code == 400


def test_nan_is_null_in_json(demo_run, client_for, researcher):
    rows = client_for(researcher).get(_url("disclosure-distance", run=demo_run.pk)).json()["rows"]
    # a model that never passes has a constant outcome: its slope's p is undefined
    assert any(r["slope_p"] is None for r in rows)
    assert not any(isinstance(v, float) and math.isnan(v) for r in rows for v in r.values())


def test_numpy_scalars_are_written_as_plain_numbers():
    import numpy as np

    from stats.exports import csv_value, json_value
    from stats.tables import json_value as table_json_value

    assert csv_value(np.float64(0.25)) == "0.25" and csv_value(np.int64(3)) == "3"
    assert csv_value(np.float64("nan")) == "" and csv_value(np.bool_(True)) == "true"
    assert json.dumps([json_value(np.int64(3)), table_json_value(np.float64(0.5))]) == "[3, 0.5]"
    assert table_json_value(np.float64("nan")) is None
