"""The admin of problems, hardware, submissions, evaluations and model names, with the platform's
actions: re-evaluate on a chosen hardware, reject with a reason, queue each problem's leaders on
new hardware. Those actions need the ranking and the submission services, hence its place here."""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.db.models import Exists, OuterRef
from django.shortcuts import render

from catalog.models import Hardware, Problem
from evaluator.roofline import profiles
from leaderboards.ranking import eligible, leading_submission_ids
from submissions.models import Evaluation, ModelName, Submission
from submissions.services import queue_evaluations, reject


class ReevaluateForm(forms.Form):
    hardware = forms.ModelChoiceField(Hardware.objects.filter(active=True))
    every_correct = forms.BooleanField(
        required=False,
        label="every correct submission instead of the selection",
        help_text="every submission with a correct current result on any hardware",
    )


class RejectForm(forms.Form):
    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), help_text="shown on the submission page")


def _intermediate(modeladmin, request, queryset, form, title: str, action: str):
    context = {
        **modeladmin.admin_site.each_context(request),
        "title": title,
        "form": form,
        "queryset": queryset,
        "action": action,
        "opts": modeladmin.model._meta,
        "selected": request.POST.getlist(admin.helpers.ACTION_CHECKBOX_NAME),
    }
    return render(request, "admin/submissions/action_form.html", context)


def _not_again(requested: int, created: list) -> str:
    skipped = requested - len(created)
    if not skipped:
        return ""
    were = "was" if skipped == 1 else "were"
    return f" {skipped} {were} already queued or running there and not queued again."


@admin.register(Problem)
class ProblemAdmin(admin.ModelAdmin):
    list_display = ("slug", "pkb_id", "title", "level", "parallelism", "bitwise", "active")
    list_filter = ("level", "parallelism", "active", "bitwise")
    search_fields = ("slug", "title", "description")


@admin.register(Hardware)
class HardwareAdmin(admin.ModelAdmin):
    list_display = ("slug", "name", "profile", "gpu_count", "mode", "nvls", "active", "queue")
    list_filter = ("mode", "active")
    fieldsets = (
        (None, {"fields": ("slug", "name", "profile", "gpu_count", "mode", "active", "created_at")}),
        (
            "GPU numbers",
            {
                "fields": ("gpu_numbers",),
                "description": "The profile's, from evaluator/hardware.toml: the evaluator's rooflines read "
                "that file too, so the numbers are changed there, not here.",
            },
        ),
    )
    readonly_fields = ("gpu_numbers",)
    actions = ["queue_leaders"]

    @admin.display(boolean=True, description="NVLS")
    def nvls(self, hardware: Hardware) -> bool:
        return hardware.roofline_profile().nvls

    @admin.display(description="numbers")
    def gpu_numbers(self, hardware: Hardware) -> str:
        if hardware.profile not in profiles():  # a hardware being added
            return "those of the profile chosen above"
        gpu = hardware.roofline_profile()
        return (
            f"{gpu.name}: tensor cores bf16 {gpu.bf16_tc:g}, fp16 {gpu.fp16_tc:g}, fp8 {gpu.fp8_tc:g}, "
            f"tf32 {gpu.tf32_tc:g} TFLOP/s; fp32 {gpu.fp32:g} TFLOP/s; HBM {gpu.hbm_tbps:g} TB/s; "
            f"NVLink {gpu.nvlink_gbps:g} GB/s per GPU one direction; L2 {gpu.l2_mb:g} MB; "
            f"NVLink multicast (NVLS) {'available' if gpu.nvls else 'not available'}"
        )

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        if not change and obj.active:
            self._queue_leaders(request, obj)

    def _queue_leaders(self, request, hardware: Hardware) -> None:
        ids = leading_submission_ids(settings.PKB_LEADERS_PER_PROBLEM, exclude_hardware=hardware)
        submissions = list(Submission.objects.filter(pk__in=ids).select_related("problem"))
        created = queue_evaluations(submissions, hardware, requested_by=request.user)
        self.message_user(
            request,
            f"Queued {len(created)} leading submissions on {hardware.slug}.{_not_again(len(submissions), created)}",
            messages.SUCCESS,
        )

    @admin.action(description="Queue each problem's leading submissions on the selected hardware")
    def queue_leaders(self, request, queryset):
        for hardware in queryset:
            self._queue_leaders(request, hardware)


