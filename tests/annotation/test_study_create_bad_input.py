"""The study-creation form with bad input — the researchers' page (/annotate/studies/new), the
admin's add view and the htmx kind switch (a GET with HX-Request) — given empty, huge, wrongly
encoded and malicious values, as full POSTs. Never a 5xx; a clear error on the field concerned;
nothing half-written (no Study, StudyItem or Rater row after a failure); nothing given is
rendered as markup."""

import dataclasses
import re
from html import unescape
from html.parser import HTMLParser
from urllib.parse import quote_from_bytes

import pytest
from django.test import Client
from django.urls import reverse

from annotation import kinds
from annotation.models import Rater, Study, StudyItem
from annotation.services.studies import (
    GOLD_ERRORS_SHOWN,
    StudyInputError,
    StudySpec,
    check_study_spec,
)
from benchmark.models import ModelEndpoint
from tests.annotation.conftest import form_data

pytestmark = pytest.mark.django_db

SCRIPT = "<script>alert(1)</script>"
IMG = '"><img src=x onerror=alert(1)>'
WHERE = ("page", "admin")


@pytest.fixture
def people(make_annotators):
    return make_annotators(2)


@pytest.fixture
def staff_client(client_for, researcher, admin_user):
    """The page as a researcher, the admin as an admin."""

    def client(where):
        return client_for(researcher if where == "page" else admin_user)

    return client


def url_of(where: str) -> str:
    return reverse("annotation:study_new" if where == "page" else "admin:annotation_study_add")


def nothing_written():
    return not (Study.objects.exists() or StudyItem.objects.exists() or Rater.objects.exists())


class _Element(HTMLParser):
    """The inner HTML of the element with a given id (nesting counted)."""

    def __init__(self, wanted: str):
        super().__init__(convert_charrefs=False)
        self.wanted, self.depth, self.parts = wanted, 0, []

    def handle_starttag(self, tag, attrs):
        if self.depth:
            self.depth += tag not in VOID
            self.parts.append(self.get_starttag_text())
        elif dict(attrs).get("id") == self.wanted:
            self.depth = 1

    def handle_startendtag(self, tag, attrs):
        if self.depth:
            self.parts.append(self.get_starttag_text())

    def handle_endtag(self, tag):
        if self.depth:
            self.depth -= 1
            if self.depth:
                self.parts.append(f"</{tag}>")

    def handle_data(self, data):
        if self.depth:
            self.parts.append(data)

    def handle_entityref(self, name):
        self.handle_data(f"&{name};")

    def handle_charref(self, name):
        self.handle_data(f"&#{name};")


VOID = {"input", "br", "img", "meta", "link", "hr"}


def shown_errors(html: str, where: str, field: str) -> str:
    """The error text rendered in the field's own row of the form (page or admin)."""
    parser = _Element(f"field-{field}" if where == "page" else f"row-{field}")
    parser.feed(html)
    row = "".join(parser.parts)
    assert row, f"no row for {field}"
    lists = re.findall(r'<ul class="errorlist[^"]*"[^>]*>(.*?)</ul>', row, re.S)
    return unescape(re.sub(r"<[^>]+>", " ", " ".join(lists)))


def assert_inert(html: str) -> None:
    assert SCRIPT not in html and "<img src=x" not in html and "<b>x</b>" not in html


def digits_of(number: int, zero: int) -> str:
    """The number written with another script's digits (zero: the code point of its 0)."""
    return "".join(chr(zero + int(c)) for c in str(number))


