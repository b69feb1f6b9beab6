"""Writes for human studies, by topic: creating studies (studies.py), handing out items and
taking answers (assignments.py), importing the release's studies (importer.py)."""
