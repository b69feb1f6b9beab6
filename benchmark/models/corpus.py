"""The ProactBench corpus: personas, styles, scenarios, dialogues, turns, triggers, anchors,
and the model endpoints the pipeline talks to.

The official release's keys map onto these fields one to one (see docs/corpus-format.md); keys
the Workbench does not model are kept verbatim in ``extra`` JSON fields so that an export gives
back exactly what was imported.
"""

from django.core.exceptions import ValidationError
from django.core.files.storage import Storage, storages
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.db.models import Q

from benchmark.providers import keys, registry
from benchmark.vocabulary import TriggerType


class Domain(models.Model):
    """One of the five persona categories (the release's ``category_key``)."""

    key = models.SlugField(
        max_length=40, unique=True, help_text="Release category_key, e.g. professional_persona."
    )
    name = models.CharField(max_length=60, help_text="Display name, e.g. 'Sports & fitness'.")
    description = models.TextField(blank=True)
    order = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["order"]

    def __str__(self) -> str:
        return self.name


class CommunicationStyle(models.Model):
    """One of the 24 coherent CSI trait combinations (seeded by migration; see docs/styles.md)."""

    index = models.PositiveSmallIntegerField(
        unique=True,
        validators=[MinValueValidator(1), MaxValueValidator(24)],
        help_text="The release's style_combination_index (1–24).",
    )
    code = models.CharField(
        max_length=8, unique=True, help_text="Trait letters as in blueprint suffixes, NONE if none."
    )
    expressiveness = models.BooleanField()
    preciseness = models.BooleanField()
    questioningness = models.BooleanField()
    verbal_aggressiveness = models.BooleanField()
    emotionality = models.BooleanField()
    impression_manipulativeness = models.BooleanField()
    description = models.TextField()
    min_words = models.PositiveSmallIntegerField(help_text="Fewest words in one user message.")
    max_words = models.PositiveSmallIntegerField(help_text="Most words in one user message.")

    class Meta:
        ordering = ["index"]
        constraints = [
            models.CheckConstraint(
                condition=Q(index__gte=1) & Q(index__lte=24), name="style_index_1_24"
            ),
            models.CheckConstraint(
                condition=Q(min_words__lte=models.F("max_words")), name="style_word_bounds_ordered"
            ),
        ]

    def __str__(self) -> str:
        return f"Style {self.index} ({self.code})"


class Persona(models.Model):
    """A simulated user. ``external_id`` is the release's ``uuid`` (a persona/generation id)."""

    external_id = models.CharField(max_length=64, unique=True, help_text="Release uuid.")
    name = models.CharField(max_length=120, blank=True)
    summary = models.TextField(blank=True, help_text="Who this person is, in a few sentences.")
    attributes = models.JSONField(default=dict, blank=True, help_text="Any further persona facts.")

    def __str__(self) -> str:
        return self.name or self.external_id


class Scenario(models.Model):
    """A persona × domain situation with a hidden goal (release ``scenario_id``)."""

    key = models.CharField(max_length=120, help_text="Release scenario_id, e.g. PROFESSIONAL_01.")
    domain = models.ForeignKey(Domain, on_delete=models.PROTECT, related_name="scenarios")
    persona = models.ForeignKey(Persona, on_delete=models.PROTECT, related_name="scenarios")
    title = models.CharField(max_length=200, blank=True)
    hidden_goal = models.TextField(blank=True, help_text="What the user really needs (unstated).")
    surface_request = models.TextField(blank=True, help_text="What the user asks for at first.")
    ideal_trajectory = models.TextField(blank=True)
    anchors = models.JSONField(
        default=list, blank=True, help_text="Implicit anchors the scenario may disclose."
    )

    class Meta:
        # The release reuses scenario ids across personas; (key, persona) is the identity.
        constraints = [
            models.UniqueConstraint(fields=["key", "persona"], name="scenario_unique_per_persona")
        ]

    def __str__(self) -> str:
        return self.key


