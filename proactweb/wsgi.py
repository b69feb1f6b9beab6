import os

from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "proactweb.settings")
application = get_wsgi_application()
# Import the URLconf, and with it every view (the statistics stack too), now rather than on the
# first request: under `gunicorn --preload` the workers fork with it loaded and share its pages.
get_resolver().url_patterns  # noqa: B018
