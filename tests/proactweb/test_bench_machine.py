"""bench/machine.py's speed probe: the figures a benchmark's RESULT line carries."""

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from machine import speed_probe  # noqa: E402


def test_the_probe_times_the_workload_busy_and_after_its_pauses():
    started = time.monotonic()
    probe = speed_probe(hot_runs=3, idle_runs=2, idle_s=0.2)
    elapsed = time.monotonic() - started
    assert set(probe) == {"hot_ms", "idle_ms"}
    assert probe["hot_ms"] > 0 and probe["idle_ms"] > 0
    # Two pauses of 0.2 s were taken, and the five timed runs fit in what was left.
    assert elapsed >= 0.4
    assert (elapsed - 0.4) * 1000 >= 3 * probe["hot_ms"] * 0.5
