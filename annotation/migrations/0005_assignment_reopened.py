from django.db import migrations, models


def mark_reopened(apps, schema_editor):
    """An assignment with an undone answer was reopened by that undo."""
    Assignment = apps.get_model("annotation", "Assignment")
    Answer = apps.get_model("annotation", "Answer")
    undone = Answer.objects.filter(retraction_reason="undo").values("assignment_id")
    Assignment.objects.filter(pk__in=undone).update(reopened=True)


class Migration(migrations.Migration):
    dependencies = [("annotation", "0004_study_kind_registry")]

    operations = [
        migrations.AddField(
            model_name="assignment",
            name="reopened",
            field=models.BooleanField(
                default=False,
                help_text="An undo reopened it at least once (its undone answers refill the form).",
            ),
        ),
        migrations.RunPython(mark_reopened, migrations.RunPython.noop),
    ]
