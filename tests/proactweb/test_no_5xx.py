"""No 5xx anywhere: every route of the URLconf (walked from ``get_resolver()``, the admin's
included), its path arguments filled with real objects and with hostile values, asked for by
GET — with hostile values in every query parameter the views read — and by POST with hostile
form keys and values, as the anonymous, a rater (an annotator in a study) and a superuser.

A fixed list of hostile values keeps it bounded (well under a minute on SQLite). It runs on
PostgreSQL too (``DATABASE_URL``), where a NUL byte in a text parameter is refused by the
server rather than stored: the case that most often turned a bad URL into a 500.

Every response of 500 or more is collected (the client does not re-raise), and the test fails
listing each one as ``role METHOD url params → status``.
"""

import re
import sys
import traceback
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.core.signals import got_request_exception
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from django.urls.resolvers import RegexPattern, RoutePattern

from tests.proactweb import test_permission_matrix as matrix

# The permission matrix's data (the demo, one row of every model the admin shows, a rater's
# study) and its way of filling each URL with real objects.
world = matrix.world
_named_patterns, _url = matrix._named_patterns, matrix._url

pytestmark = pytest.mark.django_db

# What goes into a URL path segment, already percent-encoded as a client would send it.
HOSTILE_SEGMENTS = [  # the admin's routes get every other one: the first of each pair
    "9" * 30,  # beyond a 64-bit integer
    "00001",
    "%00",  # NUL: PostgreSQL refuses it in text
    "-1",
    "%C2%B2",  # "²": str.isdigit() says yes, int() says no
    "a%00b",
    "%FF%FE",  # not UTF-8
    "%D9%A3",  # "٣", an Arabic-Indic digit: int() takes it
    "..%2F..%2Fetc%2Fpasswd",
    "%20",
    "../..",
    "Zo%C3%AB%E2%98%95",
    "x" * 3000,
]
# What goes into a query parameter or a form field (the client encodes it).
HOSTILE_VALUES = [
    "",
    "-1",
    "0",
    "9" * 30,
    "1e309",
    "NaN",
    "\x00",
    "a\x00b",
    "²",
    "٣",
    "x" * 5000,
    "../../etc/passwd",
    "Zoë ☕",
    "<script>alert(1)</script>",
    "' OR 1=1 --",
    "[]",
]
# An admin list page's own parameters, one at a time: what a search, a page number, an ordering
# or a filter lookup (an id, a year, a flag) can be given.
# (A long text goes to the search alone: the others compare it and find nothing.)
ADMIN_LIST_VALUES = ["-1", "9" * 30, "\x00", "²"]
# Names no form has: a form must ignore them (or refuse them), never fail on them.
HOSTILE_KEYS = ["\x00", "x" * 300, "__proto__", "field[]", "²"]
ROLES = ("anonymous", "rater", "staff")


def _query_parameters() -> list[str]:
    """Every query parameter name the project's views read: the fields of the filter forms
    and of the API's query serializer, what views read from request.GET, and the admin's own
    (search, ordering, page, popup, to-field, the list filters' lookups)."""
    from annotation.forms import ExclusionForm, StudyCreateForm
    from benchmark.forms import DialogueFilterForm
    from stats.api import TableQuerySerializer
    from stats.forms import DashboardFilterForm
    from stats.viewer import TriggerFilterForm

    names = {"page", "archived", "format", "next", "_from_kind"}
    for form in (
        DialogueFilterForm,
        DashboardFilterForm,
        StudyCreateForm,
        ExclusionForm,
        TriggerFilterForm,
    ):
        names |= set(form.base_fields)
    names |= set(TableQuerySerializer().fields)
    names |= {"q", "o", "p", "e", "all", "_popup", "_to_field", "_changelist_filters"}
    names |= {"app_label", "model_name", "field_name", "term"}  # the admin's autocomplete
    return sorted(names)


def _admin_list_parameters(model_admin) -> list[str]:
    """What one admin list page reads: search, ordering, page, and its list filters' lookups
    (``<field>__exact`` and the like, the date hierarchy's parts)."""
    model = model_admin.model
    names = {"q", "o", "p", "_to_field"}
    for item in model_admin.list_filter:
        if isinstance(item, str):
            field = model._meta.get_field(item.split("__")[0])
            names |= {f"{item}__exact", f"{item}__isnull"}
            if field.is_relation:
                names |= {f"{item}__id__exact", f"{item}__{field.target_field.name}__exact"}
        elif isinstance(item, tuple):
            names.add(f"{item[0]}__exact")
        else:
            names.add(item.parameter_name)
    if model_admin.date_hierarchy:
        names |= {f"{model_admin.date_hierarchy}__{part}" for part in ("year", "month", "day")}
    return sorted(names)


