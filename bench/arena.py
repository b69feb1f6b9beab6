"""Arena benchmark: a Bradley–Terry ranking of 1,000,000 battles among 30 sources, with 1,000
bootstrap resamples; time and peak RSS, and memory flat in the battle count.

Data (simulated, seeded): 30 sources with known Elo-scale ratings (normal, mean 1000, sd 150);
each battle a uniformly drawn pair, its sides in random order, won by A with the Elo
probability 1 / (1 + 10^((R_B − R_A) / 400)), or a tie (10 %, half of them "tie (bothbad)")
whatever the strengths — so the fit leaves ties out (``ties="exclude"``) and its ratings can be
read against the truth. The rows are generated 100,000 at a time and handed to
``Battles.from_records`` as a lazy stream of ``(source_a, source_b, winner)`` tuples, as the
selectors will hand it database rows.

Measured, each battle count in its own process (1,000,000; and 250,000 and 4,000,000 to show
memory flat): building the structure (generating the rows included, and that alone timed
beside it), counting the battles per pair and outcome, the ranking with one resample (the
count and the point fit; median of 3), and the ranking with 1,000 resamples;
peak RSS, its growth over the process ready to work, and that growth beyond the input
arrays themselves (9 bytes a battle). Target (issue #16): ≤ 10 s for 1,000,000 battles, fit
and bootstrap; memory flat in the battle count beyond the arrays.

    python bench/arena.py                    # 1M, then 250k and 4M for the memory check
    python bench/arena.py --battles 1000000  # one count only

Ends with ``RESULT total_s= build_s= point_fit_s= bootstrap_s= peak_rss_mb= …``.
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The project's root first: bench/stats.py would otherwise shadow the stats package.
sys.path.insert(0, str(ROOT))

from machine import speed_probe  # noqa: E402

N_SOURCES, SEED, GENERATED_AT_ONCE = 30, 20261216, 100_000
COUNTS = (1_000_000, 250_000, 4_000_000)  # the first is the headline


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _child(n_battles: int) -> dict:
    """One battle count, in this process: build, count, fit, bootstrap; the figures as JSON."""
    import numpy as np

    from benchmark.vocabulary import BattleWinner
    from stats.compute.bradley_terry import bradley_terry, pair_counts
    from stats.interfaces import Battles

    names = [f"model-{k:02d}" for k in range(N_SOURCES)]
    truth = np.random.default_rng(SEED).normal(1000, 150, N_SOURCES)
    winners = np.array(
        [BattleWinner.MODEL_A, BattleWinner.MODEL_B, BattleWinner.TIE, BattleWinner.TIE_BOTHBAD],
        dtype=object,
    )

    def rows():
        rng = np.random.default_rng([SEED, n_battles])
        for start in range(0, n_battles, GENERATED_AT_ONCE):
            size = min(GENERATED_AT_ONCE, n_battles - start)
            a = rng.integers(0, N_SOURCES, size)
            b = (a + rng.integers(1, N_SOURCES, size)) % N_SOURCES
            p = 1 / (1 + 10 ** ((truth[b] - truth[a]) / 400))
            tie = rng.random(size) < 0.1
            outcome = np.where(tie, 2 + (rng.random(size) < 0.5), (rng.random(size) >= p))
            yield from zip(
                [names[k] for k in a],
                [names[k] for k in b],
                winners[outcome].tolist(),
                strict=True,
            )

    # Warm up (imports, SciPy's first calls) so that "ready" is the process ready to work.
    bradley_terry(Battles.from_records(_few(names)), resamples=2)
    ready_mb = _peak_rss_mb()

    started = time.perf_counter()
    generated = sum(1 for _ in rows())
    generate_s = time.perf_counter() - started
    started = time.perf_counter()
    battles = Battles.from_records(rows())
    build_s = time.perf_counter() - started
    assert len(battles) == generated == n_battles
    array_mb = (battles.a.nbytes + battles.b.nbytes + battles.outcome.nbytes) / 2**20

    count_s = _median_s(lambda: pair_counts(battles))
    point_s = _median_s(lambda: bradley_terry(battles, ties="exclude", resamples=1))
    started = time.perf_counter()
    result = bradley_terry(battles, ties="exclude")
    full_s = time.perf_counter() - started

    order = [result.sources.index(name) for name in names]
    centred = truth - truth.mean() + 1000
    inside = (result.ci_low[order] <= centred) & (centred <= result.ci_high[order])
    peak_mb = _peak_rss_mb()
    return {
        "battles": n_battles,
        "generate_s": generate_s,
        "build_s": build_s,
        "count_s": count_s,
        "point_s": point_s,
        "bootstrap_s": full_s - point_s,
        "ranking_s": full_s,
        "total_s": build_s + full_s,
        "ready_mb": ready_mb,
        "peak_mb": peak_mb,
        "array_mb": array_mb,
        "beyond_arrays_mb": peak_mb - ready_mb - array_mb,
        "covered": int(inside.sum()),
        "max_error": float(np.abs(result.rating[order] - centred).max()),
        "mean_ci_width": float((result.ci_high - result.ci_low).mean()),
        "ties": result.n_ties,
    }


def _median_s(work) -> float:
    """Median seconds of three runs of ``work``."""
    times = []
    for _ in range(3):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def _few(names: list[str]) -> list[tuple[str, str, str]]:
    return [(names[0], names[1], "model_a"), (names[1], names[0], "model_a")]


def _run(n_battles: int) -> dict:
    result = subprocess.run(
        [sys.executable, __file__, "--child", str(n_battles)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        sys.exit(f"{n_battles:,} battles failed:\n{result.stderr}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--battles", type=int, help="one battle count only")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_child(args.child)))
        return

    load_before = os.getloadavg()
    probe = speed_probe()
    runs = [_run(n) for n in ((args.battles,) if args.battles else COUNTS)]
    print(
        f"\nArena benchmark: Bradley–Terry, {N_SOURCES} sources, 1,000 bootstrap resamples, "
        "ties left out (10 % of the battles)\n"
    )
    print(
        "| battles | generate rows | build (with generating) | count | count + point fit "
        "| 1,000 resamples "
        "| build + ranking | peak RSS | growth over ready | arrays | beyond the arrays "
        "| true rating in its CI | max error | mean CI width |"
    )
    print("| ---: |" + " ---: |" * 13)
    for r in sorted(runs, key=lambda r: r["battles"]):
        print(
            f"| {r['battles']:,} | {r['generate_s']:.2f} s | {r['build_s']:.2f} s "
            f"| {r['count_s']:.3f} s | {r['point_s']:.3f} s | {r['bootstrap_s']:.2f} s "
            f"| **{r['total_s']:.2f} s** | {r['peak_mb']:.1f} MB "
            f"| {r['peak_mb'] - r['ready_mb']:.1f} MB | {r['array_mb']:.1f} MB "
            f"| {r['beyond_arrays_mb']:.1f} MB | {r['covered']}/{N_SOURCES} "
            f"| {r['max_error']:.1f} | {r['mean_ci_width']:.1f} |"
        )
    print(f"\nmachine load average (1, 5, 15 min) at the start: {load_before}")
    print(
        f"machine speed probe (bench/machine.py) at the start: {probe['hot_ms']:.1f} ms busy, "
        f"{probe['idle_ms']:.1f} ms after idling"
    )
    head = runs[0]
    beyond = " ".join(
        f"beyond_arrays_mb_{r['battles']}={r['beyond_arrays_mb']:.1f}"
        for r in sorted(runs, key=lambda r: r["battles"])
    )
    print(
        f"\nRESULT battles={head['battles']} sources={N_SOURCES} resamples=1000 "
        f"total_s={head['total_s']:.2f} build_s={head['build_s']:.2f} "
        f"count_s={head['count_s']:.3f} point_fit_s={head['point_s']:.3f} "
        f"bootstrap_s={head['bootstrap_s']:.2f} peak_rss_mb={head['peak_mb']:.1f} "
        f"{beyond} covered={head['covered']}/{N_SOURCES} "
        f"probe_hot_ms={probe['hot_ms']:.1f} probe_idle_ms={probe['idle_ms']:.1f} "
        f"load_before={load_before[0]:.2f}"
    )


if __name__ == "__main__":
    main()