# Each: the changes to a valid submission, the field the error must be on, part of its text.
BAD = {
    "empty name": ({"name": ""}, "name", "This field is required"),
    "blank name": ({"name": "   "}, "name", "This field is required"),
    "100,000-character name": ({"name": "x" * 100_000}, "name", "at most 200 characters"),
    "100,000-character instructions": (
        {"instructions": "y" * 100_000},
        "instructions",
        "at most 10000 characters",
    ),
    "NUL in the name": ({"name": "a\x00b"}, "name", "Null characters are not allowed"),
    "NUL in the instructions": ({"instructions": "\x00"}, "instructions", "Null characters"),
    "NUL in gold": ({"gold": "key\x00 A"}, "gold", "Null characters"),
    "400-digit k": ({"overlap": "9" * 400}, "overlap", "less than or equal to 20"),
    "negative k": ({"overlap": "-1"}, "overlap", "greater than or equal to 1"),
    "zero k": ({"overlap": "0"}, "overlap", "greater than or equal to 1"),
    "fractional k": ({"overlap": "2.5"}, "overlap", "Enter a whole number"),
    "a superscript digit as k": ({"overlap": "²"}, "overlap", "Enter a whole number"),
    "zero lease": ({"lease_minutes": "0"}, "lease_minutes", "greater than or equal to 1"),
    "negative lease": ({"lease_minutes": "-30"}, "lease_minutes", "greater than or equal to 1"),
    "huge lease": ({"lease_minutes": "100000"}, "lease_minutes", "less than or equal to 1440"),
    "400-digit lease": ({"lease_minutes": "9" * 400}, "lease_minutes", "less than or equal"),
    "400-digit seed": ({"seed": "9" * 400}, "seed", "less than or equal to 4294967295"),
    "5,000-digit seed": ({"seed": "9" * 5000}, "seed", "Enter a whole number"),
    "negative seed": ({"seed": "-5"}, "seed", "greater than or equal to 0"),
    "400-digit sample": ({"max_items": "9" * 400}, "max_items", "less than or equal to 1000000"),
    "zero sample": ({"max_items": "0"}, "max_items", "greater than or equal to 1"),
    "no run": ({"run": ""}, "run", "Choose the evaluation run"),
    "nonexistent run": ({"run": "999999"}, "run", "Select a valid choice"),
    "400-digit run": ({"run": "9" * 400}, "run", "Select a valid choice"),
    "NUL as the run": ({"run": "\x00"}, "run", "Null characters are not allowed"),
    "SQL as the run": ({"run": "1 OR 1=1"}, "run", "Select a valid choice"),
    "no annotators": ({"annotators": []}, "annotators", "This field is required"),
    "400-digit annotator id": ({"annotators": ["9" * 400]}, "annotators", "is not a valid value"),
    "negative annotator id": ({"annotators": ["-1"]}, "annotators", "is not a valid value"),
    "nonexistent annotator": ({"annotators": ["999999"]}, "annotators", "not one of the available"),
    "NUL as an annotator": ({"annotators": ["\x00"]}, "annotators", "Null characters"),
    "SQL as an annotator": ({"annotators": ["1) OR (1=1"]}, "annotators", "is not a valid value"),
    "990 nonexistent annotators": (  # with the other fields, just under Django's 1,000
        {"annotators": [str(n) for n in range(500_000, 500_990)]},
        "annotators",
        "not one of the available",
    ),
    "400-digit model id": ({"endpoints": ["9" * 400]}, "endpoints", "is not a valid value"),
    "markup as the kind": ({"kind": "<b>x</b>"}, "kind", "Select a valid choice. <b>x</b>"),
    "NUL as the trigger type": ({"trigger_type": "\x00"}, "trigger_type", "Select a valid choice"),
    "SQL as the trigger type": (
        {"trigger_type": "RECOVERY' OR '1'='1"},
        "trigger_type",
        "Select a valid choice",
    ),
    "an unknown condition": (
        {"kind": "direct_rating", "condition": "spicy"},
        "condition",
        "Select a valid choice",
    ),
    "an unknown dialogue status": (
        {"kind": "dialogue_audit", "dialogue_status": "<b>x</b>"},
        "dialogue_status",
        "Select a valid choice",
    ),
    "markup in gold": ({"gold": f"{SCRIPT} A"}, "gold", "no item of this selection has key"),
    "one 100,000-character gold line": ({"gold": "k" * 100_000 + " A"}, "gold", "kkkk…"),
    "markup in the name and a bad k": ({"name": SCRIPT, "overlap": "x"}, "overlap", "whole number"),
}


@pytest.mark.parametrize("where", WHERE)
@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_refused_on_its_field_and_writes_nothing(
    run, people, staff_client, where, case
):
    changes, field, fragment = BAD[case]
    response = staff_client(where).post(url_of(where), form_data(run, people, **changes))
    assert response.status_code == 200, case
    html = response.content.decode()
    assert fragment in shown_errors(html, where, field), (case, response.context["form"].errors)
    assert_inert(html)
    assert nothing_written(), case


@pytest.mark.parametrize("where", WHERE)
def test_an_empty_submission_names_every_required_field(staff_client, where):
    """Before, the admin treated an empty POST as no POST: a blank form, and not a word why."""
    response = staff_client(where).post(url_of(where), {})
    html = response.content.decode()
    assert response.status_code == 200
    for field in ("kind", "name", "overlap", "lease_minutes", "annotators"):
        assert "This field is required" in shown_errors(html, where, field), field
    assert nothing_written()


@pytest.mark.parametrize("where", WHERE)
def test_people_who_are_not_annotators_cannot_be_chosen(
    run, people, staff_client, researcher, admin_user, outsider, where
):
    for person in (researcher, admin_user, outsider):
        response = staff_client(where).post(
            url_of(where), form_data(run, people, annotators=[str(people[0].pk), str(person.pk)])
        )
        errors = shown_errors(response.content.decode(), where, "annotators")
        assert f"{person.pk} is not one of the available choices" in errors
    audit = form_data(run, people, kind="dialogue_audit", adjudicators=[str(outsider.pk)], run="")
    response = staff_client(where).post(url_of(where), audit)
    errors = shown_errors(response.content.decode(), where, "adjudicators")
    assert f"{outsider.pk} is not one of the available choices" in errors
    assert nothing_written()


