"""The offline-curation fixtures (the demo data with replay endpoints, Celery in eager mode),
shared by the curation-job tests."""

from tests.benchmark.curation.test_offline_curation import demo, eager_celery  # noqa: F401
