"""Submissions, their evaluations (one per hardware and run, holding the evaluator's result
document verbatim), model names and the results version."""

from __future__ import annotations

import hashlib

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models
from django.db.models.functions import Lower
from django.urls import reverse
from django.utils import timezone

from catalog.models import Hardware, Problem
from common.choices import choices
from evaluator.results import Mode, Stage, Status

BACKENDS = ("cuda", "triton", "pytorch")
# Who wrote a submission: "human", "gpt-5.5"; the form, the API and model-name registration check it.
MODEL_TAG = r"^[A-Za-z0-9][A-Za-z0-9._:/+@-]{0,99}$"
STATES = ("queued", "running", "done", "failed")
FINISHED_STATES = ("done", "failed")


class Submission(models.Model):
    problem = models.ForeignKey(Problem, on_delete=models.PROTECT, related_name="submissions")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="submissions")
    model_tag = models.CharField(max_length=100, db_index=True, help_text='who wrote it: "gpt-5.5", "human"',
                                 validators=[RegexValidator(MODEL_TAG)])
    sample_index = models.PositiveIntegerField(default=0, help_text="which of n samples, for pass@k")
    run_label = models.CharField(max_length=100, blank=True)
    backend = models.CharField(max_length=10, choices=choices(BACKENDS))
    code = models.TextField()
    sha256 = models.CharField(max_length=64, db_index=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ("-created_at",)
        indexes = [
            models.Index(fields=["owner", "created_at"], name="sub_owner_created"),
            models.Index(fields=["problem", "model_tag"], name="sub_problem_model"),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.problem.slug} by {self.model_tag}"

    def save(self, *args, **kwargs):
        self.sha256 = hashlib.sha256(self.code.encode()).hexdigest()
        super().save(*args, **kwargs)

    def get_absolute_url(self) -> str:
        return reverse("submission", args=[self.pk])

    def code_visible_to(self, user) -> bool:
        return user.is_authenticated and (user.pk == self.owner_id or user.is_staff)


class ModelName(models.Model):
    """A model tag with an owner: the account that registered it. Model comparisons count, unless
    asked to include unverified runs, only the runs its owner vouches for: the owner's own and
    those of the accounts it names. A tag nobody registered is unverified, and so are runs under a
    registered name by anyone else: tagging a run "gpt-5.5" moves no one's statistics."""

    name = models.CharField(max_length=100, unique=True, help_text="the model tag, as submissions carry it")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="model_names")
    vouched_accounts = models.ManyToManyField(
        settings.AUTH_USER_MODEL,
        blank=True,
        related_name="vouched_model_names",
        help_text="other accounts whose runs under this name the owner vouches for",
    )
    registered_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ("name",)
        constraints = [models.UniqueConstraint(Lower("name"), name="model_name_unique_case_insensitive")]

    def __str__(self) -> str:
        return f"{self.name} (registered by {self.owner})"


class Evaluation(models.Model):
    """One run of a submission on a hardware. `problem` and `model_tag` repeat the submission's
    so the leaderboard and comparison queries read one table; `save()` fills them. A submission's
    problem never changes; a corrected model tag reaches its evaluations by trigger (migration 0009)."""

    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="evaluations")
    hardware = models.ForeignKey(Hardware, on_delete=models.PROTECT, related_name="evaluations")
    problem = models.ForeignKey(Problem, on_delete=models.PROTECT, related_name="evaluations")
    model_tag = models.CharField(max_length=100)
    world_size = models.PositiveSmallIntegerField()
    mode = models.CharField(max_length=12, choices=choices(Mode))
    state = models.CharField(max_length=8, choices=choices(STATES), default="queued")
    stage = models.CharField(max_length=10, choices=choices(Stage), default=Stage.QUEUED.value)
    status = models.CharField(max_length=16, choices=choices(Status), null=True, blank=True)
    result = models.JSONField(null=True, blank=True)
    correct = models.BooleanField(null=True)
    speedup = models.FloatField(null=True, blank=True, help_text="geometric mean over shapes")
    # The speedup's 95% interval (the result's summary.speedup_interval): entries whose intervals
    # overlap are tied on the leaderboards.
    speedup_low = models.FloatField(null=True, blank=True)
    speedup_high = models.FloatField(null=True, blank=True)
    utilization = models.FloatField(null=True, blank=True)
    solution_us = models.FloatField(null=True, blank=True)
    reference_us = models.FloatField(null=True, blank=True)
    output_digest = models.CharField(max_length=64, null=True, blank=True)
    reason = models.TextField(blank=True)
    attempts = models.PositiveIntegerField(default=0)
    dispatch_token = models.UUIDField(null=True, blank=True)
    worker = models.CharField(max_length=200, blank=True)
    queued_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    hidden = models.BooleanField(default=False, help_text="rejected by an admin: kept, never ranked")
    # Kept by a database trigger (migration 0003), whoever writes the row: True once a newer
    # evaluation of the same submission on the same hardware is done. A rerun replaces the result.
    superseded = models.BooleanField(default=False, editable=False)
    rejected_reason = models.TextField(blank=True)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ("-queued_at",)
        indexes = [
            # leaderboards and the catalog: ranked results of a problem on a hardware
            models.Index(
                fields=["problem", "hardware", "speedup"],
                name="ev_ranked",
                include=["submission"],
                condition=models.Q(state="done", status=Status.CORRECT.value, hidden=False, superseded=False),
            ),
            # model comparisons: every current result of a hardware, by model and problem
            models.Index(
                fields=["hardware", "model_tag", "problem"],
                name="ev_by_model",
                include=["status", "hidden", "speedup", "utilization"],
                condition=models.Q(state="done", superseded=False),
            ),
            # hardware comparisons: a problem's visible current results on a hardware, in the page's order
            models.Index(
                fields=["problem", "hardware", "-speedup", "id"],
                name="ev_visible",
                condition=models.Q(state="done", superseded=False, hidden=False),
            ),
            # the home page's newest results
            models.Index(
                fields=["-finished_at", "-id"],
                name="ev_newest",
                condition=models.Q(state="done", superseded=False, hidden=False),
            ),
            # the trigger's lookup: finished evaluations of a submission on a hardware
            models.Index(fields=["submission", "hardware", "state"], name="ev_pair"),
            # the queue and the reaper
            models.Index(fields=["hardware", "state", "queued_at"], name="ev_queue"),
        ]

    def __str__(self) -> str:
        return f"evaluation #{self.pk} of submission {self.submission_id} on {self.hardware_id}"

    def save(self, *args, **kwargs):
        if self.problem_id is None or not self.model_tag:
            self.problem_id, self.model_tag = self.submission.problem_id, self.submission.model_tag
        super().save(*args, **kwargs)

    def get_absolute_url(self) -> str:
        return reverse("submission", args=[self.submission_id]) + f"#evaluation-{self.pk}"

    @property
    def finished(self) -> bool:
        return self.state in FINISHED_STATES

    @property
    def has_roofline(self) -> bool:
        """The GPU roofline describes an evaluation only where its ranks ran one per GPU: a CPU-mode
        run's document still carries T_roof from the GPU numbers its hardware names, which say
        nothing about it."""
        return self.mode == Mode.GPU

    @property
    def on_cpu(self) -> bool:
        return self.mode == Mode.CPU


