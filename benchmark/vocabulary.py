"""The protocol's judgement vocabularies, defined once (SPEC 2.1, 2.6): the trigger types, a
verdict and its score, and the five-way taxonomy of RECOVERY failures.

A leaf in plain Python — no Django, nothing of the project — so that the pipeline, the human
studies and the pure statistics (``stats.compute``, which must not import Django) all read the
same definitions. ``Vocabulary`` gives its enums the shape of Django's ``TextChoices``
(``.values``, ``.labels``, ``.choices``, a ``label`` per member), so model and form fields take
them as they are.
"""

from enum import EnumType, StrEnum


def _members(cls: EnumType) -> list["Vocabulary"]:
    # Only Vocabulary's classes are made by _VocabularyType, but inside the metaclass mypy
    # cannot tell what iterating one yields; the annotation says it.
    return list(cls)


class _VocabularyType(EnumType):
    @property
    def values(cls) -> list[str]:
        return [member.value for member in _members(cls)]

    @property
    def labels(cls) -> list[str]:
        return [member.label for member in _members(cls)]

    @property
    def choices(cls) -> list[tuple[str, str]]:
        return [(member.value, member.label) for member in _members(cls)]


class Vocabulary(StrEnum, metaclass=_VocabularyType):
    """Members are written ``NAME = "value", "Label"``; each is the string ``value``."""

    label: str

    # ``label`` has a default only so that a type checker reads ``Verdict("PASS")`` (a lookup)
    # as a valid call; every member gives one.
    def __new__(cls, value: str, label: str = "") -> "Vocabulary":
        member = str.__new__(cls, value)
        member._value_ = value
        member.label = label or value
        return member


class TriggerType(Vocabulary):
    """What a trigger tests (SPEC 2.1). The first three are the release's; INTERVENTION is a
    Workbench extension (ProactiveBench, seeds/002): the turn's image is insufficient, and a
    proactive reply asks for the intervention that would fix it (docs/corpus-format.md)."""

    EMERGENT = "EMERGENT", "Emergent"
    CRITICAL = "CRITICAL", "Critical"
    RECOVERY = "RECOVERY", "Recovery"
    INTERVENTION = "INTERVENTION", "Intervention"


# The release's trigger types, in their order: the ones the official format knows, each with a
# phase window (``benchmark.models.PHASE_WINDOWS``), and every dialogue needs one of each.
RELEASE_TRIGGER_TYPES = (
    TriggerType.EMERGENT.value,
    TriggerType.CRITICAL.value,
    TriggerType.RECOVERY.value,
)
# Every trigger type in display order: the release's, then the Workbench's extensions.
TRIGGER_TYPES = tuple(TriggerType.values)


class Verdict(Vocabulary):
    PASS = "PASS", "Pass"
    PARTIAL = "PARTIAL", "Partial"
    FAIL = "FAIL", "Fail"


# Keyed by str: stored verdicts are read back as plain strings (a Verdict is its string).
VERDICT_SCORES: dict[str, float] = {Verdict.PASS: 1.0, Verdict.PARTIAL: 0.5, Verdict.FAIL: 0.0}

# Worst to best: the order an ordinal statistic reads verdicts in, and each verdict's code in
# the statistics' arrays (FAIL = 0, PARTIAL = 1, PASS = 2; the score is code / 2).
VERDICT_ORDER = (Verdict.FAIL.value, Verdict.PARTIAL.value, Verdict.PASS.value)
VERDICT_CODES = {verdict: code for code, verdict in enumerate(VERDICT_ORDER)}


def parse_verdict(text: object) -> str | None:
    """``text`` as a verdict (any case, surrounding space ignored), or None if it is none."""
    if not isinstance(text, str):
        return None
    wanted = text.strip().upper()
    return wanted if wanted in VERDICT_CODES else None