class Blueprint(models.Model):
    """A turn-by-turn roadmap for a scenario in one style (release ``blueprint_id``)."""

    key = models.CharField(max_length=160, help_text="Release blueprint_id, e.g. BP_X_01_EVA.")
    scenario = models.ForeignKey(Scenario, on_delete=models.PROTECT, related_name="blueprints")
    style = models.ForeignKey(
        CommunicationStyle, on_delete=models.PROTECT, related_name="blueprints", null=True
    )
    strategic_overview = models.TextField(blank=True)
    roadmap = models.JSONField(
        default=list, blank=True, help_text="interaction_roadmap[] as published."
    )
    style_guardrails = models.JSONField(default=dict, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["key", "scenario"], name="blueprint_unique_per_scenario"
            )
        ]

    def __str__(self) -> str:
        return self.key


class DialogueStatus(models.TextChoices):
    DRAFT = "draft", "Draft"
    IN_AUDIT = "in_audit", "In audit"
    ACCEPTED = "accepted", "Accepted"
    REJECTED = "rejected", "Rejected"


class Dialogue(models.Model):
    """A curated multi-turn conversation, frozen for evaluation."""

    unique_id_eval = models.CharField(
        max_length=255, unique=True, help_text="The release's primary key."
    )
    uuid = models.CharField(max_length=64, help_text="Persona/generation id; not unique alone.")
    blueprint = models.ForeignKey(Blueprint, on_delete=models.PROTECT, related_name="dialogues")
    scenario = models.ForeignKey(Scenario, on_delete=models.PROTECT, related_name="dialogues")
    persona = models.ForeignKey(Persona, on_delete=models.PROTECT, related_name="dialogues")
    domain = models.ForeignKey(Domain, on_delete=models.PROTECT, related_name="dialogues")
    style = models.ForeignKey(
        CommunicationStyle, on_delete=models.PROTECT, related_name="dialogues"
    )
    num_turns_completed = models.PositiveSmallIntegerField()
    status = models.CharField(
        max_length=12, choices=DialogueStatus.choices, default=DialogueStatus.DRAFT
    )
    is_demo = models.BooleanField(default=False, help_text="Hand-written demo data.")
    curation_model = models.CharField(
        max_length=120, blank=True, help_text="Release evaluated_model: the model that curated it."
    )
    prompt_versions = models.JSONField(
        default=dict, blank=True, help_text="Agent → prompt version that produced this dialogue."
    )
    curated_at = models.DateTimeField(null=True, blank=True)
    token_usage = models.JSONField(null=True, blank=True, help_text="Release token_usage.")
    findings = models.JSONField(
        default=list, blank=True, help_text="Protocol findings: [{code, turn, message}]."
    )
    extra = models.JSONField(
        default=dict, blank=True, help_text="Unmodelled top-level keys, kept for export."
    )
    imported_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["status"]), models.Index(fields=["uuid"])]

    def __str__(self) -> str:
        return self.unique_id_eval


class Turn(models.Model):
    """One user message and the assistant's reply, with the Planner's decision for the turn."""

    dialogue = models.ForeignKey(Dialogue, on_delete=models.CASCADE, related_name="turns")
    index = models.PositiveSmallIntegerField(help_text="1-based turn number.")
    user_message = models.TextField()
    assistant_response = models.TextField()
    planner = models.JSONField(
        null=True, blank=True, help_text="The Planner's decision for this turn, as published."
    )
    extra = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["dialogue_id", "index"]
        constraints = [
            models.UniqueConstraint(fields=["dialogue", "index"], name="turn_unique_index"),
            models.CheckConstraint(condition=Q(index__gte=1), name="turn_index_positive"),
        ]

    def __str__(self) -> str:
        return f"{self.dialogue_id} turn {self.index}"


def turn_image_storage() -> Storage:
    """Where turn images live: ``STORAGES["turn_images"]`` — a private folder under var/ by
    default, an S3-compatible bucket in production (docs/corpus-format.md). Never the public
    media storage: images are served only through the view that checks who may see them."""
    return storages["turn_images"]


