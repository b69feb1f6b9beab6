"""Corpus-import benchmark: a generated full-size corpus (198 dialogues, 624 triggers, ~8 MB,
shaped like the release's records), imported into a fresh database.

Targets (issue #2): import ≤ 2 s, and peak memory flat in file size — so the same import is also
run on a corpus four times larger, and the two peaks are compared.

    python bench/corpus_import.py            # embedded default (SQLite in a temp folder)
    DATABASE_URL=postgres://…/scratch python bench/corpus_import.py   # a scratch PostgreSQL db

Each measurement runs in its own process (fresh interpreter, empty corpus tables), so peak RSS is
that import's alone. Ends with a RESULT line.
"""

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CATEGORIES = (
    "professional_persona",
    "sports_persona",
    "arts_persona",
    "travel_persona",
    "culinary_persona",
)
STYLE_CODES = {1: "NONE", 4: "Q", 8: "EQ", 12: "PQ", 15: "QA", 19: "EQA", 21: "EVA", 23: "PQM"}
WORDS = (
    "schedule budget venue battery route recipe deadline client rehearsal gallery ferry oven "
    "printer team sprint altitude allergy backup spreadsheet weather permit deposit cable kiln "
    "invoice laptop training warmup cooldown stage lighting shuttle passport pantry sourdough "
    "the a and to of for with on before after because although meanwhile plan check order keep "
    "maybe exactly probably quickly carefully tomorrow tonight weekend morning evening first last"
).split()

# 198 dialogues with 201 E / 232 C / 191 R triggers, as in the release: every dialogue has one
# EMERGENT and one CRITICAL; the remaining triggers are spread deterministically.
N_DIALOGUES, N_EMERGENT, N_CRITICAL, N_RECOVERY = 198, 201, 232, 191


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


def _rubric(rng: random.Random, kind: str) -> dict:
    return {
        "type": kind,
        "pass_criteria": _text(rng, 95),
        "partial_criteria": _text(rng, 75),
        "fail_criteria": _text(rng, 70),
    }


def _trigger_plan(index: int) -> list[tuple[int, str]]:
    plan = [(2, "EMERGENT"), (5, "CRITICAL")]
    if index < N_RECOVERY:
        plan.append((9, "RECOVERY"))
    if index < N_EMERGENT - N_DIALOGUES:
        plan.insert(0, (1, "EMERGENT"))
    if index >= N_DIALOGUES - (N_CRITICAL - N_DIALOGUES):
        plan.append((7, "CRITICAL"))
    return sorted(plan)


def generate_corpus(path: Path, *, copies: int = 1, seed: int = 7) -> tuple[int, int]:
    rng = random.Random(seed)
    dialogues = triggers = 0
    with path.open("w", encoding="utf-8") as out:
        for copy in range(copies):
            for index in range(N_DIALOGUES):
                uuid = f"{copy:04x}{index:028x}"
                style = list(STYLE_CODES)[index % len(STYLE_CODES)]
                category = CATEGORIES[index % 5]
                scenario = f"{category.split('_')[0].upper()}_{index % 10 + 1:02d}"
                blueprint = f"BP_{scenario}_{STYLE_CODES[style]}"
                plan = _trigger_plan(index)
                kinds = dict(plan)
                n_turns = 10 if index % 3 else 9
                turns, previous = [], 0
                for turn in range(1, n_turns + 1):
                    kind = kinds.get(turn)
                    turns.append(
                        {
                            "turn": turn,
                            "planner": {
                                "state_audit": {
                                    "current_turn": turn,
                                    "previous_trigger_count": previous,
                                    "is_max_reached": False,
                                },
                                "is_trigger_point": kind is not None,
                                "stop_conversation": False,
                                "evaluation_rubric": _rubric(rng, kind) if kind else None,
                                "tactical_order": {
                                    "intent": _text(rng, 30),
                                    "content_payload": [_text(rng, 25)],
                                    "behavioral_directive": _text(rng, 45),
                                },
                            },
                            "user_message": _text(rng, 55),
                            "assistant_response": _text(rng, 270),
                        }
                    )
                    previous += kind is not None
                record = {
                    "blueprint_id": blueprint,
                    "scenario_id": scenario,
                    "unique_id_eval": f"{blueprint}__style{style}__{uuid}",
                    "uuid": uuid,
                    "category_key": category,
                    "style_combination_index": style,
                    "evaluated_model": "bench-curator",
                    "num_turns_completed": n_turns,
                    "trigger_points": [
                        {"turn": t, "evaluation_rubric": _rubric(rng, k)} for t, k in plan
                    ],
                    "turn_records": turns,
                    "token_usage": {
                        agent: {
                            "prompt_tokens": 9000 * calls,
                            "completion_tokens": 900 * calls,
                            "calls": calls,
                        }
                        for agent, calls in (("planner", 10), ("user_agent", 9), ("assistant", 0))
                    },
                }
                out.write(json.dumps(record) + "\n")
                dialogues += 1
                triggers += len(plan)
    return dialogues, triggers


