"""Ulysses variable all-gather, GNN and DINOv2 problems: registration, metadata, and each roofline
against a hand calculation at its default shape and world size 4 (bf16 = 2 bytes, fp32 = 4)."""

from __future__ import annotations

import pytest

import tasks
from tasks.spec import BITWISE, LEVELS, PARALLELISM

PROBLEMS = {
    "ulysses_all_gather_variable_primitive": 35,
    "gnn_feature_exchange_all2all": 65,
    "gnn_feature_exchange_all2all_backward": 66,
    "gnn_sparse_embedding_all2all": 67,
    "gnn_negative_scoring": 69,
    "dinov2_distributed_knn": 79,
    "dinov2_distributed_sinkhorn_knopp": 80,
}
W = 4


def phases(problem_id):
    p = tasks.get(problem_id)
    return [(ph.name, ph.flops, ph.hbm_bytes, ph.comm_bytes) for ph in p.phases(p.default_shape.dims, W)]


@pytest.mark.parametrize("problem_id", sorted(PROBLEMS))
def test_metadata(problem_id):
    p = tasks.get(problem_id)
    assert p.pkb_id == PROBLEMS[problem_id]
    assert p.level in LEVELS and p.parallelism in PARALLELISM and p.origin
    assert {2, 4} <= set(p.world_sizes) and len(p.shapes) >= 3 and len(p.description) > 150
    tols = p.tolerance if isinstance(p.tolerance, tuple) else (p.tolerance,)
    for tol in tols:
        assert tol == BITWISE or "measured" in tol.reason
    # The first shape is the CI shape: the smallest.
    hbm = [sum(ph.hbm_bytes for ph in p.phases(s.dims, W)) for s in p.shapes]
    assert hbm[0] == min(hbm) and hbm[0] < 2e6


def test_roofline_ulysses_all_gather_variable_primitive():
    # M = N = 1024 (mean rows), bf16: 2 MiB per rank.
    b = 1024 * 1024 * 2
    assert phases("ulysses_all_gather_variable_primitive") == [("all_gather", 0, 5 * b, 3 * b)]


def test_roofline_gnn_feature_exchange_all2all():
    # N = 1024 rows served, H = 128, 768 seed rows of which 768 * (1 - (767/768)^1024) = 565.73
    # distinct are read; 3/4 of the N rows go to other ranks.
    [(name, flops, hbm, comm)] = phases("gnn_feature_exchange_all2all")
    assert flops == 0
    assert hbm == pytest.approx(8 * 1024 + 565.7332 * 256 + 1024 * 256)
    assert comm == 0.75 * 1024 * 256 == 196608


def test_roofline_gnn_feature_exchange_all2all_backward():
    # N = 1024 fp32 rows of H = 128 (512 KiB), 512 seed rows written, 8-byte ids.
    assert phases("gnn_feature_exchange_all2all_backward") == [
        ("all_to_all + scatter_add", 131072, 524288 + 8192 + 262144, 393216)
    ]


def test_roofline_gnn_sparse_embedding_all2all():
    # N = 1024 pairs of an 8-byte id and a 256-byte row.
    assert phases("gnn_sparse_embedding_all2all") == [
        ("count + exchange counts", 0, 8192, 24),
        ("partition + all_to_all", 0, 2 * 1024 * 264, 0.75 * 1024 * 264),
    ]


def test_roofline_gnn_negative_scoring():
    # 257 positives on average, K = 1000 negatives, int64 ranks.
    assert phases("gnn_negative_scoring") == [
        ("rank + all_gather ranks", 257000, 257 * 1001 * 2 + 4 * 257 * 8, 3 * 257 * 8)
    ]


def test_roofline_dinov2_distributed_knn():
    # Q = 32 queries per rank (G = 128 in all), T = 8192 train features of D = 384, K = 200
    # candidates of a bf16 similarity and an int64 label (10 bytes).
    gather, merge = phases("dinov2_distributed_knn")
    assert gather[1:] == (
        2 * 128 * 8192 * 384,
        (8192 * 384 + 128 * 384 + 3 * 32 * 384) * 2 + 128 * 200 * 10,
        3 * 32 * 384 * 2,
    ) == (805306368, 6719488, 73728)
    assert merge[1:] == (0, 4 * 32 * 200 * 10 + 32 * 200 * 10, 3 * 32 * 200 * 10) == (0, 320000, 192000)


def test_roofline_dinov2_distributed_sinkhorn_knopp():
    # B = 1024 samples x P = 16384 prototypes, fp32: four passes, three all-reduces of P sums.
    x = 1024 * 16384
    passes = [(4 * x, 4 * x, 0)] * 3
    reduces = [(0, 2 * 4 * 16384, 2 * 3 / 4 * 4 * 16384)] * 3
    got = [ph[1:] for ph in phases("dinov2_distributed_sinkhorn_knopp")]
    assert got[0:6:2] == passes and got[1:6:2] == reduces and reduces[0][2] == 98304
    assert got[6] == (4 * x, 8 * x, 0)