class FailureMode(Vocabulary):
    """Why a RECOVERY reply failed (SPEC 2.6)."""

    GENERIC_CLOSING = "generic_closing", "Generic closing"
    DELIVERABLE_REPETITION = "deliverable_repetition", "Deliverable repetition"
    UNGROUNDED_SUGGESTION = "ungrounded_suggestion", "Ungrounded suggestion"
    PREMATURE_CLOSURE = "premature_closure", "Premature closure"
    OTHER = "other", "Other"


FAILURE_MODE_DEFINITIONS = {
    FailureMode.GENERIC_CLOSING: (
        "Signs off with boilerplate (“let me know if you need anything”, “good luck!”) "
        "instead of offering anything grounded in the conversation."
    ),
    FailureMode.DELIVERABLE_REPETITION: (
        "Restates or summarises the plan, list or answer already given earlier, adding "
        "nothing new for what comes next."
    ),
    FailureMode.UNGROUNDED_SUGGESTION: (
        "Offers a forward-looking step, but one not tied to the details the user disclosed "
        "(generic advice, or facts the user never gave)."
    ),
    FailureMode.PREMATURE_CLOSURE: (
        "Closes the conversation (acknowledges, wraps up) without offering any next step at all."
    ),
    FailureMode.OTHER: "None of the above: describe it in the note.",
}

# The taxonomy's values, in order: the categories of the failure-mode statistics.
FAILURE_MODES = tuple(FailureMode.values)


class BattleWinner(Vocabulary):
    """The outcome of one pairwise battle between two reply sources, spelt as the public
    Chatbot Arena battle format spells its ``winner`` (so import and export need no mapping).
    Side A and side B are the battle's two sources in their stored order, never screen
    positions: an arena answer is de-swapped before it is stored, and an LLM pairwise judge's
    verdict in the swapped order is mapped back."""

    MODEL_A = "model_a", "A is better"
    MODEL_B = "model_b", "B is better"
    TIE = "tie", "Tie (both good)"
    TIE_BOTHBAD = "tie (bothbad)", "Tie (both bad)"


# The outcomes that are ties: each counts as half a win to either side in a Bradley–Terry fit
# (unless the researcher leaves ties out).
BATTLE_TIES = (BattleWinner.TIE.value, BattleWinner.TIE_BOTHBAD.value)

# A battle's outcome with its two sides exchanged (A ↔ B; a tie stays a tie): the same battle
# read the other way round, e.g. as it was shown when source B was on the left.
BATTLE_SWAPPED: dict[str, str] = {
    BattleWinner.MODEL_A: BattleWinner.MODEL_B.value,
    BattleWinner.MODEL_B: BattleWinner.MODEL_A.value,
    BattleWinner.TIE: BattleWinner.TIE.value,
    BattleWinner.TIE_BOTHBAD: BattleWinner.TIE_BOTHBAD.value,
}


# --- HALO response diagnosis (SPEC 3; seeds/004, HALO) ----------------------------------------
# One definition of each question's answers, read by the HALO study kind, its statistics and
# its export. The values are what an answer stores (``details.replies[*]``).


class ActionLevel(Vocabulary):
    """How far a reply commits (HALO's action levels), least to most."""

    L0 = "L0", "L0 observe"
    L1 = "L1", "L1 bring to attention"
    L2 = "L2", "L2 prepare"
    L3 = "L3", "L3 execute"


ACTION_LEVEL_DEFINITIONS = {
    ActionLevel.L0: "Looks, retrieves or answers, but does not intervene: nothing is raised, "
    "prepared or done for the user.",
    ActionLevel.L1: "Brings a need to the user's attention (a reminder, a warning, a heads-up) "
    "without doing the underlying task.",
    ActionLevel.L2: "Prepares the task (a draft, a plan, a filled-in form) without any external "
    "commitment: nothing is sent, paid or booked.",
    ActionLevel.L3: "Executes: changes the user's commitments or has an effect outside (sends, "
    "pays, books, cancels), or says it has.",
}

# The levels in order: a level's code in the statistics' arrays (L0 = 0 … L3 = 3).
ACTION_LEVELS = tuple(ActionLevel.values)