def _measure(path: Path) -> dict:
    """Runs in a child process: migrate a fresh database, then time one import."""
    import django

    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "proactweb.settings")
    django.setup()
    from django.core.management import call_command

    from benchmark.corpus.importer import corpus_import

    call_command("migrate", verbosity=0)
    from benchmark.models import Blueprint, Dialogue, Persona, Scenario

    # A scratch PostgreSQL database persists between runs: start each one empty.
    for model in (Dialogue, Blueprint, Scenario, Persona):
        model.objects.all().delete()
    before_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    with path.open("rb") as stream:
        summary = corpus_import(stream=stream, source=path.name)
    elapsed = time.perf_counter() - started
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "dialogues": summary.dialogues,
        "triggers": summary.triggers,
        "import_s": round(elapsed, 3),
        "rss_before_mb": round(before_kb / 1024, 1),
        "peak_rss_mb": round(peak_kb / 1024, 1),
    }


def _run_child(path: Path, var_dir: Path) -> dict:
    env = {**os.environ, "PROACTWEB_VAR_DIR": str(var_dir)}
    result = subprocess.run(
        [sys.executable, __file__, "--measure", str(path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        sys.exit(f"measurement failed:\n{result.stderr}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of the full size")
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(_measure(args.measure)))
        return

    with tempfile.TemporaryDirectory(prefix="proactbench-bench-") as tmp:
        tmp_path = Path(tmp)
        full, large = tmp_path / "full.jsonl", tmp_path / "large.jsonl"
        generate_corpus(full, copies=1)
        generate_corpus(large, copies=4)
        rows = []
        for label, path in [("full", full)] * args.repeat + [("4x", large)]:
            run_dir = tmp_path / f"run{len(rows)}"
            run_dir.mkdir()
            row = _run_child(path, run_dir)
            row.update(label=label, file_mb=round(path.stat().st_size / 1e6, 1))
            rows.append(row)

    print(
        f"{'corpus':<7}{'file MB':>9}{'dialogues':>11}{'triggers':>10}{'import s':>10}"
        f"{'RSS before MB':>15}{'peak RSS MB':>13}"
    )
    for row in rows:
        print(
            f"{row['label']:<7}{row['file_mb']:>9}{row['dialogues']:>11}{row['triggers']:>10}"
            f"{row['import_s']:>10}{row['rss_before_mb']:>15}{row['peak_rss_mb']:>13}"
        )
    full_rows = [r for r in rows if r["label"] == "full"]
    best = min(full_rows, key=lambda r: r["import_s"])
    large_row = rows[-1]
    growth = round(large_row["peak_rss_mb"] - max(r["peak_rss_mb"] for r in full_rows), 1)
    database = "postgresql" if os.environ.get("DATABASE_URL") else "sqlite"
    print(
        f"RESULT dialogues={best['dialogues']} triggers={best['triggers']} "
        f"import_s={best['import_s']} peak_rss_mb={best['peak_rss_mb']} "
        f"file_mb={best['file_mb']} peak_rss_4x_mb={large_row['peak_rss_mb']} "
        f"rss_growth_4x_mb={growth} database={database}"
    )


if __name__ == "__main__":
    main()
