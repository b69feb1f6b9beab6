"""The statistics, as pure functions on NumPy arrays: no ORM, no Django, no I/O.

Selectors (``stats/selectors.py``) fetch rows in a few queries and hand arrays to these
functions; the same functions serve the dashboard, the REST API, ``export_stats`` and the
benchmarks. Every random number comes from a generator seeded from a documented base seed and
the name of what is being resampled (``resampling.rng_for``), so a figure never changes between
two page loads and does not depend on what else is on the page. docs/statistics.md states every
formula, tie rule and seed.

Verdicts are ordinal codes throughout: FAIL = 0, PARTIAL = 1, PASS = 2 (the score is code / 2);
-1 means "no verdict" (skipped, missing, judge error).
"""

from benchmark.vocabulary import VERDICT_CODES, Verdict

FAIL, PARTIAL, PASS = (VERDICT_CODES[v] for v in (Verdict.FAIL, Verdict.PARTIAL, Verdict.PASS))
NO_VERDICT = -1
