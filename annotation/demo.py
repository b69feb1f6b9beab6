"""Demo studies, one of each kind, for the demo annotators (``load_demo`` calls this): what
``make run`` shows annotator1 and annotator2 on their work page (the arena: the demo run's three
models, their vanilla replies; the proposal review: hand-written contexts,
``benchmark/demo_data/proposal_review.jsonl``; and a direct rating of the replies to the
multimodal demo's photos, ``demo_image_study_load``). Beside them, one closed,
already answered failure-mode study (``demo_labelled_study_load``): two demo raters' recorded
labels (``benchmark/demo_data/failure_mode_labels.jsonl``), so the classifier-vs-people table
has data from the start without taking the annotators' own failure-mode study."""

from __future__ import annotations

import json
import secrets
from pathlib import Path

from django.contrib.auth import get_user_model
from django.db import transaction

from annotation.kinds import (
    adjudication,
    arena,
    dialogue_audit,
    direct_rating,
    failure_mode,
    halo,
    pairwise,
)
from annotation.models import Rater, Study, StudyStatus
from annotation.services.assignments import answer_submit, assignment_next
from annotation.services.proposals import proposal_study_import
from annotation.services.studies import StudySpec, study_create
from benchmark.models import (
    Condition,
    DialogueStatus,
    EvaluationRun,
    JudgeDisagreement,
    Judgment,
    JudgmentState,
    TriggerType,
)

SEED = 20261129
LABELS_FILE = (
    Path(__file__).resolve().parent.parent
    / "benchmark"
    / "demo_data"
    / ("failure_mode_labels.jsonl")
)
LABELLED_STUDY = "Demo (closed): failure modes labelled by two demo raters"


def _agreed_unit_key(run: EvaluationRun) -> tuple[str, str] | None:
    """A vanilla RECOVERY reply both judges agreed on: a fair gold item for the demo."""
    disputed = JudgeDisagreement.objects.filter(unit__run=run).values("unit_id")
    judgment = (
        Judgment.objects.filter(
            unit__run=run,
            unit__condition=Condition.VANILLA,
            unit__trigger__type=TriggerType.RECOVERY,
            judge=run.primary_judge,
            state=JudgmentState.DONE,
        )
        .exclude(unit_id__in=disputed)
        .select_related("unit__endpoint", "unit__trigger__turn__dialogue")
        .order_by("unit_id")
        .first()
    )
    if judgment is None:
        return None
    unit = judgment.unit
    turn = unit.trigger.turn
    key = f"{turn.dialogue.unique_id_eval}#t{turn.index}#{unit.endpoint.name}#{unit.condition}"
    return key, judgment.verdict


