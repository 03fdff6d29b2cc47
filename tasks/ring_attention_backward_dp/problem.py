"""Ring attention backward under data parallelism: the gradients of attention with respect to q, k
and v, context-parallel over a ring inside each data-parallel replica, averaged over replicas.

W ranks form DP = min(2, W) replicas of CP = W/DP ranks (replica p is ranks [p*CP, (p+1)*CP), its
CP group; DP groups take the same CP position in every replica). Each replica has its own sequence
of T tokens, split into CP contiguous chunks of S = T/CP; rank (p, c) holds chunk c's dout, q, k,
v and the forward output out, each (B, S, NH, D) in bf16, and softmax_lse (B, NH, S) in fp32, the
log-sum-exp of its queries' scores over the replica's whole sequence (non-causal). It returns
(dq, dk, dv), each (B, S, NH, D) bf16: the gradients of softmax(q k^T * D^-0.5) v for its chunk,
dq through every key of the replica and dk, dv from every query of the replica, averaged over the
DP replicas (the same on the ranks of a DP group). The reference passes each key/value block around
the CP ring together with the fp32 gradients of its keys and values accumulated so far, one more hop
bringing them home, then all-reduces the three gradients over DP.

Roofline per GPU, X = B*S*NH*D elements, e bytes per element. Two phases (the average needs the
ring's result):
1. Ring backward over CP: per block, five S x S x D products per head (recomputed scores, dP =
   dout v^T, dq, dk, dv): 10*B*NH*S^2*D FLOPs, CP blocks, on bf16 tensor cores. HBM: read q, dout,
   out and the lse, write dq, once: 4*X*e + 4*B*NH*S; per block read k and v (2*X*e) and read and
   write the fp32 dk, dv accumulators (16*X). NVLink: CP-1 key/value blocks forwarded (2*X*e each)
   and the fp32 accumulators of CP-1 blocks (8*X each; a block's first contribution can be its
   owner's, so CP-1 hops suffice).
2. DP all-reduce of dq, dk, dv in bf16: NVLink 2*(DP-1)/DP*3*X*e; HBM reads and writes them, 6*X*e.
At the default shape (T=8192, NH=8, D=64) on an H100: compute-bound (W=4: 174 us of tensor-core
time; the ring's 25 MB of NVLink take 56 us, the all-reduce 28 us).
"""

from tasks.spec import Phase, Problem, Shape, Tolerance, dtype_bytes


def roofline(dims, world_size, dtype):
    b, t, nh, d = dims["B"], dims["T"], dims["NH"], dims["D"]
    e = dtype_bytes(dtype)
    dp = min(2, world_size)
    cp = world_size // dp
    s = t // cp
    x = b * s * nh * d
    return [
        Phase("ring backward over CP", flops=10 * b * nh * s * s * d * cp,
              hbm_bytes=4 * x * e + 4 * b * nh * s + cp * (2 * x * e + 16 * x),
              comm_bytes=(cp - 1) * (2 * x * e + 8 * x), unit="bf16_tc"),
        Phase("DP all-reduce of dq, dk, dv", hbm_bytes=6 * x * e, comm_bytes=2 * (dp - 1) / dp * 3 * x * e,
              unit="bf16_tc"),
    ]


PROBLEM = Problem(
    id="ring_attention_backward_dp",
    pkb_id=57,
    title="Ring attention backward with data parallelism (DP x CP)",
    level=5,
    parallelism="CP",
    origin="ring-flash-attention backward / Megatron context parallelism",
    description=(
        "DP = min(2, W) data-parallel replicas of CP = W/DP ranks; replica p is ranks [p*CP, (p+1)*CP) (its "
        "CP group), DP groups are the ranks at the same CP position. The call is solution(dout, q, k, v, out, "
        "softmax_lse, None, False, cp_group, dp_group): rank (p, c) holds CP chunk c (contiguous chunks) of "
        "replica p's sequence: dout, q, k, v and the forward output out, each (B, T/CP, NH, D) bf16, and "
        "softmax_lse (B, NH, T/CP) fp32, its queries' log-sum-exp over the replica's whole sequence. Return "
        "the tuple (dq, dk, dv), each (B, T/CP, NH, D) bf16: the gradients of non-causal softmax attention "
        "(scale D^-0.5) for this chunk, through every key and from every query of the replica (P = "
        "exp(scores - lse), dS = P * (dout v^T - rowsum(dout * out))), averaged over the DP replicas. The "
        "reference passes key/value blocks around the CP ring with their fp32 dk, dv accumulators "
        "(point-to-point), then all-reduces over DP. Compute-bound at the default shape."
    ),
    shapes=(
        Shape("small", {"B": 1, "T": 32, "NH": 2, "D": 16}),
        Shape("pkb", {"B": 16, "T": 16, "NH": 8, "D": 64}),
        Shape("default", {"B": 1, "T": 8192, "NH": 8, "D": 64}, default=True),
        Shape("large", {"B": 1, "T": 32768, "NH": 8, "D": 64}),
    ),
    roofline=roofline,
    world_sizes=(1, 2, 4, 8),
    tolerance=Tolerance(
        atol=0.05,
        rtol=2.0**-6,
        atol_unit="rms",
        reason=(
            "measured on gloo at W=2 and 4 (small shape and T=512, NH=4, D=64), each of dq, dk, dv: the reference "
            "(fp32 recomputation and accumulators) is one bf16 rounding from the same maths in float64 (under "
            "1e-6 rms at rtol 2^-7); flash-attention backward order (P and dS rounded to bf16 before their "
            "products) needs at most 0.016 rms at rtol 2^-6: 0.05 rms is a 3.1x margin. fp8 P and dS need "
            "0.15 to 0.52 rms and fail"
        ),
    ),
)