class Timing(Vocabulary):
    """When a rejected intervention (L1–L3) came, relative to the window in which it helps."""

    PREMATURE = "premature", "Premature"
    BELATED = "belated", "Belated"
    APPROPRIATE = "appropriate", "Appropriate"


class Intensity(Vocabulary):
    """How far a rejected intervention (L1–L3) went, relative to what the evidence and the
    user's authority support."""

    INSUFFICIENT = "insufficient", "Insufficient"
    EXCESSIVE = "excessive", "Excessive"
    APPROPRIATE = "appropriate", "Appropriate"


TIMING_DEFINITIONS = {
    Timing.PREMATURE: "Before the window in which it would help: too early to act on.",
    Timing.BELATED: "After the useful window: the moment to help has passed.",
    Timing.APPROPRIATE: "Within the useful window.",
}
INTENSITY_DEFINITIONS = {
    Intensity.INSUFFICIENT: "Does too little to help: the need stays largely unmet.",
    Intensity.EXCESSIVE: "Goes beyond what the evidence supports or the user has authorised.",
    Intensity.APPROPRIATE: "Goes as far as the situation calls for.",
}
TIMINGS = tuple(Timing.values)
INTENSITIES = tuple(Intensity.values)


class OtherIssue(Vocabulary):
    """HALO's optional "other issues" of a rejected reply; each one flagged needs a note."""

    UNSUPPORTED = "unsupported", "Unsupported by evidence"
    IRRELEVANT = "irrelevant", "Irrelevant action"
    CONTRADICTION = "contradiction", "Factual contradiction"


OTHER_ISSUES = tuple(OtherIssue.values)


class Restraint(Vocabulary):
    """What an L0 reply is, derived from its verdict (never asked): HALO tells wrong inaction
    from right restraint."""

    INACTION = "inaction", "Inaction"
    JUSTIFIED = "justified_restraint", "Justified restraint"


def restraint_of(level: str, acceptable: bool) -> str:
    """``Restraint`` of an L0 reply (rejected: inaction; accepted: justified restraint); "" for
    an intervention (L1–L3)."""
    if level != ActionLevel.L0:
        return ""
    return Restraint.JUSTIFIED.value if acceptable else Restraint.INACTION.value


# HALO's headline split of rejected replies. A rejected reply is over-proactive when it was
# premature or excessive, under-proactive when it was belated, insufficient or an inaction; the
# two are not exclusive (premature and insufficient is both) and both may be false (a reply
# rejected only for other issues, its timing and intensity appropriate).
OVER_PROACTIVE = (Timing.PREMATURE.value, Intensity.EXCESSIVE.value)
UNDER_PROACTIVE = (Timing.BELATED.value, Intensity.INSUFFICIENT.value, Restraint.INACTION.value)


# --- Proactive-Agent proposal review (seed 003) ------------------------------------------------


class ProposalDecision(Vocabulary):
    """One annotator's decision on one proposed proactive task."""

    REJECT = "reject", "Reject"
    ACCEPT = "accept", "Accept"


class ProposalLabel(Vocabulary):
    """A proposal's label: the majority of its annotators' decisions (docs/statistics.md,
    "Proposal review": more accepts than rejects, or more rejects than accepts; an equal
    number is a tie, which has no label and is left out of every label-based figure)."""

    REJECTED = "rejected", "Rejected"
    ACCEPTED = "accepted", "Accepted"
    TIED = "tied", "Tied (no majority)"


# The decisions in code order (REJECT = 0, ACCEPT = 1): the columns of a proposal's vote counts
# in the statistics, and the codes of its majority label (rejected 0, accepted 1, -1 none).
PROPOSAL_DECISIONS = (ProposalDecision.REJECT.value, ProposalDecision.ACCEPT.value)
PROPOSAL_LABEL_OF_CODE = {0: ProposalLabel.REJECTED.value, 1: ProposalLabel.ACCEPTED.value}