@pytest.mark.parametrize("where", WHERE)
def test_a_model_the_run_did_not_evaluate_is_refused_by_name(run, people, staff_client, where):
    """Before: a judge (or any model outside the run) among the chosen models was silently left
    out, and as the only one chosen the error blamed the run."""
    judge = ModelEndpoint.objects.get(name="oracle-judge-alpha")
    model = ModelEndpoint.objects.get(name="zephyr-secret-large")
    for chosen in ([judge], [model, judge]):
        response = staff_client(where).post(
            url_of(where), form_data(run, people, endpoints=[str(e.pk) for e in chosen])
        )
        errors = shown_errors(response.content.decode(), where, "endpoints")
        assert "Not a model of this run: oracle-judge-alpha." in errors
        assert nothing_written()


@pytest.mark.parametrize("where", WHERE)
def test_thousands_of_bad_gold_lines_give_a_short_message(run, people, staff_client, where):
    gold = "".join(f"missing-key-{n} A\n" for n in range(25_000))
    response = staff_client(where).post(url_of(where), form_data(run, people, gold=gold))
    errors = response.context["form"].errors["gold"]
    assert len(errors) == GOLD_ERRORS_SHOWN + 1
    assert errors[-1] == "… and 24,980 more lines with problems (25,000 in all)."
    assert nothing_written()


@pytest.mark.parametrize("where", WHERE)
def test_ten_thousand_annotator_ids_are_refused_before_the_form(run, people, staff_client, where):
    """More values than Django reads from one request (DATA_UPLOAD_MAX_NUMBER_FIELDS, 1,000):
    a 400, not a 500, and nothing written (the 990 above reach the form)."""
    ids = [str(n) for n in range(1, 10_001)]
    response = staff_client(where).post(url_of(where), form_data(run, people, annotators=ids))
    assert response.status_code == 400
    if where == "page":
        switch = staff_client(where).get(
            url_of(where), {"kind": "pairwise", "annotators": ids}, headers={"HX-Request": "true"}
        )
        assert switch.status_code == 400
    assert nothing_written()


# --- Accepted, and stored and shown as the text it is -----------------------------------------


@pytest.mark.parametrize("where", WHERE)
def test_markup_and_sql_are_stored_as_text_and_never_rendered_as_markup(
    run, people, staff_client, where
):
    client = staff_client(where)
    annotator = Client()
    annotator.force_login(people[0])
    name = f"{SCRIPT}'; DROP TABLE annotation_study; --"
    response = client.post(
        url_of(where), form_data(run, people, name=name, instructions=f"{IMG} 1 OR 1=1")
    )
    assert response.status_code == 302
    study = Study.objects.get()
    assert study.name == name and study.instructions == f"{IMG} 1 OR 1=1"
    assert study.items.count() == 8 and Rater.objects.count() == 2
    pages = [
        (client, reverse("annotation:study_list")),
        (client, reverse("annotation:study_detail", args=[study.pk])),
        (client, reverse("admin:annotation_study_changelist")),
        (client, reverse("admin:annotation_study_change", args=[study.pk])),
        (annotator, reverse("annotation:home")),
        (annotator, reverse("annotation:workspace", args=[study.pk])),
    ]
    for page_client, url in pages:
        page = page_client.get(url)
        if page.status_code == 302:  # the researcher has no admin
            continue
        html = page.content.decode()
        assert page.status_code == 200, url
        assert_inert(html)
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html, url


def _raw_post(client, url, fields: list[tuple[str, bytes]]):
    """A form body of raw bytes, as a browser with a broken encoding might send it."""
    body = "&".join(f"{k}={quote_from_bytes(v)}" for k, v in fields)
    return client.post(url, body, content_type="application/x-www-form-urlencoded")


@pytest.mark.parametrize("where", WHERE)
@pytest.mark.parametrize(
    "raw_name",
    [
        "Unpaired \ud800 surrogate".encode("utf-8", "surrogatepass"),
        "Zoë in latin-1".encode("latin-1"),
        b"\xff\xfe binary \x80",
    ],
    ids=["unpaired surrogate", "latin-1", "invalid UTF-8"],
)
def test_wrongly_encoded_text_is_read_with_replacement_characters(
    run, people, staff_client, where, raw_name
):
    """The body is decoded as UTF-8 with replacement: what is stored is always valid text
    (PostgreSQL would refuse a surrogate), whatever the bytes were."""
    fields = [(k, v.encode()) for k, v in form_data(run, people).items() if k != "annotators"]
    fields = [(k, v) for k, v in fields if k != "name"] + [("name", raw_name)]
    fields += [("annotators", str(p.pk).encode()) for p in people]
    response = _raw_post(staff_client(where), url_of(where), fields)
    assert response.status_code == 302
    name = Study.objects.get().name
    assert "\ufffd" in name
    name.encode("utf-8")  # no surrogate left: raises if there were one


