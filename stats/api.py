"""REST API for researchers: every registered statistics table (``stats.tables``) as JSON or
CSV, and the raw exports as streamed CSV or JSONL. Session auth (the browser) or token auth
(scripts: ``Authorization: Token <key>``, keys from ``manage.py drf_create_token USER`` or the
admin). Researchers and admins only; anyone else who is logged in gets 404, as on the staff
pages.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, cast

from django.db import connection
from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    inline_serializer,
)
from rest_framework import serializers
from rest_framework.exceptions import NotFound, ParseError
from rest_framework.permissions import BasePermission
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.models import Study
from benchmark.models import Condition, EvaluationRun
from core.roles import is_staff_like
from stats import csv_copy, exports, proposal_exports, selectors, tables
from stats.compute.bradley_terry import TIE_RULES
from stats.compute.resampling import BATTLE_RESAMPLES, BATTLE_RESAMPLES_RANGE, DEFAULT_SEED


class IsStaffLike(BasePermission):
    """Researchers and admins. A logged-in annotator or outsider gets 404 (not 403), so the API
    does not tell them which URLs exist; the anonymous get 401/403 as usual."""

    def has_permission(self, request, view) -> bool:
        if not (request.user and request.user.is_authenticated):
            return False
        if not is_staff_like(request.user):
            raise NotFound()
        return True


class TableCSVRenderer(BaseRenderer):
    """A table (``Table.as_json()``) as RFC 4180 CSV; an error as a one-column CSV."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        if isinstance(data, dict) and "columns" in data and "rows" in data:
            names = data["columns"]
            rows: Iterable[list[Any]] = ([row.get(n) for n in names] for row in data["rows"])
        else:
            names, rows = ["detail"], [[str(data.get("detail", data))]]
        return "".join(exports.csv_chunks(names, rows)).encode("utf-8")


class TableQuerySerializer(serializers.Serializer):
    run = serializers.IntegerField(
        required=False,
        help_text="Evaluation run id (default: the pinned run, else the newest finished).",
    )
    verdicts = serializers.CharField(
        required=False,
        default="primary",
        allow_blank=True,  # a form's empty field: the default, as VerdictSource.parse reads it
        help_text="Verdict source: primary (or empty), adjudicated, or a judge's handle. With "
        "battles=judge, the pairwise judge whose verdicts the ranking tables rank: primary (the "
        "run's primary judge) or a pairwise judge's name.",
    )
    condition = serializers.ChoiceField(
        choices=Condition.choices, required=False, default=Condition.VANILLA
    )
    study = serializers.IntegerField(
        required=False,
        help_text="Annotation study id: what the human-study tables read ("
        + ", ".join(spec.name for spec in tables.all_specs() if spec.needs == tables.STUDY)
        + ").",
    )
    include_excluded = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Study tables: count the raters the study excludes (default: left out; the "
        "preference table shows both).",
    )
    majority = serializers.ChoiceField(
        choices=["drop", "release"],
        required=False,
        default="drop",
        help_text="Majority label vs judge (human-agreement, judge-human-alignment): drop items "
        "whose top labels tie, or break ties Partial > Pass > Fail as the ProactBench release "
        "does.",
    )
    stream = serializers.ChoiceField(
        choices=["app", "release"],
        required=False,
        default="app",
        help_text="Preference table's item-clustered bootstrap: the app's seeded stream, or the "
        "release's (numpy.random.default_rng(seed), items in file order).",
    )
    battles = serializers.ChoiceField(
        choices=list(selectors.BATTLE_SOURCES),
        required=False,
        default="study",
        help_text="Ranking tables (arena-ranking, arena-pairs): where the battles come from — "
        + " or ".join(selectors.BATTLE_SOURCES)
        + ": study, the live answers of the arena or pairwise study named by study; judge, the "
        "consistent verdicts (the same in both orders) of the LLM pairwise judge named by "
        "verdicts on the run named by run.",
    )
    ties = serializers.ChoiceField(
        choices=list(TIE_RULES),
        required=False,
        default="half",
        help_text="Ranking tables: a tie (tie or tie (bothbad)) counts as half a win to each "
        "side (half), or ties are left out (exclude).",
    )
    anchor = serializers.CharField(
        required=False,
        default="",
        allow_blank=True,
        help_text="Ranking tables: the source whose rating is fixed at 1000 (default: none, "
        "the mean rating is 1000).",
    )
    resamples = serializers.IntegerField(
        required=False,
        default=BATTLE_RESAMPLES,
        min_value=BATTLE_RESAMPLES_RANGE[0],
        max_value=BATTLE_RESAMPLES_RANGE[1],
        help_text="Ranking tables: bootstrap resamples of the battles behind the 95% CIs.",
    )
    seed = serializers.IntegerField(
        required=False,
        default=DEFAULT_SEED,
        min_value=0,  # NumPy's SeedSequence refuses a negative seed
        help_text="Base seed of the bootstraps (a non-negative integer).",
    )

    def to_request(self) -> selectors.TableRequest:
        data = self.validated_data
        if "run" in data:
            run = EvaluationRun.objects.filter(pk=data["run"]).first()
            if run is None:
                raise NotFound(f"no run {data['run']}")
        else:
            run = selectors.default_run()
        if "study" in data and not Study.objects.filter(pk=data["study"]).exists():
            raise NotFound(f"no study {data['study']}")
        return selectors.TableRequest(
            run=run,
            verdicts=selectors.VerdictSource.parse(data["verdicts"]),
            condition=data["condition"],
            study=data.get("study"),
            include_excluded=data["include_excluded"],
            seed=data["seed"],
            majority=data["majority"],
            stream=data["stream"],
            battles=data["battles"],
            ties=data["ties"],
            anchor=data["anchor"],
            resamples=data["resamples"],
        )


