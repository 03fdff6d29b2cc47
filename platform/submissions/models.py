"""The platform's data: problems (synced from `tasks/`), hardware, submissions, their evaluations
(one per hardware and run, holding the evaluator's result document verbatim) and case studies."""

from __future__ import annotations

import hashlib

from django.conf import settings
from django.db import models
from django.db.models.functions import Lower
from django.urls import reverse
from django.utils import timezone

from evaluator.results import Mode, Stage, Status
from evaluator.roofline import HardwareProfile

BACKENDS = ("cuda", "triton", "pytorch")
STATES = ("queued", "running", "done", "failed")
FINISHED_STATES = ("done", "failed")


def choices(values) -> list[tuple[str, str]]:
    return [(str(v), str(v)) for v in values]


class Problem(models.Model):
    slug = models.SlugField(max_length=100, unique=True, help_text="the tasks/ folder name")
    pkb_id = models.PositiveIntegerField(null=True, blank=True, unique=True, help_text="ParallelKernelBench number")
    title = models.CharField(max_length=200)
    level = models.PositiveSmallIntegerField(db_index=True)
    parallelism = models.CharField(max_length=20, db_index=True)
    origin = models.CharField(max_length=200, blank=True)
    description = models.TextField(blank=True)
    dtype = models.CharField(max_length=20, default="bfloat16")
    shapes = models.JSONField(default=list, help_text='[{"name", "dims", "default"}]')
    world_sizes = models.JSONField(default=list)
    tolerance = models.TextField(blank=True)
    bitwise = models.BooleanField(default=False)
    reference_source = models.TextField(blank=True)
    active = models.BooleanField(default=True)
    synced_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ("level", "pkb_id", "slug")

    def __str__(self) -> str:
        return f"{self.pkb_id or '-'} {self.slug}"

    def get_absolute_url(self) -> str:
        return reverse("problem", args=[self.slug])

    @property
    def shape_names(self) -> list[str]:
        return [s["name"] for s in self.shapes]


class Hardware(models.Model):
    slug = models.SlugField(max_length=50, unique=True, help_text='e.g. "h200x4"; the queue is gpu.<slug>')
    name = models.CharField(max_length=200)
    profile = models.CharField(max_length=50, help_text="evaluator/hardware.toml key the numbers came from")
    gpu_count = models.PositiveSmallIntegerField()
    bf16_tc = models.FloatField("bf16 tensor cores, TFLOP/s")
    fp16_tc = models.FloatField("fp16 tensor cores, TFLOP/s")
    fp8_tc = models.FloatField("fp8 tensor cores, TFLOP/s")
    tf32_tc = models.FloatField("tf32 tensor cores, TFLOP/s")
    fp32 = models.FloatField("fp32 CUDA cores, TFLOP/s")
    hbm_tbps = models.FloatField("HBM, TB/s")
    nvlink_gbps = models.FloatField("NVLink per GPU one direction, GB/s")
    l2_mb = models.FloatField("L2, MB")
    nvls = models.BooleanField("NVLink multicast (NVLS) available", default=False)
    mode = models.CharField(max_length=12, choices=choices(Mode), default=Mode.GPU.value)
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now)

    PROFILE_FIELDS = ("bf16_tc", "fp16_tc", "fp8_tc", "tf32_tc", "fp32", "hbm_tbps", "nvlink_gbps", "l2_mb", "nvls")

    class Meta:
        ordering = ("slug",)
        verbose_name_plural = "hardware"

    def __str__(self) -> str:
        return self.slug

    @property
    def queue(self) -> str:
        return f"gpu.{self.slug}"

    @property
    def has_roofline(self) -> bool:
        """Whether the GPU roofline describes this hardware: only where ranks run one per GPU. CPU
        processes (and ranks sharing one GPU) run at speeds the GPU numbers say nothing about."""
        return self.mode == Mode.GPU

    def roofline_profile(self) -> HardwareProfile:
        """The roofline's view of this hardware, with the numbers admins may have edited."""
        return HardwareProfile(key=self.profile, name=self.name, **{f: getattr(self, f) for f in self.PROFILE_FIELDS})

    def topology(self) -> str:
        nvls = "available" if self.nvls else "NOT available (multimem instructions and multicast pointers fail)"
        if self.mode == Mode.CPU:
            return f"{self.gpu_count} CPU processes, gloo process group, no GPU; {self.name} numbers for the roofline."
        return (
            f"{self.gpu_count}x {self.name} in one node, all-to-all NVLink through NVSwitch, "
            f"{self.nvlink_gbps:g} GB/s per GPU per direction; HBM {self.hbm_tbps:g} TB/s and "
            f"{self.l2_mb:g} MB L2 per GPU; bf16 tensor cores {self.bf16_tc:g} TFLOP/s, fp32 {self.fp32:g} TFLOP/s. "
            f"NVLink multicast (NVLS): {nvls}."
        )


class Submission(models.Model):
    problem = models.ForeignKey(Problem, on_delete=models.PROTECT, related_name="submissions")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="submissions")
    model_tag = models.CharField(max_length=100, db_index=True, help_text='who wrote it: "gpt-5.5", "human"')
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
    (which never change) so the leaderboard and comparison queries read one table; `save()` fills them."""

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


class CaseStudy(models.Model):
    title = models.CharField(max_length=200)
    slug = models.SlugField(max_length=200, unique=True)
    body = models.TextField(help_text="Markdown; HTML is sanitized")
    author = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL)
    published = models.BooleanField(default=False)
    evaluations = models.ManyToManyField(Evaluation, blank=True, related_name="case_studies")
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("-created_at",)
        verbose_name_plural = "case studies"

    def __str__(self) -> str:
        return self.title

    def get_absolute_url(self) -> str:
        return reverse("case-study", args=[self.slug])
