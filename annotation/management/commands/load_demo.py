from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand
from django.db import transaction

from annotation.demo import (
    IMAGE_STUDY,
    demo_image_study_load,
    demo_labelled_study_load,
    demo_studies_load,
)
from benchmark.corpus.images import FolderSource
from benchmark.corpus.importer import corpus_import
from benchmark.evaluation.demo_run import demo_image_run_load, demo_run_load
from benchmark.models import JudgeDisagreement, ModelEndpoint
from benchmark.providers.replay import REPLAY
from core.roles import ANNOTATOR, RESEARCHER

DEMO_DIR = settings.BASE_DIR / "benchmark" / "demo_data"

# Demo logins for a local trial only. Never load the demo on a shared server.
DEMO_USERS = (
    # username, password, staff/superuser, group
    ("admin", "demo-admin", True, None),
    ("researcher", "demo-researcher", False, RESEARCHER),
    ("annotator1", "demo-annotator1", False, ANNOTATOR),
    ("annotator2", "demo-annotator2", False, ANNOTATOR),
)

DEMO_ENDPOINTS = (
    # name, display name, role in the demo
    ("demo-atlas-large", "Atlas Large (demo)"),
    ("demo-birch-medium", "Birch Medium (demo)"),
    ("demo-cedar-small", "Cedar Small (demo)"),
    ("demo-judge-primary", "Primary judge (demo)"),
    ("demo-judge-crossfamily", "Cross-family judge (demo)"),
    ("demo-classifier", "Failure-mode classifier (demo)"),
)


class Command(BaseCommand):
    help = (
        "Load the hand-written demo corpus, replay endpoints for the demo models and judges, "
        "the demo run (their recorded replies and verdicts), the multimodal demo (dialogues "
        "whose turns carry photos, and a run of their recorded replies), demo logins (admin, "
        "researcher, two annotators), one demo study of each kind for the annotators (and a "
        "direct rating of the photo replies) and a closed failure-mode study answered by two "
        "demo raters (recorded labels; no logins). Safe to run again."
    )

    def add_arguments(self, parser):
        parser.add_argument("--no-users", action="store_true", help="skip the demo logins")

    @transaction.atomic
    def handle(self, *args, no_users, **options):
        with (DEMO_DIR / "dialogues.jsonl").open("rb") as stream:
            summary = corpus_import(stream=stream, source="demo corpus")
        for line in summary.lines_of_text():
            self.stdout.write(line)
        for name, display in DEMO_ENDPOINTS:
            ModelEndpoint.objects.update_or_create(
                name=name,
                defaults={
                    "display_name": display,
                    "provider": REPLAY,
                    "model_name": name,
                    "default_params": {},
                    "api_key_env": "",
                },
            )
        self.stdout.write(f"Replay endpoints: {len(DEMO_ENDPOINTS)}")
        run = demo_run_load()
        self.stdout.write(
            f"Demo run {run.pk}: {run.units.count()} replies, "
            f"{JudgeDisagreement.objects.filter(unit__run=run).count()} judge disagreements"
        )
        # The multimodal demo (benchmark/demo_data/make_images.py): dialogues whose user turns
        # carry images, read from the demo folder's images/. After the demo run, which is the
        # text corpus's recordings: these dialogues are not part of it.
        with (DEMO_DIR / "image_dialogues.jsonl").open("rb") as stream:
            summary = corpus_import(
                stream=stream, source="demo image corpus", images=FolderSource(DEMO_DIR)
            )
        for line in summary.lines_of_text():
            self.stdout.write(line)
        image_run = demo_image_run_load()
        self.stdout.write(f"Demo run {image_run.pk} (photos): {image_run.units.count()} replies")
        if no_users:
            return
        self.stdout.write("Demo logins (local trial only):")
        users = {}
        for username, password, is_staff, group in DEMO_USERS:
            user, _ = get_user_model().objects.get_or_create(username=username)
            user.is_staff = user.is_superuser = is_staff
            user.set_password(password)
            user.save()
            if group:
                user.groups.add(Group.objects.get(name=group))
            users[username] = user
            role = "admin" if is_staff or group is None else group.lower()
            self.stdout.write(f"  {role:<11} {username} / {password}")
        created = demo_studies_load(
            run=run,
            annotators=[users["annotator1"], users["annotator2"]],
            adjudicators=[users["researcher"]],
            created_by=users["researcher"],
        )
        # After the annotators' studies, so theirs keep the lower ids they have always had.
        labelled = demo_labelled_study_load(run=run, created_by=users["researcher"])
        if labelled:
            created.append(labelled)
        annotators = [users["annotator1"], users["annotator2"]]
        if demo_image_study_load(
            image_run=image_run, annotators=annotators, created_by=users["researcher"]
        ):
            created.append(IMAGE_STUDY)
        self.stdout.write(f"Demo studies: {len(created)} created" + (": " if created else ""))
        for name in created:
            self.stdout.write(f"  {name}")