def demo_specs(*, run: EvaluationRun, annotators, adjudicators) -> list[StudySpec]:
    gold = _agreed_unit_key(run)
    common = {"annotators": annotators, "seed": SEED}
    return [
        StudySpec(
            kind=pairwise.KIND.key,
            name="Demo: which closing reply helps more?",
            instructions=(
                "The user is wrapping up. Read the conversation, then both replies. Which one "
                "would help this user more from here on? Judge the content, not the length."
            ),
            overlap=2,
            run=run,
            trigger_type=TriggerType.RECOVERY,
            max_items=12,
            **common,
        ),
        StudySpec(
            kind=dialogue_audit.KIND.key,
            name="Demo: audit curated dialogues",
            instructions=(
                "Check each dialogue against the protocol. Answer every row, add a note where "
                "the answer is no, then decide: would you keep this dialogue in the benchmark?"
            ),
            overlap=2,
            adjudicators=adjudicators,
            dialogue_status=DialogueStatus.DRAFT,
            max_items=4,
            **common,
        ),
        StudySpec(
            kind=adjudication.KIND.key,
            name="Demo: settle judge disagreements",
            instructions=(
                "Two judges scored this reply differently. Read the rubric and the reply, weigh "
                "their rationales and evidence, and set the verdict you would defend."
            ),
            overlap=1,
            run=run,
            **common,
        ),
        StudySpec(
            kind=direct_rating.KIND.key,
            name="Demo: rate single replies",
            instructions=(
                "Rate the reply against the rubric: Pass, Partial or Fail, with how sure you "
                "are and why. You will see the judge's verdict after you answer."
            ),
            overlap=2,
            run=run,
            condition=Condition.VANILLA,
            max_items=10,
            gold=f"{gold[0]} {gold[1]}" if gold else "",
            **common,
        ),
        StudySpec(
            kind=failure_mode.KIND.key,
            name="Demo: why did these closing replies fail?",
            instructions=(
                "Each reply failed its RECOVERY rubric. Pick the failure mode that fits best; "
                "the suggestion is a simple rule's guess, so change it whenever it is wrong."
            ),
            overlap=2,
            run=run,
            condition=Condition.VANILLA,
            **common,
        ),
        StudySpec(
            kind=arena.KIND.key,
            name="Demo: which reply would you rather get?",
            instructions=(
                "Read the conversation, then both replies. Which one is the better next message "
                "from the assistant? If both are fine say tie (0); if neither is, both bad (b)."
            ),
            overlap=2,
            runs=[run],
            conditions=[Condition.VANILLA],
            per_pair=5,  # three models: three pairs, five triggers each
            **common,
        ),
        # HALO diagnosis (issue #17): the three demo models' replies at a few triggers.
        StudySpec(
            kind=halo.KIND.key,
            name="Demo: diagnose every reply at a checkpoint",
            instructions=(
                "Each checkpoint is a conversation up to a moment where help may be due, and "
                "several replies to it. For each reply: how far does it go (L0 observe … L3 "
                "execute; a guess is pre-filled, confirm or change it), and is it acceptable? "
                "For a rejected reply that intervenes, say whether it came too early or too "
                "late, and whether it did too little or too much."
            ),
            overlap=2,
            run=run,
            condition=Condition.VANILLA,
            max_items=4,
            **common,
        ),
    ]


def demo_studies_load(*, run: EvaluationRun, annotators, adjudicators, created_by) -> list[str]:
    """Create the demo studies that do not exist yet (by name); returns the names created."""
    created = []
    for spec in demo_specs(run=run, annotators=annotators, adjudicators=adjudicators):
        if Study.objects.filter(name=spec.name).exists():
            continue
        study_create(spec=spec, created_by=created_by)
        created.append(spec.name)
    if demo_proposal_study_load(annotators=annotators, created_by=created_by):
        created.append(PROPOSAL_STUDY)
    return created


# --- The multimodal demo: replies to a photo, rated with the photo -----------------------------

IMAGE_STUDY = "Demo: does the reply ask for a better photo?"


def demo_image_study_load(*, image_run: EvaluationRun, annotators, created_by=None) -> bool:
    """A direct rating of the multimodal demo run's vanilla replies at the photo dialogues'
    INTERVENTION triggers (``demo_image_run_load``), for the demo annotators: each item shows
    the photo the user sent as a thumbnail that zooms. Returns whether it was created: by name,
    a second ``load_demo`` writes nothing. Created after the other demo studies, so theirs keep
    the ids they have always had."""
    if Study.objects.filter(name=IMAGE_STUDY).exists():
        return False
    study_create(
        spec=StudySpec(
            kind=direct_rating.KIND.key,
            name=IMAGE_STUDY,
            instructions=(
                "The user sent a photo that may not show enough to answer. Look at it (press z "
                "or click it to zoom), then rate the reply against the rubric: does it ask for "
                "the specific thing that would fix the photo?"
            ),
            overlap=2,
            run=image_run,
            trigger_type=TriggerType.INTERVENTION,
            condition=Condition.VANILLA,
            annotators=annotators,
            seed=SEED,
        ),
        created_by=created_by,
    )
    return True


# --- Proposal review: imported from hand-written contexts -------------------------------------

PROPOSALS_FILE = LABELS_FILE.parent / "proposal_review.jsonl"
PROPOSAL_STUDY = "Demo: would you welcome these suggestions?"


