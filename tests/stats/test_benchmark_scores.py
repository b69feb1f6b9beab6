import io

import numpy as np
import pytest

from benchmark.models import ModelEndpoint
from stats import selectors, tables
from stats.compute.leaderboard import score_matrix
from stats.models import ExternalBenchmarkScore
from stats.selectors import TableRequest
from stats.services import ScoresImportError, benchmark_scores_import

pytestmark = pytest.mark.django_db


@pytest.fixture
def endpoints():
    for name, display in (("claude-opus-4-7", "Claude-Opus-4.7"), ("gpt-5-5", "GPT-5.5")):
        ModelEndpoint.objects.create(
            name=name, display_name=display, provider="replay", model_name=name
        )


def _upload(text: str, **kwargs):
    return benchmark_scores_import(stream=io.BytesIO(text.encode("utf-8")), **kwargs)


def _scores():
    return {
        (s.endpoint.name, s.benchmark): s.score
        for s in ExternalBenchmarkScore.objects.select_related("endpoint")
    }


def test_long_layout_matches_models_by_any_of_their_names_and_updates_on_reupload(endpoints):
    summary = _upload("model,benchmark,score\nClaude-Opus-4.7,GPQA,71.2\ngpt-5.5,GPQA,80\n")
    assert (summary.created, summary.updated) == (2, 0)
    assert _scores() == {("claude-opus-4-7", "GPQA"): 71.2, ("gpt-5-5", "GPQA"): 80.0}
    summary = _upload("Model,Benchmark,Score\nGPT-5.5,gpqa,81.5\n")
    assert (summary.created, summary.updated) == (0, 1)
    assert _scores()[("gpt-5-5", "gpqa")] == 81.5 and len(_scores()) == 2


def test_wide_layout_with_a_byte_order_mark_and_empty_cells(endpoints, researcher):
    text = "\ufeffmodel,GPQA,MMLU\r\nGPT-5.5,80.1,\r\nclaude-opus-4-7,70,88.5\r\n"
    summary = _upload(text, uploaded_by=researcher)
    assert summary.created == 3 and summary.benchmarks == ["GPQA", "MMLU"]
    assert _scores() == {
        ("gpt-5-5", "GPQA"): 80.1,
        ("claude-opus-4-7", "GPQA"): 70.0,
        ("claude-opus-4-7", "MMLU"): 88.5,
    }
    assert ExternalBenchmarkScore.objects.filter(uploaded_by=researcher).count() == 3


def test_every_error_is_reported_by_line_and_column_and_nothing_is_written(endpoints):
    text = (
        "model,benchmark,score\n"
        "GPT-5.5,GPQA,80\n"
        "Nobody-9,GPQA,1\n"
        "GPT-5.5,MMLU,high\n"
        "gpt-5-5,gpqa,81\n"
        "GPT-5.5,AIME\n"
        "GPT-5.5,IFEval,nan\n"
    )
    with pytest.raises(ScoresImportError) as caught:
        _upload(text)
    assert [str(e) for e in caught.value.errors] == [
        "line 6: 2 field(s), the header has 3",
        "line 3, column model: no model endpoint named 'Nobody-9'",
        "line 4, column score: 'high' is not a number",
        "line 5, column score: gpt-5-5 / gpqa already given on line 2",
        "line 7, column score: 'nan' is not a number",
    ]
    assert not ExternalBenchmarkScore.objects.exists()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "empty file"),
        (b"name,score\nGPT-5.5,1\n", "no 'model' column"),
        (b"model,GPQA\n", "no scores in the file"),
        (b"model,benchmark,score\n\xff\xfe,x,1\n", "not UTF-8"),
        (b"model,GPQA,gpqa\nGPT-5.5,1,2\n", "repeated column"),
    ],
)
def test_unreadable_files_are_clear_errors(endpoints, data, message):
    with pytest.raises(ScoresImportError, match=message):
        benchmark_scores_import(stream=io.BytesIO(data))


def test_benchmark_correlation_over_the_demo_run(demo_run):
    replies = selectors.run_replies(
        run=demo_run, verdicts=selectors.VerdictSource("primary"), condition="vanilla"
    )
    names, types, weighted = score_matrix(
        models=replies.model, trigger_types=replies.trigger_type, verdicts=replies.verdict
    )
    scores = {"demo-atlas-large": 80.0, "demo-birch-medium": 55.0, "demo-cedar-small": 61.0}
    lines = "".join(f"{model},{score}\n" for model, score in scores.items())
    _upload("model,GPQA\n" + lines)
    table = tables.build("benchmark-correlation", TableRequest(run=demo_run))
    assert [(r["trigger_type"], r["benchmark"]) for r in table.rows[:2]] == [
        ("ALL", "GPQA"),
        ("ALL", "(mean)"),
    ]
    x = weighted[:, types.index("ALL")]
    y = np.array([scores[n] for n in names])
    assert table.rows[0]["r"] == pytest.approx(np.corrcoef(x, y)[0, 1])
    assert table.rows[0]["n_models"] == 3
    # three models: r and p exist, a Fisher-z CI needs four
    assert np.isnan(table.rows[0]["ci_low"])


def test_no_scores_is_a_note_not_an_error(demo_run):
    table = tables.build("benchmark-correlation", TableRequest(run=demo_run))
    assert table.rows == [] and "no external benchmark scores" in table.notes[0]
