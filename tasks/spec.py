"""The problem interface shared by the suite, the evaluator and the platform.

Pure Python: importing this module (and any problem's `problem.py`) never imports torch, so the
web side can read metadata and rooflines. Torch is imported lazily by the input helpers, which
only run inside evaluator rank processes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import torch

LEVELS = (1, 2, 3, 4, 5, 6)
PARALLELISM = ("collective", "TP", "SP", "EP", "DP", "CP", "PP", "non-LLM")
# Which compute peak of a hardware profile bounds a phase's FLOPs.
UNITS = ("bf16_tc", "fp16_tc", "fp8_tc", "tf32_tc", "fp32")
DTYPES = ("bfloat16", "float16", "float32", "float64")


ATOL_UNITS = ("absolute", "rms")
# The largest rtol a tolerance may have without declaring a relaxation: four rounding steps of
# the dtype at the bottom of a binade (bf16 keeps 8 significant bits: one step is 2^-7 relative).
RTOL_LIMIT = {"bfloat16": 2.0**-5, "float16": 2.0**-8, "float32": 2.0**-21, "float64": 2.0**-50}


@dataclass(frozen=True)
class Tolerance:
    """How one output is compared with the reference's: |got - expected| <= atol + rtol * |expected|
    element by element, or equal bits.

    atol_unit "rms": atol is a fraction of the reference output's root mean square (per tensor,
    over its finite elements), for outputs whose honest error follows their overall magnitude
    (sums whose cancellation leaves single elements near zero) rather than each element's.
    atol_by_world_size: where honest error grows with the number of ranks whose values are summed,
    ((W_1, atol_1), (W_2, atol_2), ...) with increasing W_i: at world size W, the atol of the
    smallest W_i >= W (`at` resolves it; the problem's world sizes must not exceed the last W_i).
    relaxation: why the tolerance admits more than a few rounding steps of the problem's dtype
    (rtol above RTOL_LIMIT): the problem's own contract computes in a lower precision (fp8 codes)
    or amplifies its rounding. A problem that needs none leaves it empty, and then lower-precision
    communication or arithmetic than its dtype fails."""

    atol: float = 1e-2
    rtol: float = 1e-2
    bitwise: bool = False
    reason: str = ""
    atol_unit: str = "absolute"
    atol_by_world_size: tuple[tuple[int, float], ...] = ()
    relaxation: str = ""

    def __post_init__(self) -> None:
        if self.atol_unit not in ATOL_UNITS:
            raise ValueError(f"atol_unit must be one of {ATOL_UNITS}, got {self.atol_unit!r}")
        values = [("atol", self.atol), ("rtol", self.rtol)] + [(f"atol at W={w}", a) for w, a in self.atol_by_world_size]
        for name, value in values:
            if value < 0 or not math.isfinite(value):
                raise ValueError(f"{name} must be finite and >= 0, got {value}")
        sizes = [w for w, _ in self.atol_by_world_size]
        if sizes != sorted(set(sizes)) or (sizes and sizes[0] < 1):
            raise ValueError(f"atol_by_world_size needs increasing world sizes >= 1, got {sizes}")

    def at(self, world_size: int) -> Tolerance:
        """This tolerance at `world_size` ranks: the per-rank growth folded into atol."""
        if world_size < 1:
            raise ValueError(f"world size must be >= 1, got {world_size}")
        if not self.atol_by_world_size:
            return self
        for w, atol in self.atol_by_world_size:
            if world_size <= w:
                return replace(self, atol=atol, atol_by_world_size=())
        raise ValueError(f"no atol for world size {world_size}: the tolerance lists up to {self.atol_by_world_size[-1][0]}")

    def describe(self) -> str:
        if self.bitwise:
            return "bitwise"
        atol = f"{self.atol:g}"
        if self.atol_by_world_size:
            atol = "(" + ", ".join(f"W<={w}: {a:g}" for w, a in self.atol_by_world_size) + ")"
        if self.atol_unit == "rms":
            atol += " x rms"
        return f"atol={atol}, rtol={self.rtol:g}"


BITWISE = Tolerance(atol=0.0, rtol=0.0, bitwise=True, reason="pure data movement: outputs are exact")


@dataclass(frozen=True)
class Shape:
    """One named problem size. `dims` are the problem's own size parameters (M, N, T, H, ...)."""

    name: str
    dims: Mapping[str, int]
    default: bool = False

    def label(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.dims.items())


@dataclass(frozen=True)
class Phase:
    """One phase of the phase-aware roofline.

    flops: arithmetic work on one GPU; hbm_bytes: bytes across that GPU's L2-HBM boundary;
    comm_bytes: bytes that GPU sends over NVLink (summed over every process-group axis whose
    traffic shares the links); unit: which compute peak applies to the FLOPs.
    """

    name: str
    flops: float = 0.0
    hbm_bytes: float = 0.0
    comm_bytes: float = 0.0
    unit: str = "bf16_tc"

    def __post_init__(self) -> None:
        if self.unit not in UNITS:
            raise ValueError(f"phase {self.name!r}: unknown unit {self.unit!r}, expected one of {UNITS}")
        for name in ("flops", "hbm_bytes", "comm_bytes"):
            value = getattr(self, name)
            if value < 0 or not math.isfinite(value):
                raise ValueError(f"phase {self.name!r}: {name} must be finite and >= 0, got {value}")


RooflineFn = Callable[[Mapping[str, int], int, str], list[Phase]]


@dataclass(frozen=True)
class Problem:
    """Metadata of one problem. Its torch side lives in `reference.py` beside `problem.py`:
    `make_inputs(ctx: InputContext) -> tuple` and `solution(*inputs)`."""

    id: str
    title: str
    level: int
    parallelism: str
    origin: str
    description: str
    shapes: tuple[Shape, ...]
    roofline: RooflineFn
    pkb_id: int | None = None
    world_sizes: tuple[int, ...] = (2, 4, 8)
    dtype: str = "bfloat16"
    # One tolerance for every output, or one per output (in output order).
    tolerance: Tolerance | tuple[Tolerance, ...] = Tolerance()
    # Indices of inputs the solution may modify; all others must be unchanged. "May": an
    # out-of-place solution is as good, since only the outputs (and `inplace_results`) are compared.
    mutates: tuple[int, ...] = ()
    # Of those, the inputs whose state after the call is itself a result (the description says
    # so): compared with the reference's like outputs, with tolerances following the outputs'.
    inplace_results: tuple[int, ...] = ()
    # Why some mode cannot run this problem (e.g. a collective gloo lacks); empty if all can.
    mode_notes: str = ""
    tags: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if self.level not in LEVELS:
            raise ValueError(f"{self.id}: level must be one of {LEVELS}")
        if self.parallelism not in PARALLELISM:
            raise ValueError(f"{self.id}: parallelism must be one of {PARALLELISM}")
        if self.dtype not in DTYPES:
            raise ValueError(f"{self.id}: dtype must be one of {DTYPES}")
        if len(self.shapes) < 3:
            raise ValueError(f"{self.id}: needs at least three shapes")
        if sum(s.default for s in self.shapes) != 1:
            raise ValueError(f"{self.id}: exactly one shape must be the default")
        if len({s.name for s in self.shapes}) != len(self.shapes):
            raise ValueError(f"{self.id}: shape names must be unique")
        if not set(self.inplace_results) <= set(self.mutates):
            raise ValueError(f"{self.id}: inplace_results {self.inplace_results} must be inputs it mutates {self.mutates}")
        tols = (self.tolerance,) if isinstance(self.tolerance, Tolerance) else self.tolerance
        for i, tol in enumerate(tols):
            if tol.atol_by_world_size and max(self.world_sizes) > tol.atol_by_world_size[-1][0]:
                raise ValueError(f"{self.id}: tolerance {i} lists no atol for world size {max(self.world_sizes)}")
            if not tol.bitwise and tol.rtol > RTOL_LIMIT[self.dtype] and not tol.relaxation:
                raise ValueError(f"{self.id}: tolerance {i} (rtol {tol.rtol:g}) is looser than "
                                 f"{RTOL_LIMIT[self.dtype]:g} for {self.dtype} and declares no relaxation")

    @property
    def default_shape(self) -> Shape:
        return next(s for s in self.shapes if s.default)

    def shape(self, name: str) -> Shape:
        for s in self.shapes:
            if s.name == name:
                return s
        raise KeyError(f"{self.id}: no shape {name!r}; known: {[s.name for s in self.shapes]}")

    def tolerance_for(self, output_index: int, world_size: int) -> Tolerance:
        """Output `output_index`'s tolerance at `world_size` ranks (in-place inputs follow the
        outputs: index n_outputs + j for the j-th)."""
        tol = self.tolerance if isinstance(self.tolerance, Tolerance) else self.tolerance[min(output_index, len(self.tolerance) - 1)]
        return tol.at(world_size)

    @property
    def bitwise(self) -> bool:
        tols = (self.tolerance,) if isinstance(self.tolerance, Tolerance) else self.tolerance
        return all(t.bitwise for t in tols)

    def phases(self, dims: Mapping[str, int], world_size: int, dtype: str | None = None) -> list[Phase]:
        return self.roofline(dims, world_size, dtype or self.dtype)


DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4, "float64": 8, "float8_e4m3fn": 1, "int64": 8, "int32": 4}


