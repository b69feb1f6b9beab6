from django import forms

from benchmark.models import CommunicationStyle, DialogueStatus, Domain, TriggerType
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
