"""The site as gunicorn serves it, with ``bench/_floor.py``'s floor mounted beside its URLs:
what ``annotation_next.py --floor`` serves, so that the floor's CPU per request is measured over
HTTP, under the same load and gunicorn settings as the answers it is set against."""

from django.conf import settings

from proactweb.wsgi import application

settings.ROOT_URLCONF = "_floor"  # read per request (Django's resolver), after setup

__all__ = ["application"]
