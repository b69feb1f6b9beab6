from typing import NamedTuple

from django import forms

from benchmark.corpus.images import (
    ALLOWED_TEXT,
    CheckedImage,
    ImageRefused,
    ImageStore,
    check_image,
    max_bytes,
    max_per_turn,
    too_large,
)
from benchmark.models import (
    CommunicationStyle,
    DialogueStatus,
    Domain,
    ScenarioTurnImage,
    TriggerType,
)
from benchmark.selectors import DialogueFilters


class DialogueFilterForm(forms.Form):
    q = forms.CharField(required=False, max_length=200, label="Search")
    domain = forms.ModelChoiceField(
        queryset=Domain.objects.all(),
        required=False,
        to_field_name="key",
        empty_label="All domains",
    )
    style = forms.ModelChoiceField(
        queryset=CommunicationStyle.objects.all(),
        required=False,
        to_field_name="index",
        empty_label="All styles",
    )
    status = forms.ChoiceField(
        choices=[("", "Any status"), *DialogueStatus.choices], required=False
    )
    trigger_type = forms.ChoiceField(
        choices=[("", "Any trigger"), *TriggerType.choices], required=False, label="Has trigger"
    )
    with_findings = forms.BooleanField(required=False, label="With protocol findings")

    def to_filters(self) -> DialogueFilters:
        data = self.cleaned_data
        return DialogueFilters(
            q=data["q"].strip(),
            domain=data["domain"].key if data["domain"] else "",
            style=data["style"].index if data["style"] else None,
            status=data["status"],
            trigger_type=data["trigger_type"],
            with_findings=data["with_findings"],
        )


class CorpusUploadForm(forms.Form):
    file = forms.FileField(help_text="final_dialogues.jsonl (UTF-8 JSON Lines)")
    images = forms.FileField(
        required=False,
        label="Images (zip)",
        help_text="Optional: a zip holding the files that image parts name by path "
        "(export_corpus --images zip writes one).",
    )
    dry_run = forms.BooleanField(required=False, help_text="Check only; write nothing.")
    strict = forms.BooleanField(required=False, help_text="Treat protocol findings as errors.")


class CheckedUpload(NamedTuple):
    """An uploaded image's bytes, once ``check_image`` took them."""

    data: bytes
    image: CheckedImage


class ScenarioTurnImageForm(forms.ModelForm):
    """A scenario image in the Scenario admin: the file is checked like an imported turn image
    (``check_image``: Pillow decodes it, the size and pixel caps hold) and stored the same way,
    content-addressed with its metadata-free copy. On a change without a new file, the stored
    image stays."""

    upload = forms.FileField(
        required=False,
        label="Image",
        help_text=f"{ALLOWED_TEXT}; replaces the stored image when given.",
    )

    class Meta:
        model = ScenarioTurnImage
        fields = ("turn", "upload", "description", "alt", "problem", "intervention")

    def clean_upload(self) -> CheckedUpload | None:
        upload = self.cleaned_data.get("upload")
        if upload is None:
            if not self.instance.file:
                raise forms.ValidationError("Choose an image file.")
            return None
        if upload.size is not None and upload.size > max_bytes():
            raise forms.ValidationError(f"{upload.name}: {too_large(upload.size)}")
        data = upload.read()
        try:
            image = check_image(data)
        except ImageRefused as exc:
            raise forms.ValidationError(f"{upload.name}: {exc}") from None
        return CheckedUpload(data, image)

    def save(self, commit: bool = True) -> ScenarioTurnImage:
        checked = self.cleaned_data.get("upload")
        if checked is not None:
            # Written before the row commits; a file whose row never commits is an orphan
            # that prune_turn_images removes (content-addressed: never someone else's file).
            ImageStore().put(checked.data, checked.image)
            instance = self.instance
            instance.file = checked.image.name
            instance.sha256 = checked.image.sha256
            instance.media_type = checked.image.media_type
            instance.width = checked.image.width
            instance.height = checked.image.height
            instance.byte_size = checked.image.byte_size
        return super().save(commit=commit)


class ScenarioTurnImageFormSet(forms.BaseInlineFormSet):
    """A scenario's images together: no turn carries more than PROACTBENCH_IMAGE_MAX_PER_TURN
    (the cap a curated dialogue's turn is checked against when it is saved)."""

    def clean(self) -> None:
        super().clean()
        per_turn: dict[int, int] = {}
        for form in self.forms:
            data = getattr(form, "cleaned_data", None)
            if not data or data.get("DELETE") or data.get("turn") is None:
                continue
            per_turn[data["turn"]] = per_turn.get(data["turn"], 0) + 1
        over = {turn: count for turn, count in sorted(per_turn.items()) if count > max_per_turn()}
        if over:
            raise forms.ValidationError(
                "; ".join(
                    f"turn {turn} has {count} images, more than {max_per_turn()} "
                    "(PROACTBENCH_IMAGE_MAX_PER_TURN)"
                    for turn, count in over.items()
                )
            )