def _form_fields() -> list[str]:
    """Every field name of the project's forms and of the models the admin edits."""
    from annotation import forms as annotation_forms
    from benchmark import forms as benchmark_forms
    from stats import forms as stats_forms

    names = set()
    for module in (annotation_forms, benchmark_forms, stats_forms):
        for value in vars(module).values():
            if isinstance(value, type) and hasattr(value, "base_fields"):
                names |= set(value.base_fields)
    for model in [*admin.site._registry, get_user_model()]:
        names |= {f.name for f in model._meta.get_fields() if f.concrete}
    names |= {"username", "password", "password1", "password2", "verdict", "label"}
    names |= {"confidence", "action", "_selected_action", "index", "select_across"}
    names |= {"_save", "_continue", "_addanother", "csrfmiddlewaretoken"}
    # Never "post": it confirms the admin's delete pages, and the sweep must not empty tables.
    return sorted(names - {"post"})


@dataclass(frozen=True)
class Route:
    name: str
    pattern: URLPattern
    route: str | None  # the full route text when every part is a path() route, else None


def _routes(patterns=None, prefix="", namespace="") -> Iterator[Route]:
    """Every URL pattern (named or not), with its full route text."""
    for item in get_resolver().url_patterns if patterns is None else patterns:
        part = _route_text(item.pattern)
        full = None if prefix is None or part is None else prefix + part
        if isinstance(item, URLResolver):
            inner = f"{namespace}{item.namespace}:" if item.namespace else namespace
            yield from _routes(item.url_patterns, full, inner)
        else:
            yield Route(f"{namespace}{item.name or ''}", item, full)


def _route_text(pattern) -> str | None:
    if isinstance(pattern, RoutePattern):
        return str(pattern)
    if isinstance(pattern, RegexPattern) and not pattern.regex.groups:
        text = str(pattern).removeprefix("^").removesuffix("$")
        return None if set(text) & set(".*+?[](){}|\\") else text
    return None


CONVERTER = re.compile(r"<(?:(?P<converter>\w+):)?(?P<name>\w+)>")


def _hostile_urls(route: str, segments: list[str]) -> Iterator[str]:
    """The route with its arguments hostile: for each value, all of them at once, then (if
    there are several) each in turn, the others a valid-looking "1"."""
    names = [m["name"] for m in CONVERTER.finditer(route)]
    for value in segments:
        for target in [None, *names] if len(names) > 1 else [None]:
            yield CONVERTER.sub(
                lambda m, t=target, v=value: v if t is None or m["name"] == t else "1", route
            )


def _clients(world) -> dict[str, Client]:
    clients = {}
    for role in ROLES:
        client = Client(raise_request_exception=False)
        user = {"anonymous": None, "rater": world["rater"], "staff": world["staff"]}[role]
        if user is not None:
            client.force_login(user)
        clients[role] = client
    return clients


def _encode(value: str) -> str:
    # An unpaired surrogate cannot be UTF-8: a browser sends it percent-encoded as its escape.
    return value.encode("utf-8", "surrogatepass").decode("latin-1")


def _rotated(names: list[str], i: int, values: list[str]) -> dict[str, str]:
    """Every name set, name k to value i + k: over len(values) requests each name sees every
    value, each time beside different values of the others."""
    return {key: _encode(values[(i + k) % len(values)]) for k, key in enumerate(names)}


class Sweep:
    """Asks, and keeps every 5xx with the line that raised (the client does not re-raise)."""

    def __init__(self, world):
        self.world = world
        self.clients = _clients(world)
        self.asked = 0
        self.failures: list[str] = []
        self._raised: list[str] = []
        got_request_exception.connect(self._record)

    def close(self):
        got_request_exception.disconnect(self._record)

    def _record(self, sender, request=None, **kwargs):
        frames = traceback.extract_tb(sys.exc_info()[2])
        ours = [f for f in frames if "/site-packages/" not in f.filename] or frames
        last = frames[-1]
        self._raised.append(
            f"{sys.exc_info()[0].__name__} at {ours[-1].filename}:{ours[-1].lineno}"
            f" (raised in {last.filename.rsplit('/', 3)[-1]}:{last.lineno})"
        )

    def ask(
        self, role: str, method: str, url: str, params: dict | None = None, htmx: bool = False
    ) -> None:
        self._raised.clear()
        client = self.clients[role]
        headers = {"HX-Request": "true"} if htmx else {}
        response = (client.get if method == "GET" else client.post)(
            url, params or {}, headers=headers
        )
        self.asked += 1
        if response.status_code >= 500:
            shown = {k[:20]: v[:20] for k, v in (params or {}).items()}
            failure = (
                f"{role} {method}{' (htmx)' if htmx else ''} {url[:120]} {str(shown)[:300]}"
                f" -> {response.status_code}: " + "; ".join(self._raised)
            )
            self.failures.append(failure)
        if method == "POST" and url.rstrip("/").endswith("logout"):
            self.clients = _clients(self.world)  # it worked: log them back in


@pytest.fixture
def sweep(world):
    asking = Sweep(world)
    yield asking
    asking.close()