@pytest.mark.parametrize("where", WHERE)
def test_non_ascii_digits_are_read_as_the_numbers_they_write(run, people, staff_client, where):
    """Python reads Arabic-Indic and full-width digits as digits (a browser's number field
    sends ASCII, but nothing breaks if one does not): k, the run and the people they name."""
    data = form_data(
        run,
        people,
        overlap=digits_of(2, 0x660),  # Arabic-Indic ٢
        lease_minutes=digits_of(45, 0xFF10),  # full-width ４５
        run=digits_of(run.pk, 0xFF10),
        annotators=[digits_of(p.pk, 0x660) for p in people],
    )
    response = staff_client(where).post(url_of(where), data)
    assert response.status_code == 302, response.context["form"].errors
    study = Study.objects.get()
    assert (study.overlap, study.lease_minutes, study.run_id) == (2, 45, run.pk)
    assert set(study.raters.values_list("user_id", flat=True)) == {p.pk for p in people}


# --- The htmx kind switch ---------------------------------------------------------------------


@pytest.mark.parametrize("case", sorted(BAD))
def test_the_kind_switch_with_bad_values_rerenders_the_form_and_writes_nothing(
    run, people, staff_client, case
):
    changes, _, _ = BAD[case]
    for kind in [k.key for k in kinds.all_kinds()]:
        data = form_data(run, people, **changes) | {"kind": changes.get("kind", kind)}
        response = staff_client("page").get(url_of("page"), data, headers={"HX-Request": "true"})
        html = response.content.decode()
        assert response.status_code == 200, (case, kind)
        assert html.lstrip().startswith('<form id="study-form"') and "<html" not in html
        assert "errorlist" not in html  # a switch, not a submission
        assert_inert(html)
    assert nothing_written()


def test_the_kind_switch_keeps_a_value_with_markup_as_an_attribute_value(run, people, staff_client):
    response = staff_client("page").get(
        url_of("page"),
        {"kind": "direct_rating", "name": IMG, "instructions": SCRIPT},
        headers={"HX-Request": "true"},
    )
    html = response.content.decode()
    assert 'value="&quot;&gt;&lt;img src=x onerror=alert(1)&gt;"' in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;</textarea>" in html
    assert_inert(html)


# --- The service, on its own ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "field", "fragment"),
    [
        ({"name": "x" * 201}, "name", "At most 200 characters"),
        ({"name": "a\x00b"}, "name", "NUL"),
        ({"instructions": "y" * 10_001}, "instructions", "At most 10,000 characters"),
        ({"instructions": "\x00"}, "instructions", "NUL"),
        ({"gold": "\x00"}, "gold", "NUL"),
        ({"lease_minutes": 40_000}, "lease_minutes", "between one minute and 1440"),
        ({"lease_minutes": 0}, "lease_minutes", "between one minute"),
        ({"max_items": 10**400}, "max_items", "from 1 to 1,000,000"),
        ({"seed": 10**400}, "seed", "0 to 4294967295"),
        ({"seed": -1}, "seed", "0 to 4294967295"),
    ],
)
def test_the_service_refuses_what_the_forms_refuse(run, people, fields, field, fragment):
    """Callers other than the forms (scripts, the demo) get the same field errors: on
    PostgreSQL an over-long name, a NUL or a lease past a small integer was a database error."""
    spec = StudySpec(kind="pairwise", name="A study", annotators=people, run=run)
    spec = dataclasses.replace(spec, **fields)
    with pytest.raises(StudyInputError) as caught:
        check_study_spec(spec)
    assert fragment in " ".join(caught.value.errors[field]), caught.value.errors
    assert nothing_written()


def test_the_admin_change_form_caps_the_instructions_too(make_study, client_for, admin_user):
    study = make_study()
    response = client_for(admin_user).post(
        reverse("admin:annotation_study_change", args=[study.pk]),
        {
            "name": study.name,
            "status": "open",
            "instructions": "y" * 10_001,
            "lease_minutes": "30",
            "raters-TOTAL_FORMS": "0",
            "raters-INITIAL_FORMS": "0",
            "archive_events-TOTAL_FORMS": "0",
            "archive_events-INITIAL_FORMS": "0",
        },
    )
    assert response.status_code == 200
    assert "at most 10000 characters" in response.content.decode()
    study.refresh_from_db()
    assert study.instructions == ""
