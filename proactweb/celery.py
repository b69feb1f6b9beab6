"""The Celery application.

Broker and result backend come from settings (see ``CELERY_*`` there): Redis when ``REDIS_URL`` is
set, otherwise kombu's filesystem transport under ``var/``, so the embedded default needs no server.
"""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "proactweb.settings")

app = Celery("proactweb")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
