import pytest

from benchmark.evaluation.evidence import grade_evidence, quote_in_reply, split_fragments
from benchmark.evaluation.judge_output import JudgeOutputError, parse_judge_output

REPLY = (
    "Here’s the plan.\n\n- **Pack the projector stand last**, so it comes out first.\n"
    "Also: label the “power strip” bag."
)


def test_quote_must_be_verbatim_up_to_whitespace_and_quote_characters():
    assert quote_in_reply("Pack the projector stand last", REPLY)
    assert quote_in_reply('label the "power strip"   bag', REPLY)  # straight vs curly, spaces
    assert quote_in_reply("Here's the plan.", REPLY)
    assert not quote_in_reply("Pack the projector last", REPLY)  # condensed: not verbatim
    assert not quote_in_reply("", REPLY)


def test_fragments_are_split_on_quotes_and_separators():
    assert split_fragments('"first quoted bit" and "second quoted bit"') == [
        "first quoted bit",
        "second quoted bit",
    ]
    assert split_fragments("“curly one here” … “and another one”") == [
        "curly one here",
        "and another one",
    ]
    assert split_fragments("plain text one / plain text two") == [
        "plain text one",
        "plain text two",
    ]


def test_grading_reports_exact_close_and_missing_fragments():
    grade = grade_evidence(
        '"Pack the projector stand last" and "**label the power strip bag**" and '
        '"rent a van for the day"',
        REPLY,
    )
    assert [g for _, g in grade.fragments] == ["exact", "close", "not_found"]
    assert grade.status == "close"
    assert grade.found_share == pytest.approx(2 / 3)
    assert grade_evidence('"so it comes out first"', REPLY).status == "exact"
    assert grade_evidence('"nothing like this at all here"', REPLY).status == "not_found"
    assert grade_evidence("", REPLY).status == "none"


GOOD = (
    '{"verdict": "PASS", "rationale": "Grounded in the install order.", '
    '"evidence": "Pack the projector stand last"}'
)


def test_judge_output_parses_plain_and_fenced_json():
    parsed = parse_judge_output(GOOD, reply=REPLY)
    assert (parsed.verdict, parsed.evidence) == ("PASS", "Pack the projector stand last")
    assert parse_judge_output(f"```json\n{GOOD}\n```", reply=REPLY).verdict == "PASS"
    lower = GOOD.replace('"PASS"', '"partial"')
    assert parse_judge_output(lower, reply=REPLY).verdict == "PARTIAL"


@pytest.mark.parametrize(
    ("output", "message"),
    [
        ("", "empty"),
        ("The reply passes.", "not a JSON object"),
        ("[1, 2]", "must be a JSON object"),
        ('{"verdict": "PASS", "rationale": "x"}', r"missing key\(s\): evidence"),
        (GOOD.replace('"PASS"', '"GOOD"'), "verdict must be one of"),
        (GOOD.replace('"PASS"', "1"), "must be strings"),
        (GOOD.replace("Grounded in the install order.", " "), "rationale is empty"),
        (
            GOOD.replace("Pack the projector stand last", "Pack the van first"),
            "not a verbatim quote",
        ),
        ("{" * 5000, "not a JSON object"),
    ],
)
def test_judge_output_errors_are_clear_and_of_one_type(output, message):
    with pytest.raises(JudgeOutputError, match=message):
        parse_judge_output(output, reply=REPLY)
