"""Django admin for the benchmark app, by topic: the corpus, and model runs."""

from benchmark.admin import corpus, curation_jobs, runs  # noqa: F401  (registration happens on import)