class TableView(APIView):
    """Any registered table, looked up by name when asked for: a table registered after the
    URLconf was built is served too. The schema still has one operation per table
    (``table_operations``)."""

    permission_classes = [IsStaffLike]
    renderer_classes = [JSONRenderer, TableCSVRenderer]

    def get(self, request, name: str):
        try:
            tables.get(name)
        except tables.UnknownTable as exc:
            raise NotFound(str(exc)) from exc
        query = TableQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        try:
            table = tables.build(name, query.to_request())
        except selectors.StatsInputError as exc:
            raise ParseError(str(exc)) from exc
        response = Response(table.as_json())
        if getattr(request.accepted_renderer, "format", "") == "csv":
            response["Content-Disposition"] = f'attachment; filename="{name}.csv"'
        return response


ERROR_BODY = inline_serializer(
    name="Error", fields={"detail": serializers.CharField(help_text="What went wrong.")}
)
ERROR_RESPONSES = {
    # {"detail": …}, or a parameter's own messages ({"seed": ["…"]}) when the query fails
    # validation: any object.
    (400, "application/json"): OpenApiResponse(
        OpenApiTypes.OBJECT, description="A parameter is invalid: {detail} or {parameter: [..]}."
    ),
    (401, "application/json"): OpenApiResponse(ERROR_BODY, description="No credentials."),
    (404, "application/json"): OpenApiResponse(
        ERROR_BODY, description="No such run or export, or not a researcher or admin."
    ),
}
"""The error responses every operation can give (documented, so clients and the schema test
know them)."""

_FIELD: dict[str, Callable[[str], serializers.Field]] = {
    "str": lambda help_text: serializers.CharField(help_text=help_text, allow_null=True),
    "int": lambda help_text: serializers.IntegerField(help_text=help_text, allow_null=True),
    "float": lambda help_text: serializers.FloatField(help_text=help_text, allow_null=True),
    "bool": lambda help_text: serializers.BooleanField(help_text=help_text),
}