def _valid_urls(world) -> dict[str, str]:
    models = {f"{m._meta.app_label}.{m._meta.model_name}": m for m in admin.site._registry} | {
        "auth.user": get_user_model()
    }
    return {name: _url(name, pattern, models, world) for name, pattern in _named_patterns()}


def _roles_for(name: str, staff_values: list[str], others: int = 1):
    """The admin sends everyone but staff to its login page before it reads anything: the
    others are asked once; staff with every value."""
    if name.startswith("admin:"):
        return [("staff", staff_values), *[(r, staff_values[:others]) for r in ROLES[:-1]]]
    return [(role, staff_values) for role in ROLES]


def test_no_path_argument_answers_5xx(sweep):
    """Every route with arguments, each argument in turn (and all at once) hostile."""
    for route in _routes():
        if route.route is None or not CONVERTER.search(route.route):
            continue
        # The admin's routes are one ModelAdmin's code per model: half the values each.
        segments = HOSTILE_SEGMENTS[::2] if route.name.startswith("admin:") else HOSTILE_SEGMENTS
        urls = list(_hostile_urls(route.route, segments))
        for role, chosen in _roles_for(route.name, urls, others=3):
            for url in chosen:
                sweep.ask(role, "GET", "/" + url)
    assert sweep.asked > 1000
    assert not sweep.failures, f"{len(sweep.failures)} of {sweep.asked} were 5xx:\n" + "\n".join(
        sweep.failures[:60]
    )


def test_no_query_parameter_answers_5xx(sweep):
    """Every named URL with real arguments and every query parameter hostile; each admin list
    page with each of its own parameters (search, ordering, page, its filters) on its own,
    since the admin refuses a lookup it does not know before it reads the others."""
    names = _query_parameters()
    lists = {
        f"admin:{m._meta.app_label}_{m._meta.model_name}_changelist": ma
        for m, ma in admin.site._registry.items()
    }
    requests = [_rotated(names, i, HOSTILE_VALUES) for i in range(len(HOSTILE_VALUES))]
    for name, url in _valid_urls(sweep.world).items():
        # An admin page other than a list reads three of them (_popup, _to_field,
        # _changelist_filters): a few requests give each of those several values.
        chosen_requests = requests if not name.startswith("admin:") else requests[::4]
        for role, chosen in _roles_for(name, chosen_requests):
            for i, params in enumerate(chosen):
                # A page renders a partial for htmx (its filters swap the results): every
                # other request asks for that.
                sweep.ask(role, "GET", url, params, htmx=i % 2 == 1)
        if name in lists:
            sweep.ask("staff", "GET", url, {"q": "x" * 2000})
            for key in _admin_list_parameters(lists[name]):
                for value in ADMIN_LIST_VALUES:
                    sweep.ask("staff", "GET", url, {key: _encode(value)})
    assert sweep.asked > 1000
    assert not sweep.failures, f"{len(sweep.failures)} of {sweep.asked} were 5xx:\n" + "\n".join(
        sweep.failures[:60]
    )


def test_no_form_post_answers_5xx(sweep):
    """Every named URL with real arguments, POSTed every form field name of the project (and
    every admin model field) with hostile values, beside hostile keys."""
    fields = _form_fields()
    posts = []
    for i, value in enumerate(HOSTILE_VALUES[:6]):
        form = _rotated(fields, i, HOSTILE_VALUES)
        form |= {_encode(key): _encode(value) for key in HOSTILE_KEYS}
        posts.append(form)
    for name, url in _valid_urls(sweep.world).items():
        for role, chosen in _roles_for(name, posts):
            for form in chosen:
                sweep.ask(role, "POST", url, form)
    assert sweep.asked > 1000
    assert not sweep.failures, f"{len(sweep.failures)} of {sweep.asked} were 5xx:\n" + "\n".join(
        sweep.failures[:60]
    )


def test_a_study_id_beyond_64_bits_is_a_404(client_for, annotator):
    # An id SQLite cannot bind (beyond 64 bits) names no study.
    client = client_for(annotator)
    assert client.get(f"/annotate/{'9' * 30}/").status_code == 404
    assert client.get(f"/annotate/{'9' * 30}/items/abc/").status_code == 404


def test_a_raw_export_limited_to_an_id_beyond_64_bits_is_a_404(client_for, researcher):
    # An id SQLite cannot bind (beyond 64 bits) names no run.
    response = client_for(researcher).get("/api/v1/exports/judgments.csv", {"run": "9" * 30})
    assert response.status_code == 404
    assert response.json() == {"detail": f"no run {'9' * 30}"}


def test_an_api_url_that_matches_no_route_is_a_json_404(client_for, researcher):
    # The API's errors are JSON, as its schema documents, the unrouted ones included.
    response = client_for(researcher).get("/api/v1/exports/not a slug.csv")
    assert response.status_code == 404
    assert response.json() == {"detail": "Not found."}
