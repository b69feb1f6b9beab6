"""The check that a study's name and instructions name no model, judge or condition: words after
normalisation, not substrings. Before, "Which is Birch?" (a model "Birch 2"), "rubric‑injected"
with a non-breaking hyphen (U+2011) and "the injected reply" all passed."""

import pytest

from annotation.models import Study
from annotation.services.blinding import CONDITION_STEMS, blinding_findings, words
from annotation.services.studies import StudyInputError, StudySpec, study_create
from benchmark.models import Condition, ModelEndpoint

pytestmark = pytest.mark.django_db


@pytest.fixture
def birch(run):
    """The test run, its first model now called "Birch 2"."""
    ModelEndpoint.objects.filter(name="zephyr-secret-large").update(display_name="Birch 2")
    return run


def _create(run, people, **fields):
    spec = {"name": "Which reply is better?", "overlap": 2, "seed": 1, "run": run, **fields}
    return study_create(spec=StudySpec(kind="pairwise", annotators=people, **spec))


@pytest.mark.parametrize(
    ("field", "text", "named"),
    [
        ("name", "Which is Birch?", "birch"),
        ("instructions", "Prefer the rubric\u2011injected one.", "injected"),
        ("instructions", "Pick the injected reply.", "injected"),
        ("instructions", "Is this the VANILLA answer?", "vanilla"),
        ("name", "Rubric\u00adinjection check", "rubricinjection"),  # a soft hyphen inside
        ("instructions", "Compare against ｂｉｒｃｈ.", "birch"),  # full-width letters
        ("instructions", "Say which reply is quartz_hidden_mini.", "quartz-hidden-mini"),
        ("name", "Zephyr\u2014Secret\u2014Large vs the rest", "zephyr-secret-large"),
        ("instructions", "A reply by quartzhiddenmini?", "quartz-hidden-mini"),
        ("instructions", "Quartz or not?", "quartz"),
    ],
)
def test_names_and_condition_words_are_refused_however_written(
    birch, make_annotators, field, text, named
):
    with pytest.raises(StudyInputError) as refused:
        _create(birch, make_annotators(2), **{field: text})
    message = " ".join(refused.value.errors[field])
    assert "must not reveal" in message and repr(named) in message, message
    assert not Study.objects.exists()


@pytest.mark.parametrize(
    "instructions",
    [
        "Read the conversation and the rubric, then pick the reply that helps the user more. "
        "Prefer a large, concrete next step over a small generic one; a mini summary is fine.",
        "Judge each response against the rubric. If both are equally good, choose a tie.",
        "Birchwood Lane is the user's street; the camera question is a red herring.",
        "Explain your choice in one or two sentences (the judge model is not shown to you).",
    ],
)
def test_innocent_instructions_pass(birch, make_annotators, instructions):
    """Generic words that model names share with instructions (large, small, mini, judge,
    model, reply...) and words that merely contain a name ("Birchwood") pass."""
    study = _create(birch, make_annotators(2), instructions=instructions)
    assert study.instructions == instructions


def test_every_condition_is_caught():
    for text in (*Condition.values, *Condition.labels):
        assert any(s in w for w in words(text) for s in CONDITION_STEMS), text
        assert blinding_findings(text, []), text


def test_normalisation_makes_every_dash_a_hyphen_and_folds_case():
    assert words("Rubric\u2011Injected \u2013 STRASSE\u2212ß") == [
        "rubric",
        "injected",
        "strasse",
        "ss",
    ]
    assert blinding_findings("GPT\uff0d4o wins", ["gpt-4o"]) == ["gpt-4o"]
    assert blinding_findings("gpt4o", ["GPT-4o"]) == ["GPT-4o"]
    assert blinding_findings("a 4o reply", ["GPT-4o"]) == []  # "4o" alone has too few letters


@pytest.mark.parametrize(
    ("field", "text"),
    [
        ("name", "Which is Birch?"),
        ("instructions", "Pick the injected reply."),
        ("name", "Oracle?"),
    ],
)
def test_an_admin_edit_keeps_the_study_blind(birch, make_annotators, field, text):
    """Before, the admin's change form took any new name or instructions unchecked."""
    from annotation.admin import StudyAdminForm

    study = _create(birch, make_annotators(2))
    data = {
        "name": study.name,
        "status": study.status,
        "instructions": "",
        "lease_minutes": study.lease_minutes,
        field: text,
    }
    form = StudyAdminForm(data, instance=study)
    assert not form.is_valid()
    assert "must not reveal" in " ".join(form.errors[field]), form.errors
    study.refresh_from_db()
    assert study.name == "Which reply is better?" and study.instructions == ""
    data[field] = "Which closing reply helps the user more?"
    assert StudyAdminForm(data, instance=study).is_valid()
