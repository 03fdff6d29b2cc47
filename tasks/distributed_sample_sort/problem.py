"""Distributed sample sort: every rank holds an unsorted shard of values (sizes differ, some may be
empty); return the sorted whole, split evenly: rank r holds elements [start_r, stop_r) of the
sorted concatenation of every rank's shard, with n = the total count, start_r = r*(n//W) +
min(r, n%W) and stop_r - start_r = n//W, plus one on the first n%W ranks.

Equal values are the same bits (no -0.0 or NaN in the draws), so the result is unique whatever
the splitters and however ties are broken: it is compared bit for bit.

Roofline per GPU, n = N values of e = 2 bytes (bf16) per rank (the mean shard size), three phases:
1. local sort: an LSD radix sort of 16-bit keys is two 8-bit passes, each reading and writing the
   shard: HBM 4*n*e. Its work is integer bookkeeping, not counted as FLOPs.
2. splitters + bucket all-to-all: W samples per rank are all-gathered ((W-1)*W*e bytes), then
   every value goes to its bucket's rank: with buckets of about n values and ranks' values spread
   over every bucket, (W-1)/W * n*e sent; HBM reads the sorted shard and writes what arrives,
   2*n*e.
3. merge: the W sorted runs that arrive are merged into one, reading and writing n*e each (2*n*e).
   Evening the counts out moves only the buckets' imbalance, none when the splitters are exact.
At the default shape the bucket exchange is NVLink-bound and the two local passes HBM-bound; HBM's
share of the total is the larger.
"""

from tasks.spec import BITWISE, Phase, Problem, Shape, dtype_bytes


def roofline(dims, world_size, dtype):
    n, w, e = dims["N"], world_size, dtype_bytes(dtype)
    return [
        Phase("local radix sort", hbm_bytes=4 * n * e, unit="fp32"),
        Phase("splitters + bucket all_to_all", hbm_bytes=2 * n * e, comm_bytes=(w - 1) * w * e + (w - 1) / w * n * e,
              unit="fp32"),
        Phase("merge sorted runs", hbm_bytes=2 * n * e, unit="fp32"),
    ]


PROBLEM = Problem(
    id="distributed_sample_sort",
    pkb_id=85,
    title="Distributed sample sort",
    level=3,
    parallelism="non-LLM",
    origin="parallel sample sort (PSRS), as in distributed data processing and sorting benchmarks",
    description=(
        "Every rank holds local_shard, a 1-D bf16 tensor of N/2 to 3N/2 values (in one draw of four some "
        "ranks, never all, hold none), and group = None. Return, on rank r, its share of the sorted "
        "concatenation of every rank's values (ascending), split evenly: with n values in all, rank r gets "
        "sorted positions [r*(n//W) + min(r, n%W), ...) of length n//W, one more on the first n%W ranks; "
        "1-D bf16. The draws hold no -0.0 or NaN, so the answer is unique and compared bit for bit. The "
        "reference sorts locally, all-gathers regular samples to choose W-1 splitters, all-to-alls the "
        "buckets (variable sizes), sorts what arrives and evens the counts out with a second all-to-all. "
        "At the default shape the bucket all-to-all is NVLink-bound and the local sort and merge HBM-bound."
    ),
    shapes=(
        # The public suite's size at W = 2 (M = 1024): 512 values per rank.
        Shape("small", {"N": 512}),
        Shape("default", {"N": 1 << 20}, default=True),
        Shape("large", {"N": 1 << 24}),
    ),
    roofline=roofline,
    world_sizes=(1, 2, 4, 8),
    tolerance=BITWISE,
)
