from __future__ import annotations

from django import forms
from django.conf import settings
from django.core.validators import RegexValidator

from catalog.models import Hardware, Problem
from common.choices import choices
from submissions.models import BACKENDS, MODEL_TAG
from submissions.validation import InvalidCode, validate_code

MODEL_TAG_VALIDATOR = RegexValidator(MODEL_TAG, "letters, digits and . _ : / + @ - only")


class SubmissionForm(forms.Form):
    problem = forms.ModelChoiceField(Problem.objects.filter(active=True), to_field_name="slug")
    model_tag = forms.CharField(
        max_length=100,
        initial="human",
        validators=[MODEL_TAG_VALIDATOR],
        help_text='who wrote the code: "human" or a model name such as "gpt-5.5". Model comparisons count a run '
        "when the name's owner vouches for it (register your names on the account page)",
    )
    backend = forms.ChoiceField(choices=choices(BACKENDS), initial="cuda")
    hardware = forms.ModelMultipleChoiceField(
        Hardware.objects.filter(active=True), to_field_name="slug", widget=forms.CheckboxSelectMultiple
    )
    code = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 18, "spellcheck": "false"}),
        required=False,
        strip=False,
        help_text="paste the file, or upload it below",
    )
    upload = forms.FileField(required=False, label="or upload a .py file")
    sample_index = forms.IntegerField(min_value=0, initial=0, help_text="which sample of several, for pass@k")
    run_label = forms.CharField(max_length=100, required=False)

    def clean(self):
        data = super().clean()
        upload, pasted = data.get("upload"), data.get("code") or ""
        if upload and pasted.strip():
            raise forms.ValidationError("paste the code or upload a file, not both")
        if upload:
            if upload.size > settings.PKB_MAX_CODE_BYTES:
                raise forms.ValidationError(
                    f"the file is {upload.size:,} bytes; the limit is {settings.PKB_MAX_CODE_BYTES:,} bytes"
                )
            raw = upload.read()
        elif pasted.strip():
            raw = pasted.replace("\r\n", "\n")  # browsers send textarea lines with CRLF
        else:
            raise forms.ValidationError("paste the code or upload a .py file")
        try:
            data["source"] = validate_code(raw)
        except InvalidCode as e:
            raise forms.ValidationError(str(e)) from None
        return data
