from django.apps import AppConfig


class CoreConfig(AppConfig):
    """The bottom layer: who is who (roles), signing in (the session store, the login backend,
    login throttling), plain-SQL row loading, the integer ``in`` lookup that drops values no
    column can hold (``lookups.py``), and the site's own pages (home, health). It imports no
    other app of the project; every app may import it."""

    name = "core"
    verbose_name = "Core"

    def ready(self) -> None:
        from core import lookups

        lookups.register()