def dtype_bytes(dtype: str) -> int:
    return DTYPE_BYTES[dtype]


@dataclass
class InputContext:
    """What `make_inputs` gets on each rank. `rng` differs per rank; `shared_rng` is identical on
    every rank (for replicated weights). Both are seeded by the evaluator from a secret.
    `portable`: draws on a CPU generator give the same bits on every CPU (for bitwise problems,
    whose output digests are compared across hardware), at some cost in speed."""

    rank: int
    world_size: int
    dims: Mapping[str, int]
    dtype: "torch.dtype"
    device: "torch.device"
    rng: "torch.Generator"
    shared_rng: "torch.Generator"
    portable: bool = False

    def _gen(self, shared: bool) -> "torch.Generator":
        return self.shared_rng if shared else self.rng

    def randn(self, *size: int, dtype: Any = None, shared: bool = False, scale: float = 1.0) -> "torch.Tensor":
        import torch

        gen = self._gen(shared)
        if self.portable and gen.device.type == "cpu":  # torch.randn's CPU values vary with SIMD
            from tasks import portable_random

            shape = tuple(size[0]) if len(size) == 1 and not isinstance(size[0], int) else size
            out = portable_random.normal(shape, gen).to(self.device)
        else:
            out = torch.randn(*size, generator=gen, device=self.device, dtype=torch.float32)
        if scale != 1.0:
            out.mul_(scale)
        return out.to(dtype or self.dtype)

    def rand(self, *size: int, dtype: Any = None, shared: bool = False, low: float = 0.0, high: float = 1.0) -> "torch.Tensor":
        import torch

        out = torch.rand(*size, generator=self._gen(shared), device=self.device, dtype=torch.float32)
        return (out * (high - low) + low).to(dtype or self.dtype)

    def randint(self, low: int, high: int, *size: int, shared: bool = False, dtype: Any = None) -> "torch.Tensor":
        import torch

        return torch.randint(low, high, size, generator=self._gen(shared), device=self.device, dtype=dtype or torch.int64)

    def randperm(self, n: int, shared: bool = False) -> "torch.Tensor":
        import torch

        return torch.randperm(n, generator=self._gen(shared), device=self.device)
