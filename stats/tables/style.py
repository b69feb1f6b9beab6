"""Style sensitivity: per model, OLS of its Laplace-smoothed logits per configuration on the
configurations' mean logit (b_m), and the logits themselves (docs/statistics.md, "Style
sensitivity"). The configurations are the dialogues' communication styles (`style-sensitivity`,
`style-logits`) or the triggers' phases, i.e. trigger types (`style-sensitivity-by-phase`)."""

from __future__ import annotations

from typing import Any

from django.utils.safestring import mark_safe

from stats import charts, selectors
from stats.compute.style import StyleSensitivity, style_sensitivity
from stats.tables.base import (
    RUN,
    Built,
    Cell,
    Column,
    Display,
    Table,
    TableSpec,
    ci_columns,
    model_columns,
    register,
)

CONFIGURATION = "style"
PHASE = "phase"
"""The two configurations served: the dialogue's communication style, or the trigger's phase
(its trigger type)."""

SENSITIVITY_COLUMNS = (
    *model_columns(),
    Column("configuration", "str", "What the configurations are: style or phase."),
    Column("n_configurations", "int", "Configurations with triggers for this model (OLS points)."),
    Column("pass_rate", "float", "The model's pass rate over those triggers."),
    Column("slope", "float", "b_m: OLS slope of the model's logits on the mean logit."),
    Column("slope_se", "float", "Standard error of b_m."),
    *ci_columns("slope", "b_m (t distribution)"),
    Column("slope_p", "float", "Two-sided p of b_m = 0."),
    Column("intercept", "float", "a_m: OLS intercept."),
    Column("r_squared", "float", "R² of the fit."),
)

LOGIT_COLUMNS = (
    *model_columns(),
    Column("configuration", "str", "The style's index (1-24) or the phase (trigger type)."),
    Column("n", "int", "Scored triggers of the model in this configuration."),
    Column("k", "int", "Of which passed."),
    Column("logit", "float", "log((k + 0.5) / (n - k + 0.5))."),
    Column("difficulty", "float", "Mean logit of every model in this configuration."),
)


def _fit(request: selectors.TableRequest, configuration: str = CONFIGURATION):
    """The scored replies' models, configurations and pass flags, and the fit over them."""
    replies = selectors.replies_for(request)
    scored = replies.verdict >= 0
    source = replies.style if configuration == CONFIGURATION else replies.trigger_type
    configs = source[scored].astype(str)
    passed = replies.verdict[scored] == 2
    models = replies.model[scored]
    result = style_sensitivity(models=models, configurations=configs, passed=passed)
    return replies, models, configs, passed, result


def style_rows(
    result: StyleSensitivity,
    *,
    display: dict[str, str],
    configuration: str,
    pass_rates: dict[str, float],
) -> list[dict[str, Any]]:
    return [
        {
            "model": model,
            "model_display": display.get(model, model),
            "configuration": configuration,
            "n_configurations": fit.n,
            "pass_rate": pass_rates.get(model, float("nan")),
            "slope": fit.slope,
            "slope_se": fit.slope_se,
            "slope_ci_low": fit.slope_ci[0],
            "slope_ci_high": fit.slope_ci[1],
            "slope_p": fit.slope_p,
            "intercept": fit.intercept,
            "r_squared": fit.r_squared,
        }
        for model, fit in zip(result.models, result.fits, strict=True)
    ]


def _build_sensitivity(request: selectors.TableRequest, configuration: str) -> Built:
    replies, models, _, passed, result = _fit(request, configuration)
    pass_rates = {m: float(passed[models == m].mean()) for m in result.models}
    rows = style_rows(
        result, display=replies.display, configuration=configuration, pass_rates=pass_rates
    )
    return rows, []


def build_sensitivity(request: selectors.TableRequest) -> Built:
    return _build_sensitivity(request, CONFIGURATION)


def build_sensitivity_by_phase(request: selectors.TableRequest) -> Built:
    return _build_sensitivity(request, PHASE)


