from django import template

from annotation.kinds import AuditDecision, FailureMode, StudyKind

register = template.Library()


@register.filter
def duration(seconds) -> str:
    """Seconds as a short human duration: 45 s, 12 min, 1 h 05 min."""
    try:
        total = int(round(float(seconds or 0)))
    except (TypeError, ValueError):
        return "—"
    if total < 60:
        return f"{total} s"
    minutes = total // 60
    if minutes < 60:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60:02d} min"


@register.filter
def percent(value) -> str:
    return f"{value:.0%}" if isinstance(value, int | float) else "—"


@register.filter
def answer_label(answer, kind: str) -> str:
    """An answer as its annotator saw it: a pairwise answer by screen position (never the
    case it maps to), a failure mode by name, a verdict in words."""
    if kind == StudyKind.PAIRWISE:
        choice = answer.details.get("choice")
        return "Tie" if choice == "tie" else f"Response {choice}"
    if kind == StudyKind.FAILURE_MODE and answer.label in FailureMode.values:
        return FailureMode(answer.label).label
    if kind == StudyKind.DIALOGUE_AUDIT and answer.label in AuditDecision.values:
        return AuditDecision(answer.label).label
    return answer.label.title()
