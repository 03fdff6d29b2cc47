"""Phase-aware roofline: T_roof = sum_k max(W_k / P_peak, Q_mem_k / B_mem, Q_comm_k / B_comm).

Pure Python, shared by the evaluator (utilization of a measured time) and the platform (tables).
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from evaluator import results
from evaluator.results import Resource
from tasks.spec import Phase


@dataclass(frozen=True)
class HardwareProfile:
    key: str
    name: str
    bf16_tc: float  # TFLOP/s
    fp16_tc: float
    fp8_tc: float
    tf32_tc: float
    fp32: float
    hbm_tbps: float  # TB/s
    nvlink_gbps: float  # GB/s, one direction, per GPU
    nvls: bool
    l2_mb: float

    def peak_flops(self, unit: str) -> float:
        return getattr(self, unit) * 1e12

    @property
    def hbm_bytes_per_s(self) -> float:
        return self.hbm_tbps * 1e12

    @property
    def nvlink_bytes_per_s(self) -> float:
        return self.nvlink_gbps * 1e9

    @classmethod
    def from_mapping(cls, key: str, data: Mapping) -> "HardwareProfile":
        fields = cls.__dataclass_fields__
        return cls(key=key, **{k: data[k] for k in fields if k != "key"})


@lru_cache(maxsize=1)
def profiles() -> dict[str, HardwareProfile]:
    data = tomllib.loads((Path(__file__).with_name("hardware.toml")).read_text())
    return {key: HardwareProfile.from_mapping(key, values) for key, values in data.items()}


def profile(key: str) -> HardwareProfile:
    try:
        return profiles()[key]
    except KeyError:
        raise KeyError(f"unknown hardware profile {key!r}; known: {sorted(profiles())}") from None


@dataclass(frozen=True)
class PhaseTime:
    name: str
    compute_s: float
    hbm_s: float
    nvlink_s: float

    @property
    def time_s(self) -> float:
        return max(self.compute_s, self.hbm_s, self.nvlink_s)

    @property
    def bound(self) -> Resource:
        times = {Resource.COMPUTE: self.compute_s, Resource.HBM: self.hbm_s, Resource.NVLINK: self.nvlink_s}
        return max(times, key=times.__getitem__)


@dataclass(frozen=True)
class Roofline:
    phases: tuple[PhaseTime, ...]

    @property
    def t_roof_s(self) -> float:
        return sum(p.time_s for p in self.phases)

    @property
    def bound(self) -> Resource:
        """The resource that contributes most of T_roof."""
        share = dict.fromkeys(Resource, 0.0)
        for p in self.phases:
            share[p.bound] += p.time_s
        return max(share, key=share.__getitem__)

    def utilization(self, measured_s: float) -> float | None:
        if measured_s <= 0:
            return None
        return self.t_roof_s / measured_s

    def result(self, solution_us: float | None) -> results.Roofline:
        """The result document's part; the utilization of `solution_us`, a time that means something."""
        t_roof_us = self.t_roof_s * 1e6
        phases = [
            results.Phase(name=p.name, compute_us=p.compute_s * 1e6, hbm_us=p.hbm_s * 1e6, nvlink_us=p.nvlink_s * 1e6,
                          time_us=p.time_s * 1e6, bound=p.bound)
            for p in self.phases
        ]
        utilization = t_roof_us / solution_us if solution_us else None
        return results.Roofline(t_roof_us=t_roof_us, bound=self.bound, phases=phases, utilization=utilization)


def roofline(phases: Iterable[Phase], hw: HardwareProfile) -> Roofline:
    return Roofline(
        tuple(
            PhaseTime(
                name=ph.name,
                compute_s=ph.flops / hw.peak_flops(ph.unit),
                hbm_s=ph.hbm_bytes / hw.hbm_bytes_per_s,
                nvlink_s=ph.comm_bytes / hw.nvlink_bytes_per_s,
            )
            for ph in phases
        )
    )
