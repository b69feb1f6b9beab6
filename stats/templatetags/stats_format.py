"""Number formatting for the statistics pages: undefined values (None, NaN) show as a dash."""

import math

from django import template

register = template.Library()
DASH = "—"


def _missing(value) -> bool:
    return value is None or value == "" or (isinstance(value, float) and math.isnan(value))


@register.filter
def pct(value, digits: int = 1) -> str:
    """0.6154 → 61.5"""
    return DASH if _missing(value) else f"{100 * float(value):.{int(digits)}f}"


@register.filter
def num(value, digits: int = 3) -> str:
    return DASH if _missing(value) else f"{float(value):.{int(digits)}f}"


@register.filter
def pvalue(value) -> str:
    if _missing(value):
        return DASH
    value = float(value)
    return f"{value:.2e}" if value < 0.001 else f"{value:.3f}"


@register.filter
def get(mapping, key):
    return mapping.get(key) if mapping else None