def demo_proposal_study_load(*, annotators, created_by=None) -> bool:
    """The demo proposal-review study, imported from ``PROPOSALS_FILE`` (hand-written events
    and proposals of the demo models, some of them silent) for the demo annotators, k = 2 (the
    demo has two; the kind's default is 3). Returns whether it was created: by name, a second
    ``load_demo`` writes nothing."""
    if Study.objects.filter(name=PROPOSAL_STUDY).exists():
        return False
    with PROPOSALS_FILE.open("rb") as stream:
        proposal_study_import(
            stream=stream,
            source_name=PROPOSALS_FILE.name,
            name=PROPOSAL_STUDY,
            instructions=(
                "Each time, read what the user has just been doing, then the tasks an assistant "
                "could offer them unasked. Accept a task if this user would welcome it now; "
                "reject it if it would be useless, intrusive or too much. If no offer at all "
                "is right here, reject all (0)."
            ),
            annotators=annotators,
            overlap=2,
            seed=SEED,
            created_by=created_by,
        )
    return True


def _labels_by_key(path: Path = LABELS_FILE) -> dict[str, dict[str, tuple[str, str]]]:
    """Item key (``unit_key``'s format) → rater → (label, note), from the recorded labels."""
    out: dict[str, dict[str, tuple[str, str]]] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        r = json.loads(line)
        key = f"{r['unique_id_eval']}#t{r['turn']}#{r['model']}#{r['condition']}"
        if r["rater"] in out.setdefault(key, {}):
            raise ValueError(f"{path.name} line {number}: {r['rater']} labels {key} twice")
        out[key][r["rater"]] = (r["failure_mode"], r["note"])
    return out


@transaction.atomic
def demo_labelled_study_load(*, run: EvaluationRun, created_by=None) -> str | None:
    """The closed demo failure-mode study, answered from ``LABELS_FILE`` through the real answer
    path (Next, the kind's answer form, ``answer_submit``), then closed; returns its name when
    created, None when it already exists (by name: a second ``load_demo`` writes nothing).

    Its raters are demo accounts no one can sign in as (no usable password, inactive), so
    they never appear on a work page or in the annotator pickers; annotator1 and annotator2 are
    no raters of it and keep the open demo study to do. Every item of the selection must have
    every rater's label and every label must name an item: a recording that drifted from the
    demo run fails here rather than loading a partial study."""
    if Study.objects.filter(name=LABELLED_STUDY).exists():
        return None
    labels = _labels_by_key()
    names = sorted({rater for by_rater in labels.values() for rater in by_rater})
    users = []
    for username in names:
        user, created = get_user_model().objects.get_or_create(
            username=username, defaults={"is_active": False}
        )
        if created:
            user.set_unusable_password()
            user.save(update_fields=["password"])
        users.append(user)
    study = study_create(
        spec=StudySpec(
            kind=failure_mode.KIND.key,
            name=LABELLED_STUDY,
            instructions=(
                "Recorded demo labels (written for this project, not collected from people): "
                "the failure mode of each failed RECOVERY reply, by two demo raters."
            ),
            overlap=len(users),
            annotators=users,
            run=run,
            condition=Condition.VANILLA,
            seed=SEED,
        ),
        created_by=created_by,
    )
    keys = set(study.items.values_list("key", flat=True))
    if keys != set(labels):
        raise ValueError(
            f"{LABELS_FILE.name} does not match the demo run's failed RECOVERY replies: "
            f"{len(set(labels) - keys)} labelled but not selected, "
            f"{len(keys - set(labels))} selected but not labelled"
        )
    form_class = failure_mode.KIND.answer_form
    for user in users:
        rater = Rater.objects.select_related("study").get(study=study, user=user)
        for position in range(len(keys)):
            assignment = assignment_next(rater=rater)
            if assignment is None:  # every item of the selection has a label (checked above)
                raise ValueError(f"{user.username}: no item left after {position} answer(s)")
            label, note = labels[assignment.item.key][user.username]
            key = secrets.token_hex(8)
            data = {"idempotency_key": key, "label": label, "note": note}
            form = form_class(data, study=study, assignment=assignment)
            if not form.is_valid():
                raise ValueError(f"{LABELS_FILE.name}: {assignment.item.key}: {form.errors}")
            answer_submit(
                rater=rater,
                item_token=assignment.item.token,
                answer=form.to_input(),
                idempotency_key=key,
                elapsed_ms=(20 + (7 * position) % 40) * 1000,  # a plausible, varied time per item
            )
        if assignment_next(rater=rater) is not None:
            raise ValueError(f"{user.username}: items left after every label was given")
    study.status = StudyStatus.CLOSED
    study.save(update_fields=["status"])
    return study.name