class StoredImageFile(models.Model):
    """What every stored image row says of its file (one definition for turn images and
    scenario images). The file is stored once per content: its name is the SHA-256 of its bytes
    (``original/``, the bytes exactly as imported or uploaded, which an export gives back;
    ``display/``, the same image re-encoded without metadata, which is what people are shown),
    written through benchmark/corpus/images.py. Several rows may share one file, so a file
    outlives the rows that name it (``prune_turn_images``)."""

    file = models.FileField(
        storage=turn_image_storage,
        max_length=120,
        help_text="original/<sha256>.<ext> in the turn-image storage (content-addressed).",
    )
    sha256 = models.CharField(max_length=64, help_text="Hex SHA-256 of the file's bytes.")
    media_type = models.CharField(max_length=20, help_text="image/png, image/jpeg, …")
    width = models.PositiveIntegerField()
    height = models.PositiveIntegerField()
    byte_size = models.PositiveIntegerField(help_text="The file's size in bytes.")

    class Meta:
        abstract = True

    @property
    def display_name(self) -> str:
        return display_name_of(self.file.name)


class TurnImage(StoredImageFile):
    """One image a user turn carries (multimodal turns), in corpus order."""

    turn = models.ForeignKey(Turn, on_delete=models.CASCADE, related_name="images")
    position = models.PositiveSmallIntegerField(help_text="0-based place among the turn's images.")
    alt = models.TextField(blank=True, help_text="The corpus's alt text (shown to people).")

    class Meta:
        ordering = ["turn_id", "position"]
        constraints = [
            models.UniqueConstraint(fields=["turn", "position"], name="turn_image_unique_position")
        ]
        indexes = [models.Index(fields=["sha256"])]

    def __str__(self) -> str:
        return f"{self.turn} image {self.position}"


