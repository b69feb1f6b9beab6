"""Run every benchmark in bench/ in turn (each prints a table and ends with a RESULT line)."""

import subprocess
import sys
from pathlib import Path

BENCHMARKS = [
    "machine.py",
    "corpus_import.py",
    "oversized_input.py",
    "pipeline.py",
    "ratelimit.py",
    "hosts.py",
    "image_requests.py",
    "stats.py",
    "arena.py",
    "judge_ranking.py",
    "annotation_next.py",
    "annotation_inproc.py",
    "run_page.py",
    "fault_campaign.py",
    "memory_soak.py",
    "first_start.py",
    "compose_scale.py",
]


def main() -> int:
    here = Path(__file__).resolve().parent
    status = 0
    for name in BENCHMARKS:
        print(f"\n## {name}", flush=True)
        status |= subprocess.run([sys.executable, str(here / name)], check=False).returncode
    return status


if __name__ == "__main__":
    sys.exit(main())