class ResultsVersion(models.Model):
    """One row whose number database triggers (migration 0003) raise on every change to what the
    catalog, rankings and comparisons read (finished evaluations, problems, hardware), whoever makes
    it. Cached aggregates and page fragments are keyed by it."""

    version = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"results version {self.version}"


# What model comparisons count, threshold by threshold: leaderboards.metrics.P_GRID and U_GRID (a
# test checks that they agree) and every status but correct (FailureKind's values). ResultCount
# keeps one column per threshold, so changing them needs a migration.
SPEEDUP_THRESHOLDS = tuple(round(0.1 * i, 1) for i in range(31))
UTILIZATION_THRESHOLDS = tuple(round(0.05 * i, 2) for i in range(21))
FAILURE_COLUMNS = ("compile_error", "runtime_error", "incorrect", "timeout", "rejected")
COUNT_COLUMNS = (
    "n",
    "correct_n",
    *(f"fast_{i}" for i in range(len(SPEEDUP_THRESHOLDS))),
    *(f"roof_{i}" for i in range(len(UTILIZATION_THRESHOLDS))),
    *FAILURE_COLUMNS,
)


class ResultCount(models.Model):
    """The model comparisons' counts, kept by database triggers (migration 0007) as results change,
    whoever writes them: for one hardware, problem, model tag and submitting account, how many
    current results there are (n), how many are correct (correct_n), correct and faster than each
    speedup threshold (fast_i: speedup > SPEEDUP_THRESHOLDS[i]), correct and at each share of the
    roofline (roof_i: utilization >= UTILIZATION_THRESHOLDS[i]) and how many failed, by kind (a
    hidden result counts as rejected). A stored result changes a row or two; a comparison sums a
    few rows per model and problem instead of reading every result. Keyed by the submitting
    account because whether a run counts depends on who vouches for it (ModelName)."""

    # No database constraints: the triggers write these ids; deleted rows only leave zero counts.
    hardware = models.ForeignKey(
        Hardware, on_delete=models.DO_NOTHING, db_constraint=False, db_index=False, related_name="+"
    )
    problem = models.ForeignKey(
        Problem, on_delete=models.DO_NOTHING, db_constraint=False, db_index=False, related_name="+"
    )
    model_tag = models.CharField(max_length=100)
    submitter = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.DO_NOTHING, db_constraint=False, db_index=False, related_name="+"
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["hardware", "problem", "model_tag", "submitter"], name="result_count_key")
        ]

    def __str__(self) -> str:
        return f"{self.model_tag} on {self.hardware_id}, problem {self.problem_id}: {self.n} results"


for _column in COUNT_COLUMNS:
    ResultCount.add_to_class(_column, models.IntegerField(default=0))


class ProblemResultsVersion(models.Model):
    """ResultsVersion for one problem on one hardware: raised by database triggers (migration 0007)
    whenever a finished evaluation of that problem on that hardware changes. Aggregates computed
    problem by problem (the hardware comparison's, the catalog's) are cached under it, so a new
    result recomputes its own problem's part only."""

    problem = models.ForeignKey(
        Problem, on_delete=models.DO_NOTHING, db_constraint=False, db_index=False, related_name="+"
    )
    hardware = models.ForeignKey(
        Hardware, on_delete=models.DO_NOTHING, db_constraint=False, db_index=False, related_name="+"
    )
    version = models.BigIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["problem", "hardware"], name="problem_results_version_key")]

    def __str__(self) -> str:
        return f"results version {self.version} of problem {self.problem_id} on {self.hardware_id}"

