"""Turn-image benchmark (issue #18): importing a corpus whose user turns carry images, and
serving a workspace item with three images to many annotators at once.

1. Import: 200 dialogues carrying 1,000 images of ~200 KB each (random pixels as PNG, so
   nothing compresses and every image is distinct: no content-addressed file is shared), read
   from a sidecar ``images/`` folder, into a fresh database — and the first 100 dialogues
   (500 images) beside it. Each import runs in its own process: time and peak RSS, which must
   be flat in the number of images (one image is decoded at a time).
2. Serving: a direct-rating study whose every item's trigger turn carries three of those
   images (k = 10: five items for 50 annotators); each simulated annotator holds an item and,
   like a browser with its cache off, GETs the item page, then its three images side by side,
   then pauses. p95 of
   the page and of the image responses, against gunicorn (3 sync workers, as in compose) and
   PostgreSQL. Target: both ≤ 50 ms.

    python bench/images.py                              # 1,000 images, 50 annotators, 30 s
    python bench/images.py --images 200 --duration 10   # a quick look

Uses a scratch PostgreSQL database (dropped and created afresh: --database-url) and a scratch
var/ folder for the images. Ends with a RESULT line.
"""

import argparse
import asyncio
import io
import json
import os
import random
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _workers import (  # noqa: E402
    free_port,
    gunicorn_shape,
    recreate_database,
    start_gunicorn,
    stop_gunicorn,
    web_env,
)
from annotation_next import Think, _cpu_snapshot, _pct  # noqa: E402

IMAGES_PER_DIALOGUE = 5
SIDE = 256  # 256 × 256 RGB noise: ~197 KB as PNG
IMAGE_URL = re.compile(r'src="(/annotate/images/[0-9a-f]{64})"')


def _noise_png(seed: int) -> bytes:
    from PIL import Image

    rng = random.Random(seed)
    image = Image.frombytes("RGB", (SIDE, SIDE), rng.randbytes(SIDE * SIDE * 3))
    out = io.BytesIO()
    image.save(out, "PNG", compress_level=1)
    return out.getvalue()


def generate(folder: Path, dialogues: int) -> tuple[Path, int]:
    """``corpus.jsonl`` and ``images/`` in ``folder``: each dialogue's first five user turns
    carry one image each (its trigger turns 2 and 5 among them). Returns (file, image bytes)."""
    from corpus_import import generate_corpus

    full = folder / "all.jsonl"
    generate_corpus(full)  # 198 dialogues; more are copies with new ids
    records = [json.loads(line) for line in full.read_text().splitlines()]
    (folder / "images").mkdir(exist_ok=True)
    total = 0
    path = folder / "corpus.jsonl"
    with path.open("w", encoding="utf-8") as out:
        for n in range(dialogues):
            record = dict(records[n % len(records)])
            record["unique_id_eval"] = f"{record['unique_id_eval']}__img{n:04d}"
            parts = {}
            for turn in range(1, IMAGES_PER_DIALOGUE + 1):
                seed = n * IMAGES_PER_DIALOGUE + turn
                data = _noise_png(seed)
                total += len(data)
                (folder / "images" / f"{seed:05d}.png").write_bytes(data)
                parts[str(turn)] = [
                    {"type": "image", "path": f"images/{seed:05d}.png", "alt": f"photo {seed}"}
                ]
            record["x_workbench"] = {"turn_images": parts}
            out.write(json.dumps(record) + "\n")
    full.unlink()
    return path, total


def _import_child(path: str, var_dir: str) -> None:
    """In a fresh process: migrate, time one import, print JSON (seconds, peak RSS)."""
    os.environ["PROACTWEB_VAR_DIR"] = var_dir
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "proactweb.settings")
    import django

    django.setup()
    from django.core.management import call_command

    from benchmark.corpus.images import FolderSource
    from benchmark.corpus.importer import corpus_import

    call_command("migrate", verbosity=0)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    started = time.perf_counter()
    with open(path, "rb") as stream:
        summary = corpus_import(stream=stream, images=FolderSource(Path(path).parent))
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        json.dumps(
            {
                "seconds": seconds,
                "dialogues": summary.dialogues,
                "images": summary.images,
                "rss_before_mb": rss_before,
                "peak_mb": peak,
            }
        )
    )


