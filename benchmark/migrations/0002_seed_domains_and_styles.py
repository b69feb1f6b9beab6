"""Seed the five domains and the 24 communication styles (rule in benchmark/corpus/styles.py)."""

from django.db import migrations

# The rule lives in one place; a change to it needs a new migration (a test compares the two).
from benchmark.corpus.styles import DOMAINS, coherent_styles


def seed(apps, schema_editor):
    Domain = apps.get_model("benchmark", "Domain")
    Style = apps.get_model("benchmark", "CommunicationStyle")
    for order, (key, name, description) in enumerate(DOMAINS):
        Domain.objects.update_or_create(
            key=key, defaults={"name": name, "description": description, "order": order}
        )
    for spec in coherent_styles():
        Style.objects.update_or_create(index=spec.index, defaults=spec.row())


def unseed(apps, schema_editor):
    apps.get_model("benchmark", "CommunicationStyle").objects.all().delete()
    apps.get_model("benchmark", "Domain").objects.all().delete()


class Migration(migrations.Migration):
    dependencies = [("benchmark", "0001_initial")]
    operations = [migrations.RunPython(seed, unseed)]
