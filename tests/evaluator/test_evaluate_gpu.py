"""The evaluator on a real GPU (skipped without CUDA): symmetric-memory CUDA kernels in
`shared-gpu` mode, and timings in `gpu` mode checked against an independent measurement."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from evaluator.launch import EvaluationRequest, evaluate
from evaluator.sandbox import NO_MULTICAST, REPO_ROOT

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

EXAMPLE = REPO_ROOT / "examples" / "solutions" / "allgather_symm_mem.py"
RIGHT_ORDER = "const long long src_rank = i / n16;"
WRONG_ORDER = "const long long src_rank = (i / n16 + 1) % world;"  # every shard one rank off


def shared_gpu(code: str, world_size: int = 4, **kw) -> dict:
    settings = {"warmup": 5, "iters": 10, "trials": 5, "timeout_s": 420, **kw}
    return evaluate(EvaluationRequest(problem="allgather", solution_code=code, world_size=world_size, mode="shared-gpu",
                                      **settings))


def test_symmetric_memory_allgather_is_correct_in_shared_gpu_mode():
    doc = shared_gpu(EXAMPLE.read_text())
    assert doc["status"] == "correct", doc["reason"] + doc["log_tail"][-3000:]
    assert doc["timings_meaningful"] is False
    assert all(s["correct"] for s in doc["shapes"])


def test_broken_symmetric_memory_allgather_is_incorrect():
    code = EXAMPLE.read_text()
    assert RIGHT_ORDER in code
    doc = shared_gpu(code.replace(RIGHT_ORDER, WRONG_ORDER), shapes=["small"])
    assert doc["status"] == "incorrect", doc["reason"]
    assert "not bitwise equal" in doc["reason"]


# torch's own timer measures what the evaluator does: calls issued back to back with no host
# synchronisation between them, so host overhead counts whenever it exceeds the GPU's work.
# do_bench (which clears the L2 between calls, letting the host run ahead) is printed alongside.
INDEPENDENT_TIMER = textwrap.dedent(
    """
    import json, sys, torch, torch.distributed as dist
    import torch.utils.benchmark as benchmark
    import triton.testing
    import tasks
    dist.init_process_group("nccl", init_method="tcp://127.0.0.1:29533", rank=0, world_size=1)
    torch.cuda.set_device(0)
    ref = tasks.load_reference("allgather")
    dims = dict(tasks.get("allgather").shape("large").dims)
    x = torch.randn(dims["M"], dims["N"], device="cuda", dtype=torch.bfloat16)
    timer = benchmark.Timer(stmt="solution(x)", globals={"solution": ref.solution, "x": x})
    m = timer.blocked_autorange(min_run_time=1.0)
    do_bench = 1e3 * triton.testing.do_bench(lambda: ref.solution(x), return_mode="median")
    print(json.dumps({"timer_mean_us": m.mean * 1e6, "timer_median_us": m.median * 1e6, "do_bench_median_us": do_bench}))
    """
)


def test_gpu_mode_timing_agrees_with_an_independent_measurement():
    doc = evaluate(EvaluationRequest(problem="allgather", solution_code=EXAMPLE.read_text(), world_size=1, mode="gpu",
                                     shapes=["large"], timeout_s=420))
    assert doc["status"] == "correct", doc["reason"]
    shape = doc["shapes"][0]
    ref = shape["reference"]["per_rank"][0]
    assert ref["iterations"] == 100 and ref["std_us"] >= 0 and ref["min_us"] <= ref["median_us"] <= ref["max_us"]
    env = {**os.environ, **NO_MULTICAST, "PYTHONPATH": str(REPO_ROOT)}
    out = subprocess.run([sys.executable, "-c", INDEPENDENT_TIMER], capture_output=True, text=True,
                         env=env, timeout=300, check=True)
    independent = json.loads(out.stdout.strip().splitlines()[-1])
    print("evaluator reference:", ref, "independent:", independent)
    assert ref["mean_us"] == pytest.approx(independent["timer_mean_us"], rel=0.10), (ref, independent)
