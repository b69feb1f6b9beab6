"""Property-based tests (Hypothesis) of the two parsers that read untrusted text.

- Corpus import: any mutation of a valid ``final_dialogues.jsonl`` line — a key deleted, a value
  replaced by any JSON value (huge numbers, NUL characters, unpaired surrogates, long strings,
  markup), the line's bytes cut, spliced or re-encoded — either imports correctly (the export
  gives back every key of the line) or is rejected with ``CorpusImportError`` whose every error
  names a line and a JSON path, and leaves the database exactly as it was.
- Judge output: ``parse_judge_output`` raises nothing but ``JudgeOutputError``, whatever the
  text, and what it accepts really is a verdict with a verbatim quote.

Derandomised, so that CI and a developer see the same examples; the examples cover both
databases' limits (PostgreSQL refuses NUL in text, enforces column lengths; SQLite does not).
"""

import io
import json
import re

import pytest
from django.db import transaction
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from benchmark.corpus.exporter import dialogue_to_record
from benchmark.corpus.importer import CorpusImportError, corpus_import
from benchmark.evaluation.evidence import quote_in_reply
from benchmark.evaluation.judge_output import JudgeOutputError, parse_judge_output
from benchmark.models import Anchor, Blueprint, Dialogue, Persona, Scenario, Trigger, Turn
from tests.factories import dialogue_record

PROPERTY_SETTINGS = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# --- Corpus lines ------------------------------------------------------------------------------

NASTY_TEXT = st.sampled_from(
    [
        "",
        " ",
        "a\x00b",
        "\ud800",
        "x" * 300,
        "<script>alert(1)</script>",
        "../../etc/passwd",
        "Zoë ☕ 🎉",
        "\u202eevil",
        "1e309",
    ]
)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.sampled_from([0, -1, 32768, 2**63, 10**30, 10**300])
    # Beyond 2**53 a float's JSON text (exact in PostgreSQL's jsonb) and Python's double differ.
    | st.floats(min_value=-1e15, max_value=1e15)
    | st.text(max_size=40)
    | NASTY_TEXT
)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=8,
)


def _paths(value, prefix=()):
    """Every (path, value) inside a JSON document, the root excluded."""
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return
    for key, item in items:
        yield (*prefix, key), item
        yield from _paths(item, (*prefix, key))


def _container(record, path):
    for part in path[:-1]:
        record = record[part]
    return record


@st.composite
def mutated_records(draw) -> dict:
    """A valid record with one to three mutations at random places."""
    record = dialogue_record(n_turns=draw(st.integers(8, 10)))
    for _ in range(draw(st.integers(1, 3))):
        paths = [path for path, _ in _paths(record)]
        path = draw(st.sampled_from(paths))
        parent = _container(record, path)
        action = draw(st.sampled_from(["delete", "replace", "replace", "retype"]))
        if action == "delete" and isinstance(parent, dict):
            del parent[path[-1]]
        elif action == "retype":
            value = parent[path[-1]]
            parent[path[-1]] = str(value) if not isinstance(value, str) else [value]
        else:
            parent[path[-1]] = draw(JSON_VALUES)
    return record


def _line(record: dict) -> bytes:
    # ensure_ascii keeps unpaired surrogates as \ud800 escapes, as a real file would carry them.
    return (json.dumps(record, ensure_ascii=True) + "\n").encode()


@st.composite
def mangled_lines(draw) -> bytes:
    """A valid line's bytes cut, spliced with random bytes, or re-encoded."""
    line = (json.dumps(dialogue_record(), ensure_ascii=False) + "\n").encode("utf-8")
    action = draw(st.sampled_from(["cut", "splice", "latin-1", "utf-16", "bom"]))
    if action == "cut":
        return line[: draw(st.integers(0, len(line) - 1))]
    if action == "splice":
        at = draw(st.integers(0, len(line)))
        return line[:at] + draw(st.binary(min_size=1, max_size=8)) + line[at:]
    text = line.decode("utf-8")
    if action == "latin-1":
        return text.encode("latin-1", errors="replace")
    if action == "utf-16":
        return text.encode("utf-16")
    return b"\xef\xbb\xbf" + line  # a UTF-8 byte-order mark: allowed


def _normalised(record: dict) -> dict:
    """What the export gives back for a record: a turn without a planner comes back with
    ``"planner": null`` (the one key the schema lets a turn leave out)."""
    record = json.loads(json.dumps(record))
    for turn in record.get("turn_records") or []:
        if isinstance(turn, dict):
            turn.setdefault("planner", None)
    return record


CORPUS_MODELS = (Persona, Scenario, Blueprint, Dialogue, Turn, Trigger, Anchor)
ERROR_TEXT = re.compile(r"^line \d+, \$\S*: .+", re.DOTALL)


def _counts() -> tuple[int, ...]:
    return tuple(model.objects.count() for model in CORPUS_MODELS)


def _import_is_correct_or_cleanly_rejected(data: bytes, record: dict | None) -> None:
    before = _counts()
    try:
        with transaction.atomic():
            summary = corpus_import(stream=io.BytesIO(data), source="mutated.jsonl")
            assert summary.dialogues == 1
            event("imported")
            if record is not None:
                dialogue = Dialogue.objects.get(unique_id_eval=record["unique_id_eval"])
                # The full export: official-only rewrites a turn whose planner scheduled a
                # trigger type the release does not know (exporter._official_planner), so it
                # is not what the import stored.
                exported = dialogue_to_record(dialogue)
                for key, value in _normalised(record).items():
                    if key != "x_workbench":
                        assert exported[key] == value, f"{key} did not survive the import"
            transaction.set_rollback(True)  # next example starts from the same database
    except CorpusImportError as exc:
        event("rejected")
        assert exc.errors and exc.total >= len(exc.errors)
        for error in exc.errors:
            assert error.line >= 1 and error.path.startswith("$") and error.message
            assert ERROR_TEXT.match(str(error)), str(error)
        assert _counts() == before, "a rejected file left rows behind"