def _response_schema(spec: tables.TableSpec):
    row_list = inline_serializer(
        name=f"{spec.name.title().replace('-', '')}Row",
        fields={c.name: _FIELD[c.kind](c.description) for c in spec.columns},
        many=True,
    )
    return inline_serializer(
        name=f"{spec.name.title().replace('-', '')}Table",
        fields={
            "table": serializers.CharField(),
            "title": serializers.CharField(),
            "params": serializers.DictField(help_text="What the table was computed from."),
            "columns": serializers.ListField(child=serializers.CharField()),
            "rows": row_list,
            "notes": serializers.ListField(child=serializers.CharField()),
        },
    )


def _schema_view(spec: tables.TableSpec):
    """``spec``'s operation, for the schema generator only: no URL routes to it (requests reach
    ``TableView``, to which its ``get`` delegates)."""

    def get(self, request):  # a function of its own, so that each table has its own schema
        return TableView.get(self, request, spec.name)

    get = extend_schema(
        operation_id=f"table_{spec.name.replace('-', '_')}",
        summary=spec.title,
        description=spec.description
        + " JSON by default; ?format=csv (or Accept: text/csv) for CSV.",
        parameters=[TableQuerySerializer],
        responses={
            (200, "application/json"): _response_schema(spec),
            (200, "text/csv"): OpenApiTypes.STR,
            **ERROR_RESPONSES,
            # Asked for CSV, an error comes as CSV too: one "detail" column.
            **{(status, "text/csv"): OpenApiTypes.STR for status in (400, 401, 404)},
        },
        tags=["statistics"],
    )(get)
    name = f"{spec.name.title().replace('-', '')}TableView"
    # mypy types a class made by type() as plain ``type``: the cast names its base.
    view_class = cast("type[TableView]", type(name, (TableView,), {"get": get}))
    return view_class.as_view()


def table_operations(endpoints):
    """drf-spectacular preprocessing hook (``SPECTACULAR_SETTINGS["PREPROCESSING_HOOKS"]``): the
    one ``tables/<name>/`` route becomes one operation per registered table, each with its own
    path, summary and row schema — read from the registry whenever the schema is made."""
    out = []
    for path, path_regex, method, callback in endpoints:
        if getattr(callback, "cls", None) is not TableView:
            out.append((path, path_regex, method, callback))
            continue
        for spec in tables.all_specs():
            out.append(
                (
                    path.replace("{name}", spec.name),
                    path_regex.replace("<slug:name>", spec.name),
                    method,
                    _schema_view(spec),
                )
            )
    return out


class AnyMediaRenderer(JSONRenderer):
    """Lets a client that asks for CSV or JSONL reach the streaming view (whose response is not
    rendered); errors still come back as JSON."""

    media_type = "*/*"
    format = "any"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        # What this renderer writes is always JSON (an error): say so, not "*/*".
        response = (renderer_context or {}).get("response")
        if response is not None:
            response["Content-Type"] = "application/json"
        return super().render(data, "application/json", renderer_context)


