"""The admin of Django's own auth models, with their many-to-many choices — a group's
permissions, a user's groups and permissions — refusing an id no 64-bit integer can be before
the query (``core.forms.ModelIdsField``): SQLite cannot bind one, and Django's own field let the
lookup raise, a 500 (found by tests/proactweb/test_no_5xx.py's form sweep)."""

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import GroupAdmin, UserAdmin
from django.contrib.auth.models import Group

from core.forms import ModelIdsField


class _SafeIds:
    def formfield_for_manytomany(self, db_field, request, **kwargs):
        kwargs.setdefault("form_class", ModelIdsField)
        return super().formfield_for_manytomany(db_field, request, **kwargs)  # type: ignore[misc]


class SafeGroupAdmin(_SafeIds, GroupAdmin):
    pass


class SafeUserAdmin(_SafeIds, UserAdmin):
    pass


for model, model_admin in ((Group, SafeGroupAdmin), (get_user_model(), SafeUserAdmin)):
    admin.site.unregister(model)
    admin.site.register(model, model_admin)
