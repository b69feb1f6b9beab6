"""The annotation hot path's CPU per answer, in one process: the answer request (each one's
response the workspace with the next item, as the page sends it) through Django's test client
on PostgreSQL, timed with this process's CPU clock (and the PostgreSQL server process's that
serves it, read from /proc). No HTTP server, no client, no other process on the clock: the
figure moves far less with a shared machine's noise than the web CPU of ``annotation_next.py``
does, so a change of a few per cent shows. Compare two checkouts by
running this in each, alternating (A B B A).

    python bench/annotation_inproc.py                  # 4 rounds of 1,000 answers
    python bench/annotation_inproc.py --rounds 6 --answers 500
    python bench/annotation_inproc.py --profile answer.prof   # and where that CPU goes
    python bench/annotation_inproc.py --timers                # the answer's pieces, timed

Each round also times as many requests to a floor (``bench/_floor.py``: a signed-in htmx POST
of the same form, answered with a one-line template): what Django and the site's middleware
cost any request, so that the answer's own work is the difference.

It drops and recreates the scratch database ``proactbench_bench_inproc`` (--database-url) and
fills it as ``annotation_next.py`` does (one pairwise study, 3,056 items, k = 3, 50 annotators):
rounds × answers (one round more with each of --profile and --timers) must stay below its
~9,000 places. Ends with a RESULT line.

``--replies long`` gives every reply Markdown as costly to render as a real one, each reply its
own (``annotation_next.reply_text``); the default ``short`` replies are plain and shared by a
trigger's items, so the renders are mostly reused.

``--history N`` first has every annotator answer N items through the answer service (no HTTP,
not timed; the study grows by 191 items a model until it holds them), then vacuums and analyses
the tables as autovacuum would over the days such a history takes, so that the rounds measure
annotators with a past: what an answer costs an annotator deep into a long study.

    python bench/annotation_inproc.py --rounds 3 --answers 400 --history 1000
"""

import argparse
import math
import os
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _workers import cpu_seconds_of, migrate, recreate_database, web_env  # noqa: E402
from annotation_next import FLOOR_FORM, REPLIES  # noqa: E402

