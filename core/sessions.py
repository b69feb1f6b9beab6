"""The session store: Django's database sessions, the read in one plain statement
(``core.sql.live_session``; why there). Saving, expiry, clearing and the cookie are Django's
``db`` backend unchanged."""

from __future__ import annotations

from django.contrib.sessions.backends import db
from django.contrib.sessions.backends.base import VALID_KEY_CHARS

from core import sql

_KEY_CHARS = frozenset(VALID_KEY_CHARS)


class SessionStore(db.SessionStore):
    def _get_session_from_db(self):
        session = None
        if self.session_key:  # the base class validated its form (None if malformed)
            session = sql.live_session(self.session_key)
        if session is None:
            self._session_key = None
        return session

    def _validate_session_key(self, key):
        # Django's rule (at least 8 characters), and only the characters Django makes keys of:
        # a cookie with anything else (a NUL, which PostgreSQL refuses in text and so failed
        # every page, login included) is no session.
        return bool(key) and len(key) >= 8 and set(key) <= _KEY_CHARS
