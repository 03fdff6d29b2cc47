"""The phase-aware roofline, checked against the paper's worked example."""

import pytest

from evaluator.roofline import profile, profiles, roofline
from tasks.spec import Phase


def hyena_boundary_exchange_phases(B=1, H=1024, K=7, S=1024, elem=2):
    return [
        Phase("halo exchange", comm_bytes=2 * B * H * (K - 1) * elem, unit="fp32"),
        Phase("depthwise conv", flops=4 * B * H * S * K, hbm_bytes=(4 * B * H * S + H * K) * elem, unit="fp32"),
    ]


def test_hyena_worked_example_matches_the_paper():
    r = roofline(hyena_boundary_exchange_phases(), profile("h100"))
    halo, conv = r.phases
    assert halo.nvlink_s * 1e9 == pytest.approx(55, rel=0.01)
    assert conv.compute_s * 1e9 == pytest.approx(438, rel=0.01)
    assert conv.hbm_s * 1e9 == pytest.approx(2508, rel=0.01)
    assert (halo.bound, conv.bound, r.bound) == ("nvlink", "hbm", "hbm")
    assert r.t_roof_s * 1e9 == pytest.approx(55 + 2508, rel=0.01)


def test_utilization_is_roof_over_measured():
    r = roofline(hyena_boundary_exchange_phases(), profile("h100"))
    assert r.utilization(2 * r.t_roof_s) == pytest.approx(0.5)
    assert r.utilization(0) is None


def test_profiles_are_data():
    assert {"h100", "h200", "b200"} <= set(profiles())
    h200 = profile("h200")
    assert h200.hbm_tbps == 4.8 and h200.nvlink_gbps == 450 and h200.nvls is False
    assert profile("h100").peak_flops("bf16_tc") == 989e12
    with pytest.raises(KeyError):
        profile("tpu")


def test_phase_rejects_bad_numbers():
    with pytest.raises(ValueError):
        Phase("x", flops=-1)
    with pytest.raises(ValueError):
        Phase("x", unit="int4")
