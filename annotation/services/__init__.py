"""Writes for human studies, by topic: creating studies, handing out and taking answers, importing the release."""