class RawExportView(APIView):
    """A raw export, streamed. ``?run=ID`` limits it to one run, ``?study=ID`` to one study
    (each export says which of these it understands)."""

    permission_classes = [IsStaffLike]
    renderer_classes = [JSONRenderer, AnyMediaRenderer]
    export_name = ""
    content_types = {"csv": "text/csv; charset=utf-8", "jsonl": "application/jsonl; charset=utf-8"}

    @extend_schema(
        summary="Raw export, streamed (CSV or JSONL)",
        parameters=[
            OpenApiParameter(
                "run",
                OpenApiTypes.INT,
                description="Only this run (judgments; votes of studies drawn from it).",
            ),
            OpenApiParameter(
                "study",
                OpenApiTypes.INT,
                description="Only this study (votes, audits, battles: an arena or pairwise "
                "study, else 400).",
            ),
            OpenApiParameter(
                "name",
                OpenApiTypes.STR,
                OpenApiParameter.PATH,
                enum=sorted(exports.RAW_EXPORTS),
                description="Which export.",
            ),
            OpenApiParameter(
                "fmt",
                OpenApiTypes.STR,
                OpenApiParameter.PATH,
                enum=sorted(content_types),
                description="csv or jsonl.",
            ),
        ],
        responses={
            (200, "text/csv"): OpenApiTypes.STR,
            (200, "application/jsonl"): OpenApiTypes.STR,
            **ERROR_RESPONSES,
        },
        tags=["exports"],
    )
    def get(self, request, name: str, fmt: str):
        export = exports.RAW_EXPORTS.get(name)
        if export is None or fmt not in self.content_types:
            raise NotFound(f"no raw export {name}.{fmt}")
        filters = {}
        for key in ("run", "study"):
            if not request.query_params.get(key):
                continue
            if key not in export.filters:
                raise ParseError(f"the {name} export cannot be limited by {key}")
            try:
                filters[key] = int(request.query_params[key])
            except ValueError as exc:
                raise ParseError(f"{key} must be an integer") from exc
            if abs(filters[key]) >= 2**63:  # no id is that large, and SQLite cannot bind it
                raise NotFound(f"no {key} {filters[key]}")
        if export.check is not None:
            try:
                export.check(filters)
            except LookupError as exc:
                raise NotFound(str(exc)) from exc
            except ValueError as exc:
                raise ParseError(str(exc)) from exc
        if fmt == "csv" and export.query is not None and connection.vendor == "postgresql":
            # The same CSV, written by PostgreSQL itself (several times faster, stats/csv_copy).
            queryset, fields = export.query(filters)
            chunks = csv_copy.copy_csv_chunks(
                header=export.header, queryset=queryset, fields=fields
            )
        else:
            writer = exports.csv_chunks if fmt == "csv" else exports.jsonl_chunks
            rows = export.rows(filters)
            chunks = (text.encode("utf-8") for text in writer(export.header, rows))
        response = StreamingHttpResponse(chunks, content_type=self.content_types[fmt])
        response["Content-Disposition"] = f'attachment; filename="{name}.{fmt}"'
        return response


# --- Reward-model training data from proposal review (stats/proposal_exports.py) -------------


class ProposalExportQuerySerializer(serializers.Serializer):
    study = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=2**63 - 1,  # an id; SQLite cannot bind a larger integer
        help_text="Only this proposal-review study (default: every one; a study of another "
        "kind is a 400).",
    )
    include_excluded = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Count the decisions of raters the study excludes (default: left out).",
    )


class ProposalExportView(APIView):
    """A proposal-review study's labels as reward-model training data, streamed JSONL:
    ``proposal-labels`` (one line per proposal) or ``proposal-pairs`` (accepted vs rejected
    proposals of the same context)."""

    permission_classes = [IsStaffLike]
    renderer_classes = [JSONRenderer, AnyMediaRenderer]

    @extend_schema(
        summary="Reward-model training data from proposal review (JSONL, streamed)",
        description="proposal-labels: one line per decided proposal (context, proposal, "
        "source, majority label accepted / rejected / tied, votes, number of annotators). "
        "proposal-pairs: one line per accepted and rejected proposal of the same context "
        "(chosen, rejected, context). Formats: docs/exports.md.",
        parameters=[
            OpenApiParameter(
                "name",
                OpenApiTypes.STR,
                OpenApiParameter.PATH,
                enum=[f"proposal-{what}" for what in proposal_exports.FORMATS],
                description="Which export.",
            ),
            ProposalExportQuerySerializer,
        ],
        responses={(200, "application/jsonl"): OpenApiTypes.STR, **ERROR_RESPONSES},
        tags=["exports"],
    )
    def get(self, request, name: str):
        query = ProposalExportQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        study_id = query.validated_data.get("study")
        try:
            proposal_exports.check_study(study_id)
        except LookupError as exc:
            raise NotFound(str(exc)) from exc
        except proposal_exports.ExportInputError as exc:
            raise ParseError(str(exc)) from exc
        lines = proposal_exports.reward_lines(
            name.removeprefix("proposal-"),
            study_id=study_id,
            include_excluded=query.validated_data["include_excluded"],
        )
        response = StreamingHttpResponse(
            (text.encode("utf-8") for text in lines),
            content_type="application/jsonl; charset=utf-8",
        )
        response["Content-Disposition"] = f'attachment; filename="{name}.jsonl"'
        return response
