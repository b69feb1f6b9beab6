"""The login backend: Django's ``ModelBackend``, with the user every request's session names
read in one plain statement (``core.sql.user_by_pk``; why there). Authentication,
permissions and the active-user check are Django's, unchanged."""

from __future__ import annotations

from django.contrib.auth import backends, get_user_model
from django.core.exceptions import ValidationError

from core import sql


class ModelBackend(backends.ModelBackend):
    def get_user(self, user_id):
        model = get_user_model()
        try:
            pk = model._meta.pk.to_python(user_id)
        except ValidationError:
            return None
        user = sql.user_by_pk(model, pk)
        return user if user is not None and self.user_can_authenticate(user) else None
