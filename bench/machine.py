"""How fast this machine's CPU is right now, to read a benchmark's figures against.

This machine's speed is not constant: the same code ran 2.5× slower in one hour than in
another, and a CPU that has been idle runs a fixed piece of Python up to ~2.7× slower than one
kept busy (bench/README.md). ``speed_probe`` times one fixed pure-Python workload (integer
arithmetic and a dict of strings, ~12 ms on a busy core here) back to back, and again after
pauses, so that a result line carries the state the machine was in.
"""

import statistics
import time


def _workload() -> float:
    started = time.perf_counter()
    total = 0
    for i in range(200_000):
        total += i * i
    table = {}
    for i in range(20_000):
        table[str(i)] = i
    return (time.perf_counter() - started) * 1000


def speed_probe(*, hot_runs: int = 9, idle_runs: int = 5, idle_s: float = 0.5) -> dict:
    """Median milliseconds of the workload: ``hot`` back to back (after one unmeasured run),
    ``idle`` each after ``idle_s`` seconds of sleep."""
    _workload()
    hot = [_workload() for _ in range(hot_runs)]
    idle = []
    for _ in range(idle_runs):
        time.sleep(idle_s)
        idle.append(_workload())
    return {"hot_ms": statistics.median(hot), "idle_ms": statistics.median(idle)}


if __name__ == "__main__":
    probe = speed_probe()
    print(f"RESULT probe_hot_ms={probe['hot_ms']:.1f} probe_idle_ms={probe['idle_ms']:.1f}")