ANNOTATORS = 50
K = 3
MODELS = 16
ITEMS_PER_MODEL = 191  # the generated corpus's RECOVERY triggers: one pair of replies each


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--answers", type=int, default=1000, help="answers per round")
    parser.add_argument(
        "--database-url", default="postgres://postgres@127.0.0.1:5432/proactbench_bench_inproc"
    )
    parser.add_argument(
        "--profile",
        metavar="FILE",
        help="also run one more round under cProfile and write its stats to FILE (the rounds "
        "timed above run without it); prints the top functions by own time",
    )
    parser.add_argument(
        "--timers",
        action="store_true",
        help="also run one more round with the answer view's pieces each timed by this "
        "process's CPU clock (no profiler: the pieces cost what they do in the rounds), and "
        "print each one's CPU per answer",
    )
    parser.add_argument(
        "--history",
        type=int,
        default=0,
        metavar="N",
        help="answers each annotator gives before the rounds (not timed; default 0)",
    )
    parser.add_argument(
        "--replies",
        choices=REPLIES,
        default="short",
        help="the replies' text (annotation_next.reply_text): short, plain and one per trigger; "
        "long, Markdown as costly to render as a real reply and each its own",
    )
    args = parser.parse_args()
    timed = (args.rounds + bool(args.profile) + args.timers) * args.answers + 2 * ANNOTATORS
    models = MODELS
    if args.history:
        wanted = ANNOTATORS * args.history + timed
        models = max(MODELS, math.ceil(wanted / K / ITEMS_PER_MODEL) + 1)
    elif timed > MODELS * ITEMS_PER_MODEL * K:
        sys.exit(
            f"rounds × answers (one round more with each of --profile and --timers) must stay "
            f"below the study's"
            f" {MODELS * ITEMS_PER_MODEL * K} places"
        )
    env = web_env(database_url=args.database_url, secret_key_prefix="bench-inproc-")
    env["ALLOWED_HOSTS"] = "testserver"  # Django's test client's host
    recreate_database(args.database_url)
    migrate(env)
    os.environ.update(env)
    os.chdir(ROOT)
    import django

    django.setup()
    from annotation_next import KEY, TOKEN, _prepare
    from django.conf import settings
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    shape = SimpleNamespace(models=models, k=K, replies=args.replies)  # _prepare's arguments
    study_id, session_keys, items = _prepare(shape, ANNOTATORS)
    if args.history:
        started = time.perf_counter()
        _give_history(study_id, args.history)
        print(
            f"history: {args.history} answers by each of {ANNOTATORS} annotators"
            f" in {time.perf_counter() - started:.0f} s"
        )
    settings.ROOT_URLCONF = "_floor"  # the site's URLs, and the floor beside them
    clients = []
    for key in session_keys:
        client = Client(headers={"HX-Request": "true"})
        client.cookies["sessionid"] = key
        clients.append(client)
    bodies: list[str | None] = [None] * len(clients)

    def answer(i: int) -> None:
        """Annotator i answers the item they hold (Start first if they hold none)."""
        client = clients[i]
        if bodies[i] is None:
            bodies[i] = client.post(f"/annotate/{study_id}/next").content.decode()
        body = bodies[i]
        token = TOKEN.search(body).group(1)
        data = {"idempotency_key": KEY.search(body).group(1), "choice": "1", "confidence": "3"}
        response = client.post(
            f"/annotate/{study_id}/items/{token}/answer",
            urlencode({**data, "elapsed_ms": "2000"}),
            content_type="application/x-www-form-urlencoded",
        )
        if response.status_code != 200 or not TOKEN.search(response.content.decode()):
            sys.exit(f"answer {response.status_code}: the study ran out or the request failed")
        bodies[i] = response.content.decode()

    floor_data = urlencode(FLOOR_FORM)

    def floor(i: int) -> None:
        response = clients[i].post(
            "/bench-floor", floor_data, content_type="application/x-www-form-urlencoded"
        )
        if response.status_code != 200:
            sys.exit(f"floor {response.status_code}")

    for i in range(len(clients)):  # warm: every annotator started, every code path loaded
        answer(i)
    with CaptureQueriesContext(connection) as captured:
        answer(0)
    statements = len(captured.captured_queries)  # BEGIN and COMMIT included, as docs count them

    for i in range(len(clients)):
        floor(i)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = cursor.fetchone()[0]

    def database_cpu() -> float:
        """CPU seconds so far of the PostgreSQL server process serving this one."""
        return cpu_seconds_of(lambda pid, ppid, command: pid == backend)

    figures, floors, database = [], [], []
    print(
        f"{items} items ({args.replies} replies), {ANNOTATORS} annotators with {args.history}"
        f" answers each before the rounds, {args.answers} answers a round, PostgreSQL"
    )
    print(
        "round   CPU ms/answer   PostgreSQL CPU ms/answer   wall ms/answer   floor CPU ms/request"
    )
    n = ANNOTATORS + 1
    for r in range(args.rounds):
        cpu, wall, db = time.process_time(), time.perf_counter(), database_cpu()
        for _ in range(args.answers):
            answer(n % len(clients))
            n += 1
        cpu_ms = (time.process_time() - cpu) / args.answers * 1000
        wall_ms = (time.perf_counter() - wall) / args.answers * 1000
        db_ms = (database_cpu() - db) / args.answers * 1000
        cpu = time.process_time()
        for j in range(args.answers):
            floor(j % len(clients))
        floor_ms = (time.process_time() - cpu) / args.answers * 1000
        figures.append(cpu_ms)
        floors.append(floor_ms)
        database.append(db_ms)
        print(f"{r + 1:5d}   {cpu_ms:13.2f}   {db_ms:24.2f}   {wall_ms:14.2f}   {floor_ms:20.2f}")
    if args.profile:
        import cProfile
        import pstats

        profiler = cProfile.Profile(time.process_time)  # CPU, as the rounds count it
        profiler.enable()
        for _ in range(args.answers):
            answer(n % len(clients))
            n += 1
        profiler.disable()
        profiler.dump_stats(args.profile)
        pstats.Stats(args.profile).sort_stats("tottime").print_stats(25)
    if args.timers:
        started = time.process_time()
        with _Timers() as timers:
            for _ in range(args.answers):
                answer(n % len(clients))
                n += 1
        timers.report(args.answers, time.process_time() - started, statistics.median(floors))
    print(
        f"RESULT cpu_ms_per_answer={statistics.median(figures):.2f} "
        f"cpu_ms_min={min(figures):.2f} cpu_ms_max={max(figures):.2f} "
        f"pg_cpu_ms_per_answer={statistics.median(database):.2f} "
        f"floor_cpu_ms={statistics.median(floors):.2f} "
        f"statements_per_answer={statements} rounds={args.rounds} answers={args.answers} "
        f"history={args.history} replies={args.replies} "
        f"load_before={os.getloadavg()[0]:.1f}"
    )


