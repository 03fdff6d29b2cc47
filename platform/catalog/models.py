"""The catalog: the problems (synced from `tasks/`) and the hardware evaluations run on, whose GPU
numbers come from evaluator/hardware.toml.

Their tables keep the names they had under the submissions app (submissions_problem,
submissions_hardware): the move was a change of Django's state only (migrations catalog 0001 and
submissions 0006)."""

from __future__ import annotations

from django.db import models
from django.urls import reverse
from django.utils import timezone

from common.choices import choices
from evaluator import roofline
from evaluator.results import Mode
from evaluator.roofline import HardwareProfile


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
        db_table = "submissions_problem"
        ordering = ("level", "pkb_id", "slug")

    def __str__(self) -> str:
        return f"{self.pkb_id or '-'} {self.slug}"

    def get_absolute_url(self) -> str:
        return reverse("problem", args=[self.slug])

    @property
    def shape_names(self) -> list[str]:
        return [s["name"] for s in self.shapes]


def profile_choices() -> list[tuple[str, str]]:
    return [(key, f"{key}: {p.name}") for key, p in roofline.profiles().items()]


class Hardware(models.Model):
    """Where evaluations run: a set of GPUs (or CPU processes) and its queue. The GPU's numbers are
    not stored here: `roofline_profile()` reads them from evaluator/hardware.toml."""

    slug = models.SlugField(max_length=50, unique=True, help_text='e.g. "h200x4"; the queue is gpu.<slug>')
    name = models.CharField(max_length=200)
    profile = models.CharField(
        max_length=50,
        choices=profile_choices,
        help_text="its GPU: a profile of evaluator/hardware.toml, which holds the GPU's numbers",
    )
    gpu_count = models.PositiveSmallIntegerField()
    mode = models.CharField(max_length=12, choices=choices(Mode), default=Mode.GPU.value)
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "submissions_hardware"
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

    @property
    def on_cpu(self) -> bool:
        return self.mode == Mode.CPU

    def roofline_profile(self) -> HardwareProfile:
        """Its GPU's numbers (peak TFLOP/s, HBM and NVLink bandwidth, L2, NVLS): its profile in
        evaluator/hardware.toml, the one source the evaluator's rooflines read too."""
        return roofline.profile(self.profile)

    def topology(self) -> str:
        gpu = self.roofline_profile()
        nvls = "available" if gpu.nvls else "NOT available (multimem instructions and multicast pointers fail)"
        if self.on_cpu:
            return f"{self.gpu_count} CPU processes, gloo process group, no GPU; {self.name} numbers for the roofline."
        return (
            f"{self.gpu_count}x {self.name} in one node, all-to-all NVLink through NVSwitch, "
            f"{gpu.nvlink_gbps:g} GB/s per GPU per direction; HBM {gpu.hbm_tbps:g} TB/s and "
            f"{gpu.l2_mb:g} MB L2 per GPU; bf16 tensor cores {gpu.bf16_tc:g} TFLOP/s, fp32 {gpu.fp32:g} TFLOP/s. "
            f"NVLink multicast (NVLS): {nvls}."
        )


def world_size_for(problem: Problem, hardware: Hardware) -> int:
    """All of the hardware's GPUs, unless the problem does not run at that size: then its largest that fits."""
    sizes = sorted(problem.world_sizes or [hardware.gpu_count])
    fitting = [w for w in sizes if w <= hardware.gpu_count]
    if hardware.gpu_count in sizes or not fitting:
        return hardware.gpu_count
    return fitting[-1]