def measure_import(path: Path, env: dict) -> dict:
    with tempfile.TemporaryDirectory() as var_dir:
        if "DATABASE_URL" in env:
            recreate_database(env["DATABASE_URL"])
        result = subprocess.run(
            [sys.executable, __file__, "--child-import", str(path), var_dir],
            cwd=ROOT,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
    return json.loads(result.stdout.strip().splitlines()[-1])


def _prepare_serving(annotators: int, folder: Path) -> list[tuple[str, str]]:
    """Items of a direct-rating study, each a trigger turn carrying three ~200 KB images,
    k = 10 (a study allows at most 20), enough items for every annotator to hold one. Returns
    (item page path, session key) per annotator."""
    import django

    django.setup()
    from importlib import import_module

    from django.conf import settings
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
    from django.contrib.auth.models import Group, User
    from django.urls import reverse

    from annotation.services.assignments import assignment_next
    from annotation.services.studies import StudySpec, study_create
    from benchmark.corpus.images import FolderSource
    from benchmark.corpus.importer import corpus_import
    from benchmark.models import (
        Condition,
        Dialogue,
        EvaluationRun,
        EvaluationUnit,
        ModelEndpoint,
        RunSource,
        RunStatus,
        Trigger,
        UnitState,
    )
    from core.roles import ANNOTATOR

    k = min(10, annotators)
    items = -(-annotators // k)
    # Each dialogue's trigger turn 2 carries three of its images; no other turn any.
    lines = []
    for raw in (folder / "corpus.jsonl").read_text().splitlines()[:items]:
        line = json.loads(raw)
        parts = line["x_workbench"]["turn_images"]
        line["x_workbench"]["turn_images"] = {"2": parts["1"] + parts["2"] + parts["3"]}
        line["trigger_points"] = [tp for tp in line["trigger_points"] if tp["turn"] == 2]
        lines.append(json.dumps(line) + "\n")
    serving = folder / "serving.jsonl"
    serving.write_text("".join(lines))
    with serving.open("rb") as stream:
        corpus_import(stream=stream, images=FolderSource(folder))
    model = ModelEndpoint.objects.create(
        name="bench-model", display_name="Bench model", provider="replay", model_name="bm"
    )
    run = EvaluationRun.objects.create(
        name="images benchmark run",
        source=RunSource.IMPORTED,
        status=RunStatus.DONE,
        conditions=[Condition.VANILLA],
    )
    run.dialogues.set(Dialogue.objects.all())
    run.endpoints.set([model])
    EvaluationUnit.objects.bulk_create(
        EvaluationUnit(
            run=run,
            trigger=trigger,
            endpoint=model,
            condition=Condition.VANILLA,
            state=UnitState.DONE,
            reply="I can't see the object: could you move what is in front of it? " * 6,
        )
        for trigger in Trigger.objects.all()
    )
    group = Group.objects.get(name=ANNOTATOR)
    users = []
    for i in range(annotators):
        user = User.objects.create(username=f"bench-annotator-{i:03d}")
        user.set_unusable_password()
        user.save()
        user.groups.add(group)
        users.append(user)
    study = study_create(
        spec=StudySpec(
            kind="direct_rating",
            name="Benchmark: rate the reply to a photo",
            annotators=users,
            overlap=k,
            run=run,
            seed=1,
        )
    )
    SessionStore = import_module(settings.SESSION_ENGINE).SessionStore  # noqa: N806
    held = []
    for rater in study.raters.select_related("user"):
        item = assignment_next(rater=rater).item
        session = SessionStore()
        session[SESSION_KEY] = str(rater.user_id)
        session[BACKEND_SESSION_KEY] = settings.AUTHENTICATION_BACKENDS[-1]
        session[HASH_SESSION_KEY] = rater.user.get_session_auth_hash()
        session.create()
        held.append((reverse("annotation:item", args=[study.pk, item.token]), session.session_key))
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return held


async def _annotator(base, page, session, deadline, think, latency, errors, warmup_until):
    import aiohttp

    cookies = {"sessionid": session}
    timeout = aiohttp.ClientTimeout(total=30)
    connector = aiohttp.TCPConnector(limit=4, keepalive_timeout=1)
    async with aiohttp.ClientSession(
        base, cookies=cookies, timeout=timeout, connector=connector
    ) as client:
        await asyncio.sleep(think.start)
        while time.monotonic() < deadline:
            started = time.perf_counter()
            async with client.get(page) as response:
                html = await response.text()
            elapsed = (time.perf_counter() - started) * 1000
            if response.status != 200:
                errors.append(f"page {response.status}")
            elif time.monotonic() >= warmup_until:
                latency["page"].append(elapsed)
            urls = IMAGE_URL.findall(html)
            if len(urls) != 3:
                errors.append(f"page showed {len(urls)} images")

            async def fetch(url):
                started = time.perf_counter()
                async with client.get(url) as response:
                    body = await response.read()
                elapsed = (time.perf_counter() - started) * 1000
                if response.status != 200 or len(body) < 1000:
                    errors.append(f"image {response.status}")
                elif time.monotonic() >= warmup_until:
                    latency["image"].append(elapsed)

            # A browser fetches a page's images side by side.
            await asyncio.gather(*(fetch(url) for url in urls))
            await asyncio.sleep(think())


def measure_serving(args, folder: Path) -> dict:
    recreate_database(args.database_url)
    var_dir = tempfile.mkdtemp(prefix="bench-images-var-")
    env = web_env(database_url=args.database_url, secret_key_prefix="images-benchmark-only-")
    env["PROACTWEB_VAR_DIR"] = var_dir
    os.environ.update(env)
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    held = _prepare_serving(args.annotators, folder)
    port = free_port()
    server = start_gunicorn(env, port, args.workers)
    latency: dict[str, list[float]] = {"page": [], "image": []}
    errors: list[str] = []
    try:
        warmup_until = time.monotonic() + args.warmup
        deadline = warmup_until + args.duration

        async def everyone():
            await asyncio.gather(
                *(
                    _annotator(
                        f"http://127.0.0.1:{port}",
                        page,
                        key,
                        deadline,
                        Think(args.think_ms / 1000, 0.5, seed=i),
                        latency,
                        errors,
                        warmup_until,
                    )
                    for i, (page, key) in enumerate(held)
                )
            )

        database = args.database_url.rsplit("/", 1)[1]
        cpu_before: dict[str, float] = {}

        async def measured():
            await asyncio.sleep(args.warmup)
            cpu_before.update(_cpu_snapshot(server.pid, database))

        async def run_all():
            await asyncio.gather(everyone(), measured())

        asyncio.run(run_all())
        cpu_after = _cpu_snapshot(server.pid, database)
        cpu = {k: cpu_after[k] - cpu_before.get(k, 0.0) for k in cpu_after}
    finally:
        stop_gunicorn(server)
        subprocess.run(["rm", "-rf", var_dir], check=False)
    return {"latency": latency, "errors": errors, "cpu": cpu}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, default=1000, help="images in the larger corpus")
    parser.add_argument("--annotators", type=int, default=50)
    parser.add_argument("--duration", type=float, default=30.0, help="seconds of load")
    parser.add_argument("--warmup", type=float, default=3.0, help="seconds not measured")
    parser.add_argument("--think-ms", type=float, default=1000.0, help="mean pause per page")
    parser.add_argument(
        "--workers", type=int, default=None, help="gunicorn workers (default: gunicorn.conf.py's)"
    )
    parser.add_argument(
        "--database-url", default="postgres://postgres@127.0.0.1:5432/proactbench_bench_images"
    )
    parser.add_argument("--child-import", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_import:
        _import_child(*args.child_import)
        return

    with open("/proc/loadavg") as loadavg:
        load_before = " ".join(loadavg.read().split()[:3])
    dialogues = args.images // IMAGES_PER_DIALOGUE
    with tempfile.TemporaryDirectory(prefix="bench-images-") as tmp:
        folder = Path(tmp)
        started = time.perf_counter()
        path, image_bytes = generate(folder, dialogues)
        print(
            f"generated {dialogues} dialogues, {args.images} images, "
            f"{image_bytes / 1e6:.0f} MB of images ({image_bytes / args.images / 1e3:.0f} KB "
            f"each) in {time.perf_counter() - started:.1f} s"
        )
        half = folder / "half.jsonl"
        half.write_text("".join(path.read_text().splitlines(True)[: dialogues // 2]))
        env = {**os.environ, "DATABASE_URL": args.database_url}
        env.pop("REDIS_URL", None)
        rows = []
        for label, corpus in (("half", half), ("full", path)):
            result = measure_import(corpus, env)
            rows.append((label, result))
        print(f"machine load average (1, 5, 15 min) at the start: {load_before}")
        print("import (PostgreSQL, images from a sidecar folder, one process each)")
        print(f"{'corpus':<6} {'dialogues':>9} {'images':>7} {'seconds':>8} {'peak RSS MB':>12}")
        for label, result in rows:
            print(
                f"{label:<6} {result['dialogues']:>9} {result['images']:>7} "
                f"{result['seconds']:>8.1f} {result['peak_mb']:>12.1f}"
            )
        serving = measure_serving(args, folder)
    with open("/proc/loadavg") as loadavg:
        load_after = " ".join(loadavg.read().split()[:3])
    latency, errors = serving["latency"], serving["errors"]
    print(
        f"serving: {args.annotators} annotators, each on an item with 3 images, "
        f"{args.duration:.0f} s (+{args.warmup:.0f} s warm-up), "
        f"think {args.think_ms:.0f} ms ± 50%, {gunicorn_shape(args.workers)}, "
        f"PostgreSQL; load average after: {load_after}"
    )
    print(f"{'request':<8} {'n':>7} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    for kind in ("page", "image"):
        values = latency[kind]
        print(
            f"{kind:<8} {len(values):>7} {_pct(values, 50):>8.1f} {_pct(values, 95):>8.1f} "
            f"{_pct(values, 99):>8.1f} {max(values, default=0):>8.1f}"
        )
    requests = len(latency["page"]) + len(latency["image"])
    cpu = serving["cpu"]
    web_ms = cpu["web"] * 1000 / requests if requests else 0.0
    print(
        f"CPU over the measured {args.duration:.0f} s: web workers {cpu['web']:.1f} s "
        f"({web_ms:.1f} ms per request), PostgreSQL {cpu['database']:.1f} s, simulated "
        f"annotators {cpu['client']:.1f} s; {os.cpu_count()} cores"
    )
    if errors:
        print(f"errors: {len(errors)} (first: {errors[0]})")
    half_result, full_result = rows[0][1], rows[1][1]
    print(
        f"RESULT images={full_result['images']} import_s={full_result['seconds']:.1f} "
        f"peak_rss_mb={full_result['peak_mb']:.1f} "
        f"peak_rss_half_mb={half_result['peak_mb']:.1f} "
        f"page_p95_ms={_pct(latency['page'], 95):.1f} "
        f"image_p95_ms={_pct(latency['image'], 95):.1f} web_cpu_ms_per_request={web_ms:.1f} "
        f"errors={len(errors)}"
    )


if __name__ == "__main__":
    main()
