from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from ninja import Field, Schema
from pydantic import StringConstraints

from evaluator.results import Mode, Stage, Status
from submissions.models import BACKENDS, MODEL_TAG

SLUG = r"^[-a-zA-Z0-9_]{1,100}$"
BACKEND = f"^({'|'.join(BACKENDS)})$"
LABEL = r"^[^\x00-\x1f\x7f]{0,100}$"
Slug = Annotated[str, StringConstraints(pattern=SLUG)]


class Error(Schema):
    detail: str


class ShapeOut(Schema):
    name: str
    dims: dict[str, int]
    default: bool = False


class ProblemOut(Schema):
    slug: str
    pkb_id: int | None
    title: str
    level: int
    parallelism: str
    dtype: str
    shapes: list[ShapeOut]
    world_sizes: list[int]
    tolerance: str
    bitwise: bool


class ProblemDetail(ProblemOut):
    origin: str
    description: str
    reference_source: str


class HardwareOut(Schema):
    """The GPU's numbers (nvls to nvlink_gbps) are its profile's in evaluator/hardware.toml."""

    slug: str
    name: str
    profile: str
    gpu_count: int
    mode: Mode
    nvls: bool
    bf16_tc: float
    fp32: float
    hbm_tbps: float
    nvlink_gbps: float
    queued: int | None = Field(None, description="evaluations waiting in this hardware's queue")
    workers: list[str] = Field([], description="the workers serving this hardware's queue now (empty: none is)")


class SubmissionIn(Schema):
    problem: str = Field(..., pattern=SLUG, description="problem slug, e.g. allreduce")
    model_tag: str = Field("human", pattern=MODEL_TAG)
    backend: str = Field("cuda", pattern=BACKEND)
    code: str = Field(..., description="the Python file; must define a top-level `solution`")
    hardware: list[Slug] | None = Field(
        None, min_length=1, max_length=16, description="default: the site's default hardware"
    )
    sample_index: int = Field(0, ge=0, le=1_000_000)
    run_label: str = Field("", pattern=LABEL)


class EvaluationSummary(Schema):
    id: int
    hardware: str
    world_size: int
    mode: Mode
    state: str
    stage: Stage
    status: Status | None
    queue_position: int | None
    workers: list[str] | None = Field(
        None, description="while queued: the workers serving its hardware now (empty: none is, it waits for one)"
    )
    run: int = Field(1, description="1: the submission's first evaluation on this hardware; 2 and up: reruns")
    correct: bool | None
    speedup: float | None
    utilization: float | None
    solution_us: float | None
    reference_us: float | None
    output_digest: str | None
    reason: str = Field(..., description="why it failed: only for the code's owner and admins (else empty)")
    hidden: bool
    queued_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


class EvaluationOut(EvaluationSummary):
    submission_id: int
    problem: str
    model_tag: str
    result: dict[str, Any] | None


class OutputAgreementOut(Schema):
    hardware: int = Field(..., description="hardware whose current result has an output digest")
    identical: bool | None = Field(..., description="the same bits on every one of them; null below two")
    groups: list[list[str]] = Field(..., description="hardware slugs grouped by digest, the largest group first")


class SubmissionOut(Schema):
    id: int
    problem: str
    owner: str
    model_tag: str
    sample_index: int
    run_label: str
    backend: str
    sha256: str | None = Field(None, description="SHA-256 of the code: only for its owner and admins")
    created_at: datetime
    code: str | None = Field(None, description="only for its owner and admins")
    finished: bool
    evaluations: list[EvaluationSummary]
    outputs: OutputAgreementOut | None = Field(
        None, description="public-trial outputs across every hardware it ran on (null before any digest)"
    )
    url: str


class LeaderboardEntryOut(Schema):
    rank: int = Field(..., description="entries whose speedup intervals overlap share a rank (1, 1, 3)")
    tied: bool = Field(..., description="shares its rank with another entry")
    evaluation_id: int
    submission_id: int
    owner: str
    model_tag: str
    vouched: bool = Field(..., description="the model name's owner vouches for this run")
    backend: str
    speedup: float
    speedup_interval: list[float] | None = Field(
        ..., description="95% interval [low, high] of the speedup; null for results from before intervals"
    )
    utilization: float | None
    solution_us: float | None
    reference_us: float | None
    submitted_at: datetime


class ModelNameIn(Schema):
    name: str = Field(..., pattern=MODEL_TAG, description="the model tag, e.g. gpt-5.5")


class ModelNameOut(Schema):
    name: str
    owner: str = Field(..., description="the account that registered it")
    vouched_accounts: list[str] = Field(..., description="other accounts whose runs under it count")
    registered_at: datetime


class ModelScoresOut(Schema):
    model: str
    owner: str | None = Field(None, description="who registered the name; null: unverified")
    attempted: int
    n_problems: int
    samples: int
    fast_p: list[float | None]
    roof_u: list[float | None]
    pass_at_k: dict[int, float | None]
    fast_1_at_k: dict[int, float | None]
    fast_0_interval: list[float] | None = Field(None, description="95% bootstrap interval over problems")
    fast_1_interval: list[float] | None = Field(None, description="95% bootstrap interval over problems")
    failures: dict[str, int]


class ModelComparisonOut(Schema):
    hardware: str
    level: int | None
    include_unverified: bool
    n_problems: int
    p_grid: list[float]
    u_grid: list[float]
    models: list[ModelScoresOut]


class PairOut(Schema):
    submission_id: int
    problem: str
    model_tag: str
    status_a: Status | None
    status_b: Status | None
    speedup_a: float | None
    speedup_b: float | None
    bitwise_identical: bool | None
    identical_on_every_hardware: bool | None = Field(
        None, description="outputs identical on every hardware the submission ran on, not only a and b"
    )
    hardware_with_digests: int = 0


class HardwareComparisonOut(Schema):
    a: str
    b: str
    total: int
    shown: int
    both_correct: int
    bitwise_identical: int
    digests_compared: int
    geomean_ratio_b_over_a: float | None
    geomean_ratio_interval: list[float] | None = Field(None, description="95% interval over the submissions compared")
    pairs: list[PairOut]
