"""The Celery application.

Broker and result backend come from settings (see ``CELERY_*`` there): Redis when ``REDIS_URL`` is
set, otherwise kombu's filesystem transport under ``var/``, so the embedded default needs no server.
"""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "proactweb.settings")
# Workers skip Django's system checks at start-up: `manage.py check`, migrate and the web process
# run them, and here they would import the URLconf and with it the statistics stack (NumPy,
# SciPy, statsmodels: about 220 MB per worker process) that no evaluation task needs.
os.environ.setdefault("CELERY_SKIP_CHECKS", "1")

app = Celery("proactweb")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