class _Timers:
    """The answer view's pieces, each wrapped (where the view looks it up) to add up its CPU
    time: the answer service, the workspace and, within it, the progress count and the
    template's render. Unwrapped on exit."""

    PIECES = (
        ("annotation.views", "answer_submit", "answer_submit (the service: its statements)"),
        ("annotation.views", "_workspace", "the workspace (the next item's page)"),
        ("annotation.selectors", "rater_progress", "  of which the progress count"),
        ("annotation.views", "render", "  of which the template's render"),
    )

    def __enter__(self) -> "_Timers":
        import importlib

        self.cpu = {label: 0.0 for _, _, label in self.PIECES}
        self.originals = []
        for module_name, name, label in self.PIECES:
            module = importlib.import_module(module_name)
            original = getattr(module, name)
            self.originals.append((module, name, original))
            setattr(module, name, self._timed(original, label))
        return self

    def _timed(self, function, label):
        def timed(*args, **kwargs):
            started = time.process_time()
            try:
                return function(*args, **kwargs)
            finally:
                self.cpu[label] += time.process_time() - started

        return timed

    def __exit__(self, *exc) -> None:
        for module, name, original in self.originals:
            setattr(module, name, original)

    def report(self, answers: int, total_s: float, floor_ms: float) -> None:
        print(f"one more round of {answers} answers, its pieces timed (CPU ms per answer):")
        for label, seconds in self.cpu.items():
            print(f"  {label:<52} {seconds / answers * 1000:6.2f}")
        outer = [label for label in self.cpu if not label.startswith(" ")]
        rest = (total_s - sum(self.cpu[label] for label in outer)) / answers * 1000
        print(f"  {'the rest (Django, middleware, the view, the client)':<52} {rest:6.2f}")
        print(f"  {'  (the floor, from the rounds)':<52} {floor_ms:6.2f}")
        print(f"  {'all':<52} {total_s / answers * 1000:6.2f}")


def _give_history(study_id: int, per_annotator: int) -> None:
    """Every rater of the study answers ``per_annotator`` items, in turn, through the services
    the answer view calls (form, ``answer_submit`` handing out the next item): a history as
    real use leaves it, most of it on items others have since completed."""
    from annotation import kinds
    from annotation.models import Rater, Study
    from annotation.services.assignments import answer_submit, assignment_next

    study = Study.objects.get(pk=study_id)
    kind = kinds.get(study.kind)
    raters = list(Rater.objects.filter(study=study).select_related("study"))
    held = {rater.pk: assignment_next(rater=rater) for rater in raters}
    data = {"choice": "1", "confidence": "3", "elapsed_ms": "2000"}
    for n in range(per_annotator * len(raters)):
        rater = raters[n % len(raters)]
        assignment = held[rater.pk]
        if assignment is None:
            sys.exit("the study ran out while giving the annotators their history")
        form = kind.answer_form(
            {**data, "idempotency_key": f"history-{n}"}, study=study, assignment=assignment
        )
        if not form.is_valid():
            sys.exit(f"history answer refused: {form.errors.as_text()}")
        result = answer_submit(
            rater=rater,
            item_token=assignment.item.token,
            answer=form.to_input(),
            idempotency_key=form.cleaned_data["idempotency_key"],
            elapsed_ms=2000,
            hand_out_next=True,
        )
        held[rater.pk] = result.following
    # What autovacuum does over the days a real history takes: the visibility map (so that
    # index-only scans skip the heap) and the planner's statistics brought up to date.
    from django.db import connection

    from annotation.models import Answer, Assignment, StudyItem

    with connection.cursor() as cursor:
        for model in (Assignment, Answer, StudyItem):
            cursor.execute(f"VACUUM (ANALYZE) {model._meta.db_table}")


if __name__ == "__main__":
    main()
