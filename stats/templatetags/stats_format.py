"""Number formatting for the statistics pages: undefined values (None, NaN) show as a dash."""

import math

from django import template
from django.template.defaultfilters import title

register = template.Library()
DASH = "—"


def missing(value) -> bool:
    return value is None or value == "" or (isinstance(value, float) and math.isnan(value))


@register.filter
def pct(value, digits: int = 1) -> str:
    """0.6154 → 61.5"""
    return DASH if missing(value) else f"{100 * float(value):.{int(digits)}f}"


@register.filter
def num(value, digits: int = 3) -> str:
    return DASH if missing(value) else f"{float(value):.{int(digits)}f}"


@register.filter
def pvalue(value) -> str:
    if missing(value):
        return DASH
    value = float(value)
    return f"{value:.2e}" if value < 0.001 else f"{value:.3f}"


def formatted(value, format: str = "text", digits: int | None = None) -> str:
    """A value in one of a dashboard cell's formats (``stats.tables.base.FORMATS``)."""
    if format == "pct":
        return pct(value)
    if format == "num":
        return num(value, 3 if digits is None else digits)
    if format == "pvalue":
        return pvalue(value)
    if missing(value):
        return DASH
    if format in ("title", "trigger"):
        return title(str(value))
    return str(value)
