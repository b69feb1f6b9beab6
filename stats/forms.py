from django import forms
from django.conf import settings

from annotation.models import Study
from benchmark.models import Condition, EvaluationRun
from stats import selectors


class StudyChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, obj: Study) -> str:
        return f"{obj.pk} · {obj.name} ({obj.get_kind_display().lower()})"


class DashboardFilterForm(forms.Form):
    """The dashboard's filters. Unbound or invalid values fall back to the defaults: the pinned
    run, else the newest finished run (``selectors.default_run``), its primary judge, vanilla
    replies, no study (a study adds the panels of the tables that read its kind). A run with
    LLM pairwise judges offers one of them, whose consistent verdicts the run's own ranking
    panels rank (default: the run's primary judge when it judged pairs, else the first by
    name)."""

    run = forms.ModelChoiceField(
        # With its primary judge: the default pairwise judge, when it judged pairs.
        queryset=EvaluationRun.objects.select_related("primary_judge").order_by(
            "-created_at", "-pk"
        ),
        required=False,
        empty_label=None,
    )
    verdicts = forms.ChoiceField(required=False, label="Verdicts")
    condition = forms.ChoiceField(choices=Condition.choices, required=False)
    study = StudyChoiceField(
        queryset=Study.objects.order_by("-created_at", "-pk"),
        required=False,
        empty_label="No study",
    )
    include_excluded = forms.BooleanField(required=False, label="Count excluded raters")
    majority = forms.ChoiceField(
        choices=[("drop", "Ties dropped"), ("release", "Ties: Partial > Pass > Fail (release)")],
        required=False,
        label="Majority label",
    )

    ties = forms.ChoiceField(
        choices=[("half", "Ties: half a win each"), ("exclude", "Ties left out")],
        required=False,
        label="Arena ties",
    )
    pairwise_judge = forms.ChoiceField(required=False, label="Pairwise judge")

    def __init__(self, data=None, **kwargs):
        super().__init__(data, **kwargs)
        self.selected_run = self._selected_run(data)
        self.selected_study = self._selected_study(data)
        judges = selectors.run_judge_names(self.selected_run) if self.selected_run else []
        verdicts = self.fields["verdicts"]  # this form's own copy, safe to change
        assert isinstance(verdicts, forms.ChoiceField)
        verdicts.choices = [
            ("primary", "Primary judge"),
            ("adjudicated", "Adjudicated (else primary)"),
            *((name, f"Judge: {name}") for name in judges),
        ]
        pairwise = self.fields["pairwise_judge"]
        assert isinstance(pairwise, forms.ChoiceField)
        names = selectors.run_pairwise_judge_names(self.selected_run) if self.selected_run else []
        pairwise.choices = [(name, name) for name in names]
        primary = self.selected_run.primary_judge if self.selected_run else None
        self.default_pairwise_judge = (
            primary.name if primary is not None and primary.name in names else next(iter(names), "")
        )
        self.initial.setdefault("pairwise_judge", self.default_pairwise_judge)
        if self.selected_run is not None:
            self.initial.setdefault("run", self.selected_run.pk)

    def _selected_run(self, data) -> EvaluationRun | None:
        return self._chosen("run", data) or selectors.default_run()

    def _selected_study(self, data) -> Study | None:
        return self._chosen("study", data)

    def _chosen(self, name: str, data):
        """The row the field names, read by the field itself before the form is validated (the
        verdict choices depend on the run), or None for anything it refuses: not a number
        (``str.isdigit`` passes "²", which ``int`` refuses), no such row."""
        try:
            return self.fields[name].clean(
                self.fields[name].widget.value_from_datadict(data or {}, {}, name)
            )
        except forms.ValidationError:
            return None

    @property
    def chosen_pairwise_judge(self) -> str:
        """The pairwise judge whose battles the run's ranking panels rank ("" when the run has
        none)."""
        cleaned = self.cleaned_data if self.is_bound and self.is_valid() else {}
        return cleaned.get("pairwise_judge") or self.default_pairwise_judge

    def to_request(self) -> selectors.TableRequest:
        cleaned = self.cleaned_data if self.is_bound and self.is_valid() else {}
        return selectors.TableRequest(
            run=self.selected_run,
            verdicts=selectors.VerdictSource.parse(cleaned.get("verdicts") or "primary"),
            condition=cleaned.get("condition") or Condition.VANILLA,
            study=self.selected_study.pk if self.selected_study else None,
            include_excluded=bool(cleaned.get("include_excluded")),
            majority=cleaned.get("majority") or "drop",
            ties=cleaned.get("ties") or "half",
        )


class BenchmarkScoresUploadForm(forms.Form):
    file = forms.FileField(
        help_text="CSV, UTF-8: model,benchmark,score — or model,<benchmark>,<benchmark>,…"
    )

    def clean_file(self):
        upload = self.cleaned_data["file"]
        cap = settings.PROACTBENCH_MAX_SCORES_FILE_BYTES  # a few lines per model: read whole
        if upload.size > cap:
            raise forms.ValidationError(
                f"The file is {upload.size / 1_048_576:.1f} MB; a scores file is at most "
                f"{cap / 1_048_576:g} MB (PROACTBENCH_MAX_SCORES_FILE_BYTES)."
            )
        return upload
