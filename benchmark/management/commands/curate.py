import sys
from collections import Counter

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from benchmark.curation.jobs import curation_job_launch
from benchmark.curation.loop import CurationError, CurationSpec
from benchmark.curation.services import (
    agent_providers_for,
    curation_blueprint,
    curation_spec_for,
    dialogue_curate,
)
from benchmark.curation.tasks import curate_dialogue_task
from benchmark.management.run_commands import command_user
from benchmark.models import (
    PHASE_WINDOWS,
    AuditVia,
    CommunicationStyle,
    Dialogue,
    ModelEndpoint,
    Persona,
    Scenario,
    Trigger,
)
from benchmark.providers.base import ProviderError


class Command(BaseCommand):
    help = (
        "Curate new dialogues with the three-agent loop (Planner, User Agent, cold-start "
        "Assistant) and save them as drafts. A scenario key names one scenario per persona; "
        "--count picks that many personas that have no dialogue in this style yet. Replay "
        "endpoints curate offline from benchmark/demo_data/curation.jsonl: after load_demo, "
        "--scenario DEMO_TRAVEL_01 --style 1 --planner demo-atlas-large --user-agent "
        "demo-birch-medium --assistant demo-cedar-small."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--scenario", required=True, help="scenario key, e.g. PROFESSIONAL_01")
        parser.add_argument("--persona", help="persona uuid (Persona.external_id)")
        parser.add_argument("--style", required=True, type=int, help="style index, 1-24")
        parser.add_argument("--count", type=int, default=1, help="dialogues to curate (default 1)")
        parser.add_argument("--planner", required=True, help="model endpoint name")
        parser.add_argument("--user-agent", required=True, help="model endpoint name")
        parser.add_argument("--assistant", required=True, help="model endpoint name")
        parser.add_argument(
            "--enqueue", action="store_true", help="queue Celery tasks instead of running here"
        )
        parser.add_argument(
            "--job",
            metavar="NAME",
            help="launch a curation job of this name instead (one Celery task per dialogue, "
            "watched, cancelled and resumed in the admin or with manage.py curation_job)",
        )

    def handle(self, *args, **options) -> None:
        if options["count"] < 1:
            raise CommandError("--count must be at least 1.")
        style = CommunicationStyle.objects.filter(index=options["style"]).first()
        if style is None:
            raise CommandError(f"Unknown style {options['style']}; styles are numbered 1-24.")
        planner = _endpoint(options["planner"], "--planner")
        user_agent = _endpoint(options["user_agent"], "--user-agent")
        assistant = _endpoint(options["assistant"], "--assistant")
        todo = _pick(options["scenario"], options["persona"], style, options["count"])

        if options["job"]:
            job = curation_job_launch(
                name=options["job"],
                planner=planner,
                user_agent=user_agent,
                assistant=assistant,
                targets=[(scenario, style) for scenario, _ in todo],
                via=AuditVia.COMMAND,
                actor_name=command_user("curate"),
            )
            self.stdout.write(f"Launched curation job {job.id} ({len(todo)} dialogue(s)).")
            return

        if options["enqueue"]:
            for scenario, spec in todo:
                # Nothing is written before enqueueing, so there is no commit to wait for;
                # delay() returns the task id to print.
                result = curate_dialogue_task.delay(
                    scenario.id, style.id, planner.id, user_agent.id, assistant.id
                )
                self.stdout.write(f"Queued {spec.unique_id_eval} as task {result.id}")
            self.stdout.write(f"Queued {len(todo)} curation task(s).")
            return

        try:
            providers = agent_providers_for(
                planner_endpoint=planner, user_endpoint=user_agent, assistant_endpoint=assistant
            )
        except ProviderError as exc:
            raise CommandError(str(exc)) from None
        curated: list[Dialogue] = []
        failures: list[str] = []
        for _, spec in tqdm(todo, desc="Curating", unit="dialogue", file=sys.stderr, disable=None):
            try:
                curated.append(
                    dialogue_curate(
                        spec=spec,
                        planner_endpoint=planner,
                        user_endpoint=user_agent,
                        assistant_endpoint=assistant,
                        providers=providers,
                    )
                )
            except (CurationError, ProviderError) as exc:
                failures.append(f"{spec.unique_id_eval}: {exc}")
        for dialogue in curated:
            self.stdout.write(f"Dialogue {dialogue.id}: {_describe(dialogue)}")
        self.stdout.write(
            f"Curated {len(curated)} of {len(todo)} dialogue(s) as drafts"
            + (f"; {_token_totals(curated)}" if curated else "")
            + "."
        )
        if failures:
            raise CommandError(
                f"{len(failures)} of {len(todo)} curation(s) failed:\n" + "\n".join(failures)
            )


def _endpoint(name: str, option: str) -> ModelEndpoint:
    endpoint = ModelEndpoint.objects.filter(name=name).first()
    if endpoint is None:
        known = ", ".join(
            ModelEndpoint.objects.filter(is_active=True).values_list("name", flat=True)
        )
        raise CommandError(
            f"Unknown model endpoint {name!r} for {option}. "
            + (f"Active endpoints: {known}." if known else "No endpoint is configured yet.")
        )
    if not endpoint.is_active:
        raise CommandError(f"Model endpoint {name!r} ({option}) is inactive.")
    return endpoint


def _pick(
    key: str, persona_uuid: str | None, style: CommunicationStyle, count: int
) -> list[tuple[Scenario, CurationSpec]]:
    """The first ``count`` scenarios with this key (by persona) not yet curated in this style."""
    scenarios = Scenario.objects.filter(key=key).select_related("persona", "domain")
    if persona_uuid:
        if not Persona.objects.filter(external_id=persona_uuid).exists():
            raise CommandError(f"Unknown persona {persona_uuid!r}.")
        scenarios = scenarios.filter(persona__external_id=persona_uuid)
        if not scenarios.exists():
            raise CommandError(f"Persona {persona_uuid} has no scenario {key!r}.")
    elif not scenarios.exists():
        raise CommandError(f"Unknown scenario {key!r}.")
    candidates = []
    for scenario in scenarios.order_by("persona__external_id"):
        spec = curation_spec_for(
            scenario=scenario,
            style=style,
            blueprint=curation_blueprint(scenario=scenario, style=style),
        )
        candidates.append((scenario, spec))
    taken = set(
        Dialogue.objects.filter(
            unique_id_eval__in=[spec.unique_id_eval for _, spec in candidates]
        ).values_list("unique_id_eval", flat=True)
    )
    free = [(scenario, spec) for scenario, spec in candidates if spec.unique_id_eval not in taken]
    if len(free) < count:
        raise CommandError(
            f"Asked for {count} dialogue(s), but only {len(free)} of the {len(candidates)} "
            f"scenario(s) {key!r} have no style-{style.index} dialogue yet (a dialogue id is "
            "fixed by scenario, style and persona, and curation never overwrites one)."
        )
    return free[:count]


def _describe(dialogue: Dialogue) -> str:
    types = Counter(Trigger.objects.filter(turn__dialogue=dialogue).values_list("type", flat=True))
    findings = f", {len(dialogue.findings)} finding(s)" if dialogue.findings else ""
    return (
        f"{dialogue.unique_id_eval} ({dialogue.num_turns_completed} turns; triggers "
        + ", ".join(f"{kind} {types[kind]}" for kind in PHASE_WINDOWS if types[kind])
        + f"{findings})"
    )


def _token_totals(dialogues: list[Dialogue]) -> str:
    totals: Counter[str] = Counter()
    for dialogue in dialogues:
        for agent, usage in (dialogue.token_usage or {}).items():
            totals[agent] += usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0)
    return "tokens " + ", ".join(f"{agent} {n}" for agent, n in totals.items())
