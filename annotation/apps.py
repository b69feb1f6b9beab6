from django.apps import AppConfig


class AnnotationConfig(AppConfig):
    name = "annotation"
    verbose_name = "Human studies"

    def ready(self) -> None:
        # Every study kind registers itself when its module is imported.
        from annotation import kinds

        kinds.discover()
