"""What the proposal-review tests share: contexts in the import format, importing them through
the real service, and answering as an annotator would — by screen position, through the kind's
answer form and ``answer_submit`` — while saying which proposal (by id) gets which decision."""

from __future__ import annotations

import io
import json
import secrets

from annotation.kinds.proposal_review import KIND, proposal_field
from annotation.models import Rater, Study
from annotation.services.assignments import answer_submit, assignment_next
from annotation.services.proposals import proposal_study_import

SOURCES = ("zephyr-secret-large", "quartz-hidden-mini", "onyx-covert-medium")


def context(
    context_id: str,
    proposals: list[tuple[str, str]] | list[tuple[str, str, str]],
    *,
    silent: tuple[str, ...] = (),
    events: int = 2,
) -> dict:
    """A context line: ``proposals`` as (id, source[, text]); ``events`` timeline entries a
    minute apart."""
    return {
        "context_id": context_id,
        "events": [
            {
                "time": f"2026-03-02T09:{14 + n:02d}:00",
                "kind": "user activity",
                "text": f"Event {n} of {context_id}: edits the shared packing list",
            }
            for n in range(events)
        ],
        "proposals": [
            {
                "id": p[0],
                "source": p[1],
                "text": p[2] if len(p) > 2 else f"Task {p[0]} of {context_id}: sort the list",
            }
            for p in proposals
        ],
        **({"silent": list(silent)} if silent else {}),
    }


def jsonl(records: list) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode()


def import_contexts(records: list, annotators, **fields) -> Study:
    fields.setdefault("name", "Would you welcome these suggestions?")
    fields.setdefault("seed", 7)
    return proposal_study_import(
        stream=io.BytesIO(jsonl(records)),
        source_name="contexts.jsonl",
        annotators=annotators,
        **fields,
    )


def answer_form_data(assignment, decisions: dict[str, str] | None, **extra) -> dict:
    """The POST of the answer form: ``decisions`` by proposal id mapped to the screen positions
    this annotator was shown; None = the "reject all" button."""
    data = {"idempotency_key": secrets.token_urlsafe(12), **extra}
    if decisions is None:
        data["reject_all"] = "1"
        return data
    for position, pid in enumerate(assignment.display["order"], start=1):
        if pid in decisions:
            data[proposal_field(position)] = decisions[pid]
    return data


def answer_next(rater: Rater, decide) -> str | None:
    """Take the rater's next context and answer it: ``decide(context_id)`` gives the decisions
    by proposal id (None: reject all). Returns the context id answered, or None."""
    assignment = assignment_next(rater=rater)
    if assignment is None:
        return None
    study = rater.study
    key = assignment.item.key
    form = KIND.answer_form(
        answer_form_data(assignment, decide(key)), study=study, assignment=assignment
    )
    assert form.is_valid(), form.errors
    answer_submit(
        rater=rater,
        item_token=assignment.item.token,
        answer=form.to_input(),
        idempotency_key=form.cleaned_data["idempotency_key"],
    )
    return key


def answer_all(study: Study, user, decide) -> int:
    """Answer every context the user is handed; returns how many."""
    rater = Rater.objects.select_related("study").get(study=study, user=user)
    n = 0
    while answer_next(rater, decide) is not None:
        n += 1
    return n