def style_logit_rows(
    result: StyleSensitivity, *, display: dict[str, str], counts: dict
) -> list[dict[str, Any]]:
    out = []
    for i, model in enumerate(result.models):
        for j, configuration in enumerate(result.configurations):
            n, k = counts.get((model, configuration), (0, 0))
            if not n:
                continue
            out.append(
                {
                    "model": model,
                    "model_display": display.get(model, model),
                    "configuration": str(configuration),
                    "n": n,
                    "k": k,
                    "logit": float(result.logits[i, j]),
                    "difficulty": float(result.difficulty[j]),
                }
            )
    return out


def build_logits(request: selectors.TableRequest) -> Built:
    replies, models, configs, passed, result = _fit(request)
    counts: dict = {}
    for model, config, ok in zip(models.tolist(), configs.tolist(), passed.tolist(), strict=True):
        n, k = counts.get((model, config), (0, 0))
        counts[(model, config)] = (n + 1, k + ok)
    return style_logit_rows(result, display=replies.display, counts=counts), []


def style_chart(table: Table) -> list[charts.Chart]:
    return _sensitivity_chart(table, "Style sensitivity")


def phase_chart(table: Table) -> list[charts.Chart]:
    return _sensitivity_chart(table, "Phase sensitivity")


def _sensitivity_chart(table: Table, title: str) -> list[charts.Chart]:
    configuration = "phase" if title.startswith("Phase") else "style"
    return [
        charts.scatter(
            [
                (
                    r.get("model_display") or r["model"],
                    r["pass_rate"],
                    r["slope"],
                    r["slope_ci_low"],
                    r["slope_ci_high"],
                )
                for r in table.rows
            ],
            title=f"{title}: b_m against pass rate (1 = tracks {configuration} difficulty)",
            x_label="pass rate",
            y_label="b_m",
            reference_y=1.0,
        )
    ]


STYLE_SENSITIVITY = register(
    TableSpec(
        name="style-sensitivity",
        title="Style sensitivity",
        description="Per model: OLS of its Laplace logits per style on the mean logit (b_m).",
        columns=SENSITIVITY_COLUMNS,
        needs=RUN,
        build=build_sensitivity,
        display=Display(
            cells=(
                Cell("Model", "model_display"),
                Cell("Styles", "n_configurations"),
                Cell("Pass %", "pass_rate", "pct"),
                Cell(
                    mark_safe("b<sub>m</sub> [95% CI]"),
                    "slope",
                    "num",
                    digits=2,
                    ci=("slope_ci_low", "slope_ci_high"),
                ),
                Cell("SE", "slope_se", "num", digits=2),
                Cell(mark_safe("a<sub>m</sub>"), "intercept", "num", digits=2),
                Cell("R²", "r_squared", "num", digits=2),
            ),
        ),
        charts=style_chart,
    )
)

STYLE_SENSITIVITY_BY_PHASE = register(
    TableSpec(
        name="style-sensitivity-by-phase",
        title="Style sensitivity by phase",
        description=(
            "Per model: OLS of its Laplace logits per phase (trigger type) on the mean logit (b_m)."
        ),
        columns=SENSITIVITY_COLUMNS,
        needs=RUN,
        build=build_sensitivity_by_phase,
        display=Display(
            cells=(
                Cell("Model", "model_display"),
                Cell("Phases", "n_configurations"),
                Cell("Pass %", "pass_rate", "pct"),
                Cell(
                    mark_safe("b<sub>m</sub> [95% CI]"),
                    "slope",
                    "num",
                    digits=2,
                    ci=("slope_ci_low", "slope_ci_high"),
                ),
                Cell("SE", "slope_se", "num", digits=2),
                Cell(mark_safe("a<sub>m</sub>"), "intercept", "num", digits=2),
                Cell("R²", "r_squared", "num", digits=2),
            ),
        ),
        charts=phase_chart,
    )
)

STYLE_LOGITS = register(
    TableSpec(
        name="style-logits",
        title="Style logits",
        description="Per model x style: k, n, Laplace logit and the style's mean logit.",
        columns=LOGIT_COLUMNS,
        needs=RUN,
        build=build_logits,
        # Not on the dashboard: the points behind the style-sensitivity panel, for plotting.
    )
)