class ScenarioTurnImage(StoredImageFile):
    """An image a scenario shows the assistant with one of its user turns, for curation: a
    curated dialogue's turn carries it (a ``TurnImage`` naming the same stored file), and the
    Planner is told its ``description`` — never the image — and, when ``problem`` is set,
    that the turn may be an INTERVENTION trigger (benchmark/curation/agent_views.py)."""

    scenario = models.ForeignKey(Scenario, on_delete=models.CASCADE, related_name="turn_images")
    turn = models.PositiveSmallIntegerField(
        help_text="The user turn (1-based) whose message carries the image."
    )
    alt = models.TextField(blank=True, help_text="Alt text (shown to people with the image).")
    description = models.TextField(
        help_text="What the image shows, as the Planner is told it (it never sees the image)."
    )
    problem = models.TextField(
        blank=True,
        help_text="Why the image is not enough for the task; empty when it suffices. An "
        "insufficient image lets the Planner make its turn an INTERVENTION trigger.",
    )
    intervention = models.TextField(
        blank=True,
        help_text="The user's action that would fix the problem, e.g. 'retake the photo in "
        "focus'. Required with a problem.",
    )

    class Meta:
        # A turn's images go with its message in this order (the TurnImage positions).
        ordering = ["scenario_id", "turn", "id"]
        constraints = [
            models.CheckConstraint(condition=Q(turn__gte=1), name="scenario_image_turn_positive"),
            # intervention_rubric() needs both the problem and its fix.
            models.CheckConstraint(
                condition=Q(problem="") | ~Q(intervention=""),
                name="scenario_image_problem_has_intervention",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.scenario} turn {self.turn} image"

    def clean(self) -> None:
        if self.problem.strip() and not self.intervention.strip():
            raise ValidationError(
                {"intervention": "Say what the user could do to fix the problem."}
            )


def display_name_of(original: str) -> str:
    """The name of an original's metadata-free copy (what is served) in the storage."""
    return "display/" + original.removeprefix("original/")


# The nominal phase window of each of the release's trigger types (SPEC 2.1). Outside it is a
# protocol finding. INTERVENTION has none: it belongs wherever a turn's image falls short.
PHASE_WINDOWS: dict[str, tuple[int, int]] = {
    TriggerType.EMERGENT: (1, 3),
    TriggerType.CRITICAL: (4, 7),
    TriggerType.RECOVERY: (8, 10),
}


class Anchor(models.Model):
    """A concrete fact the user discloses, and the turn that discloses it."""

    dialogue = models.ForeignKey(Dialogue, on_delete=models.CASCADE, related_name="anchors")
    key = models.CharField(max_length=40, help_text="Stable key within the dialogue, e.g. A1.")
    text = models.TextField()
    disclosed_in = models.ForeignKey(
        Turn, on_delete=models.SET_NULL, null=True, blank=True, related_name="anchors_disclosed"
    )

    class Meta:
        ordering = ["dialogue_id", "key"]
        constraints = [
            models.UniqueConstraint(fields=["dialogue", "key"], name="anchor_unique_key")
        ]

    def __str__(self) -> str:
        return f"{self.key}: {self.text[:60]}"


class Trigger(models.Model):
    """A turn at which the assistant's reply is evaluated, with its prospective rubric."""

    turn = models.OneToOneField(Turn, on_delete=models.CASCADE, related_name="trigger")
    type = models.CharField(max_length=12, choices=TriggerType.choices)
    pass_criteria = models.TextField()
    partial_criteria = models.TextField()
    fail_criteria = models.TextField()
    anchors = models.ManyToManyField(
        Anchor, blank=True, related_name="triggers", help_text="Anchors the rubric relies on."
    )
    rubric_extra = models.JSONField(default=dict, blank=True)
    extra = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["turn_id"]
        indexes = [models.Index(fields=["type"])]

    def __str__(self) -> str:
        return f"{self.type} @ {self.turn}"

    @property
    def in_phase_window(self) -> bool:
        """True for a type without a window (INTERVENTION): it cannot be outside one."""
        if self.type not in PHASE_WINDOWS:
            return True
        low, high = PHASE_WINDOWS[self.type]
        return low <= self.turn.index <= high


class ModelEndpoint(models.Model):
    """A model the pipeline can call. The API key itself never enters the database: only the
    *name* of the environment variable that holds it."""

    name = models.SlugField(max_length=80, unique=True, help_text="Short unique handle.")
    display_name = models.CharField(max_length=120, help_text="Name shown to researchers.")
    provider = models.CharField(
        max_length=registry.KEY_MAX_LENGTH,
        # The provider registry is the vocabulary of keys (benchmark/providers/registry.py);
        # a callable, so that a newly registered provider needs no migration.
        choices=registry.choices,
        help_text="Which adapter calls the model (docs/pipeline.md lists them).",
    )
    model_name = models.CharField(max_length=200, help_text="Model id sent to the provider.")
    base_url = models.URLField(blank=True, help_text="Empty = the provider's default URL.")
    default_params = models.JSONField(
        default=dict, blank=True, help_text='e.g. {"temperature": 0.7, "max_tokens": 1024}.'
    )
    api_key_env = models.CharField(
        max_length=80,
        blank=True,
        validators=[
            RegexValidator(
                keys.ENV_NAME_PATTERN, "Name of an environment variable, e.g. OPENAI_API_KEY."
            )
        ],
        help_text="Name of the environment variable that holds the key (never the key): one ending "
        "in _API_KEY, or listed in PROACTBENCH_API_KEY_ENV_ALLOWED; never the workbench's own "
        "secrets.",
    )
    is_active = models.BooleanField(default=True)

    class Meta:
        ordering = ["display_name"]

    def __str__(self) -> str:
        return self.display_name

    def clean(self) -> None:
        """What the endpoint's provider needs (its registry entry says): a key variable, a base
        URL; and a key variable that may be sent at all (keys.py). Not a database constraint,
        because the providers are registered in code and a new one must not need a migration;
        ``provider_for`` refuses the same endpoints at call time. An unknown provider is
        refused by the field's choices."""
        errors = {}
        if self.api_key_env and keys.is_env_name(self.api_key_env):
            refusal = keys.api_key_env_refusal(self.api_key_env)
            if refusal:
                errors["api_key_env"] = refusal
        spec = registry.lookup(self.provider)
        if spec is not None and spec.needs_api_key and not self.api_key_env:
            errors["api_key_env"] = (
                f"{spec.label} needs the name of the environment variable that holds its key."
            )
        if spec is not None and spec.needs_base_url and not self.base_url:
            errors["base_url"] = f"{spec.label} has no default URL: give the server's base URL."
        if errors:
            raise ValidationError(errors)
