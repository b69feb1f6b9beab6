"""Re-seed the 24 communication styles with the release's own table (benchmark/corpus/styles.py,
docs/styles.md). Styles keep their index, so dialogues keep their style; codes, traits, word
bounds and descriptions change."""

from django.db import migrations

from benchmark.corpus.styles import coherent_styles


def reseed(apps, schema_editor):
    Style = apps.get_model("benchmark", "CommunicationStyle")
    # Codes are unique and the new table reuses old codes at other indices: clear them first.
    for style in Style.objects.all():
        style.code = f"#{style.index}"
        style.save(update_fields=["code"])
    for spec in coherent_styles():
        Style.objects.update_or_create(index=spec.index, defaults=spec.row())


class Migration(migrations.Migration):
    dependencies = [("benchmark", "0009_unit_dispatched_at")]
    operations = [migrations.RunPython(reseed, migrations.RunPython.noop)]