@pytest.mark.django_db
@PROPERTY_SETTINGS
@given(record=mutated_records())
def test_a_mutated_record_imports_correctly_or_is_rejected_naming_line_and_field(record):
    _import_is_correct_or_cleanly_rejected(_line(record), record)


@pytest.mark.django_db
@PROPERTY_SETTINGS
@given(data=mangled_lines())
def test_a_mangled_line_imports_or_is_rejected_naming_the_line(data):
    _import_is_correct_or_cleanly_rejected(data, None)


@pytest.mark.django_db
@settings(PROPERTY_SETTINGS, max_examples=40)
@given(bad=mutated_records(), position=st.integers(0, 3))
def test_one_bad_line_among_good_ones_rejects_the_whole_file_and_writes_nothing(bad, position):
    """The bad line is reported by its own number, and the good lines are not written."""
    good = [
        dialogue_record(
            f"BP_GOOD_{i}_Q__style4__{i:032x}",
            blueprint_id=f"BP_GOOD_{i}_Q",
            persona_uuid=f"{i:032x}",
        )
        for i in range(1, 4)
    ]
    bad["unique_id_eval"] = "BP_BAD__style4__" + "f" * 32 if "unique_id_eval" in bad else None
    lines = [_line(r) for r in good]
    lines.insert(min(position, len(lines)), _line(bad))
    before = _counts()
    try:
        with transaction.atomic():
            corpus_import(stream=io.BytesIO(b"".join(lines)))
            transaction.set_rollback(True)
    except CorpusImportError as exc:
        assert {e.line for e in exc.errors} == {min(position, 3) + 1}
        assert _counts() == before


def test_known_database_limits_are_line_and_field_errors(db):
    """Examples Hypothesis found before the parser checked them (each raised a database or
    decoding error, or imported on SQLite what PostgreSQL refuses)."""
    cases = {
        "$.turn_records[0].user_message": ("turn_records", 0, "user_message", "a\x00b"),
        "$.turn_records[1].assistant_response": (
            "turn_records",
            1,
            "assistant_response",
            "\ud800",
        ),
        "$.uuid": ("uuid", None, None, "u" * 65),
        "$.unique_id_eval": ("unique_id_eval", None, None, "d" * 256),
        "$.num_turns_completed": ("num_turns_completed", None, None, 40_000),
    }
    for path, (key, index, field, value) in cases.items():
        record = dialogue_record()
        if index is None:
            record[key] = value
        else:
            record[key][index][field] = value
        with pytest.raises(CorpusImportError) as caught:
            corpus_import(stream=io.BytesIO(_line(record)))
        assert [e.path for e in caught.value.errors] == [path], caught.value
    for raw, message in [
        (b'{"a": NaN}\n', "NaN is not a JSON number"),
        (b'{"a": 1' + b"1" * 5000 + b"}\n", "invalid JSON"),
        (b"[" * 50_000 + b"]" * 50_000 + b"\n", "nested too deeply"),
    ]:
        with pytest.raises(CorpusImportError, match=re.escape(message)):
            corpus_import(stream=io.BytesIO(raw))


# --- Judge output ------------------------------------------------------------------------------

REPLY = "Book the larger room and send the agenda on Monday, before the venue deadline."
VERDICT_OBJECTS = st.fixed_dictionaries(
    {
        "verdict": st.sampled_from(["PASS", "pass", "Partial", "FAIL", "MAYBE", 1, None]),
        "rationale": st.text(max_size=20) | st.integers(),
        "evidence": st.sampled_from(["send the agenda on Monday", "“send the agenda”", ""])
        | st.text(max_size=30),
    },
    optional={"extra": JSON_VALUES},
)
JUDGE_TEXTS = (
    st.text(max_size=200)
    | JSON_VALUES.map(json.dumps)
    | VERDICT_OBJECTS.map(json.dumps)
    | VERDICT_OBJECTS.map(lambda v: f"```json\n{json.dumps(v)}\n```")
    | st.sampled_from(["[" * 5000, "1" * 5000, '{"verdict": NaN}', "```\n```", "\ud800"])
)


@settings(max_examples=400, deadline=None, derandomize=True, database=None)
@given(text=JUDGE_TEXTS, reply=st.sampled_from([REPLY, "", "\x00"]) | st.text(max_size=40))
def test_parse_judge_output_raises_only_its_own_error(text, reply):
    try:
        parsed = parse_judge_output(text, reply=reply)
    except JudgeOutputError as exc:
        assert str(exc)  # a reason fit to send back to the judge
    else:
        assert parsed.verdict in ("PASS", "PARTIAL", "FAIL")
        assert parsed.rationale and parsed.evidence
        assert quote_in_reply(parsed.evidence, reply)


def test_parse_judge_output_on_inputs_hypothesis_found():
    for text in ["1" * 5000, '{"verdict": "PASS", "rationale": "r", "evidence": 1' + "0" * 5000]:
        with pytest.raises(JudgeOutputError):
            parse_judge_output(text, reply=REPLY)
