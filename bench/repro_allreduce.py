"""The deterministic all-reduce (tasks/reproducible/allreduce.py) next to the process group's own
all-reduce: time per call, and whether each gives the rank-order sum bit for bit.

    python bench/repro_allreduce.py [--world-size W] [--shared-gpu] [--json PATH]

W processes, one per GPU with NCCL (or, with --shared-gpu, all on GPU 0 with gloo, whose
all-reduce then stands in for NCCL's). Every rank's partial is random fp32; the expected result is
((p_0 + p_1) + p_2) + ... added on the CPU. Sizes: a decode step's hidden state at batch 1 and 16
(4096 and 65,536 values), a prefill chunk of 512 tokens (2 Mi) and of 4096 tokens (16 Mi).
Times are per call on rank 0: a loop of eager calls between CUDA events, after a warm-up, and (one
GPU per rank) the device time of calls replayed from a CUDA graph.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SIZES = (4096, 16 * 4096, 512 * 4096, 4096 * 4096)


def _loop_us(fn, iters: int) -> float:
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    dist.barrier()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3 / iters


def _graph_us(fn, iters: int) -> float:
    """Per-call device time of `iters` calls captured in one CUDA graph (no host in the way),
    median of 5 replays."""
    fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(iters):
            fn()
    times = []
    for _ in range(5):
        dist.barrier()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / iters)
    return sorted(times)[2]


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.detach().cpu().contiguous().view(torch.int32)


def _worker(rank: int, world: int, port: int, shared: bool, iters: int, out_path: str) -> None:
    for var in ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS"):
        os.environ[var] = "1" if var != "NCCL_NVLS_ENABLE" else "0"
    if shared:
        os.environ["TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES"] = "1"
    from tasks.reproducible.allreduce import deterministic_all_reduce

    dev = torch.device("cuda", 0 if shared else rank)
    torch.cuda.set_device(dev)
    backend = "gloo" if shared else "nccl"
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    rows = []
    for n in SIZES:
        parts = [torch.randn(n, generator=torch.Generator().manual_seed(7919 * r + n)) * 8 for r in range(world)]
        want = parts[0].clone()
        for p in parts[1:]:
            want.add_(p)
        mine = parts[rank].to(dev)
        det = deterministic_all_reduce(mine, method="symm")
        theirs = mine.clone()
        dist.all_reduce(theirs)
        det_same = torch.equal(_bits(det), _bits(want))
        theirs_differ = (_bits(theirs) != _bits(want)).float().mean().item()
        scratch = mine.clone()  # the baseline reduces in place; its values only grow, which costs nothing
        det_us = _loop_us(lambda t=mine: deterministic_all_reduce(t, method="symm"), iters)
        base_us = _loop_us(lambda t=scratch: dist.all_reduce(t), iters)
        row = {"numel": n, "deterministic_us": det_us, "baseline_us": base_us, "deterministic_bitwise": det_same,
               "baseline_elements_differing": theirs_differ}  # fmt: skip
        if not shared:  # gloo calls cannot be captured
            row["deterministic_graph_us"] = _graph_us(lambda t=mine: deterministic_all_reduce(t, method="symm"), 20)
            row["baseline_graph_us"] = _graph_us(lambda t=scratch: dist.all_reduce(t), 20)
        rows.append(row)
    gathered = [None] * world if rank == 0 else None
    dist.gather_object(rows, gathered, dst=0)
    if rank == 0:
        result = {"device": torch.cuda.get_device_name(dev), "world": world, "shared_gpu": shared, "backend": backend,
                  "torch": torch.__version__, "rows": []}  # fmt: skip
        for i, n in enumerate(SIZES):
            per_rank = [g[i] for g in gathered]
            row = dict(per_rank[0])
            row["deterministic_bitwise"] = all(r["deterministic_bitwise"] for r in per_rank)
            row["baseline_elements_differing"] = max(r["baseline_elements_differing"] for r in per_rank)
            result["rows"].append(row)
            print(f"{n:9d} fp32: deterministic {row['deterministic_us']:8.1f} us, {backend} {row['baseline_us']:8.1f} us "
                  f"({row['deterministic_us'] / row['baseline_us']:.2f}x); rank-order sum bit for bit: deterministic "
                  f"{'yes' if row['deterministic_bitwise'] else 'NO'} on every rank, {backend} differs in "
                  f"{100 * row['baseline_elements_differing']:.1f}% of elements", flush=True)  # fmt: skip
            if "deterministic_graph_us" in row:
                print(f"{'':9s} in a CUDA graph: deterministic {row['deterministic_graph_us']:8.1f} us, {backend} "
                      f"{row['baseline_graph_us']:8.1f} us", flush=True)  # fmt: skip
        if out_path:
            with open(out_path, "w") as f:
                json.dump(result, f, indent=1)
    dist.barrier()
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--world-size", type=int, default=torch.cuda.device_count())
    parser.add_argument("--shared-gpu", action="store_true", help="every rank on GPU 0 (gloo process group)")
    parser.add_argument("--iters", type=int, default=50)
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    if not args.shared_gpu and args.world_size > torch.cuda.device_count():
        parser.error(f"{args.world_size} ranks need as many GPUs (or --shared-gpu); {torch.cuda.device_count()} here")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    print(f"{args.world_size} ranks, {'one GPU shared' if args.shared_gpu else 'one GPU each'}", flush=True)
    mp.start_processes(_worker, args=(args.world_size, port, args.shared_gpu, args.iters, args.json),
                       nprocs=args.world_size, start_method="spawn")  # fmt: skip


if __name__ == "__main__":
    main()
