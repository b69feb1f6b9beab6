"""What the kinds that rate a run's replies share when they select items: the run's finished
replies narrowed by the selection, an item's key, the names a blind study must not show, and a
reply source's name in battles."""

from __future__ import annotations

from django.db.models import QuerySet

# endpoint_names lives with the blinding rule; the kinds take it from here, with the rest.
from annotation.services.blinding import endpoint_names as endpoint_names
from annotation.services.studies import StudySpec
from benchmark.models import Condition, EvaluationUnit, UnitState


def run_units(spec: StudySpec) -> QuerySet[EvaluationUnit]:
    """The run's finished, non-empty replies of the chosen models and trigger type, with the
    rows their keys need, oldest first."""
    units = EvaluationUnit.objects.filter(run=spec.run, state=UnitState.DONE).exclude(reply="")
    if spec.endpoints:
        units = units.filter(endpoint__in=spec.endpoints)
    if spec.trigger_type:
        units = units.filter(trigger__type=spec.trigger_type)
    return units.select_related("endpoint", "trigger__turn__dialogue").order_by("id")


def unit_key(unit: EvaluationUnit, *, with_condition: bool = True) -> str:
    """``unique_id_eval#t<turn>#<model>[#<condition>][#s<sample>]``: staff-facing, never shown
    to annotators (it names the model)."""
    turn = unit.trigger.turn
    key = f"{turn.dialogue.unique_id_eval}#t{turn.index}#{unit.endpoint.name}"
    if with_condition:
        key += f"#{unit.condition}"
    return key + (f"#s{unit.sample_index}" if unit.sample_index else "")


def source_label(endpoint: str, *, condition: str = "", run: str = "") -> str:
    """A reply source's name in battles (arena items, ``selectors.study_battles``, the battles
    export): the endpoint's handle, then `` · <condition>`` (its label in lower case: vanilla,
    rubric-injected) and `` · <run>`` where given. Staff-facing, never shown to annotators."""
    parts = [endpoint]
    if condition:
        parts.append(Condition(condition).label.lower())
    if run:
        parts.append(run)
    return " · ".join(parts)