class EvaluationInline(admin.TabularInline):
    model = Evaluation
    extra = 0
    fields = ("hardware", "state", "stage", "status", "speedup", "hidden", "queued_at", "finished_at")
    readonly_fields = fields
    show_change_link = True
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Submission)
class SubmissionAdmin(admin.ModelAdmin):
    list_display = ("id", "problem", "owner", "model_tag", "backend", "sample_index", "run_label", "created_at")
    list_filter = ("backend", "problem__level", "model_tag")
    search_fields = ("id", "problem__slug", "owner__username", "model_tag", "run_label", "sha256")
    list_select_related = ("problem", "owner")
    raw_id_fields = ("owner",)
    # What was judged stays as it was judged; the model tag may be corrected (its evaluations
    # follow by trigger, submissions migration 0009).
    readonly_fields = ("problem", "code", "sha256", "created_at")
    inlines = [EvaluationInline]
    actions = ["reevaluate", "mark_rejected"]

    @admin.action(description="Re-evaluate on a chosen hardware…")
    def reevaluate(self, request, queryset):
        form = ReevaluateForm(request.POST if "apply" in request.POST else None)
        if not form.is_valid():
            return _intermediate(self, request, queryset, form, "Re-evaluate submissions", "reevaluate")
        hardware = form.cleaned_data["hardware"]
        if form.cleaned_data["every_correct"]:
            correct = eligible().filter(submission=OuterRef("pk"))
            queryset = Submission.objects.filter(Exists(correct))
        submissions = list(queryset.select_related("problem"))
        created = queue_evaluations(submissions, hardware, requested_by=request.user)
        self.message_user(
            request,
            f"Queued {len(created)} evaluations on {hardware.slug}.{_not_again(len(submissions), created)}",
            messages.SUCCESS,
        )
        return None

    @admin.action(description="Mark rejected (hidden from rankings)…")
    def mark_rejected(self, request, queryset):
        form = RejectForm(request.POST if "apply" in request.POST else None)
        if not form.is_valid():
            return _intermediate(self, request, queryset, form, "Reject submissions", "mark_rejected")
        hidden = reject(queryset.values_list("pk", flat=True), form.cleaned_data["reason"])
        self.message_user(
            request, f"Rejected {queryset.count()} submissions ({hidden} evaluations hidden).", messages.SUCCESS
        )
        return None


@admin.register(Evaluation)
class EvaluationAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "submission",
        "hardware",
        "state",
        "stage",
        "status",
        "speedup",
        "hidden",
        "attempts",
        "worker",
        "queued_at",
        "finished_at",
    )
    list_filter = ("state", "status", "hidden", "hardware", "mode")
    search_fields = ("id", "submission__id", "submission__problem__slug", "submission__model_tag", "worker")
    list_select_related = ("submission__problem", "hardware")
    raw_id_fields = ("submission", "requested_by")
    readonly_fields = ("result", "dispatch_token", "attempts", "worker", "heartbeat_at")
    actions = ["unhide"]

    @admin.action(description="Restore to rankings (undo a rejection)")
    def unhide(self, request, queryset):
        count = queryset.update(hidden=False, rejected_reason="")
        self.message_user(request, f"Restored {count} evaluations.", messages.SUCCESS)


@admin.register(ModelName)
class ModelNameAdmin(admin.ModelAdmin):
    """Who owns a model name; an admin may register one to any account or hand it over."""

    list_display = ("name", "owner", "registered_at")
    search_fields = ("name", "owner__username")
    list_select_related = ("owner",)
    autocomplete_fields = ("owner",)
    filter_horizontal = ("vouched_accounts",)
