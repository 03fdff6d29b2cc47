"""The task prompt for one problem on one hardware: what a model (or a person) gets to write a
solution from: the reference, the topology, the rules and a small worked example."""

from __future__ import annotations

from pathlib import Path

from catalog.models import Hardware, Problem, world_size_for

# The worked example lives in the repository's examples (it imports torch; the web side only reads it).
EXAMPLE = (Path(__file__).resolve().parents[2] / "examples" / "prompt_vector_add.py").read_text().split('"""', 2)[2].strip()


def rules(problem: Problem, hardware: Hardware) -> list[str]:
    items = [
        "Rewrite `solution()` in ONE self-contained Python file. Keep its signature; return the same outputs "
        "(shapes, dtypes, devices, order) on every rank.",
        "Write the kernels as CUDA C++ built with `torch.utils.cpp_extension.load_inline` that read and write "
        "peer GPUs through PyTorch symmetric memory (`torch.distributed._symmetric_memory`: `empty`, "
        "`rendezvous`, `buffer_ptrs`, `barrier`), or as Triton kernels, or in plain PyTorch.",
        "Outputs must match the reference on every rank and every shape within: "
        f"{problem.tolerance or 'the default tolerance'}. "
        "Inputs are random, drawn from a secret seed, and fresh for every trial and every timed iteration.",
        "Every call must do the whole computation: no caching of inputs, outputs or anything derived from them "
        "across calls (keeping compiled extensions and scratch buffers is fine).",
        "Inputs may be modified in place only where the reference does so.",
        "Do not fall back to the reference, lower the precision, special-case the listed shapes, start threads "
        "or processes, run work on streams the caller does not wait for, touch files, the network or the timer.",
        f"Your solution is timed on {world_size_for(problem, hardware)} ranks against the reference in the same "
        "run: speedup = reference time / your time, each the slowest rank's mean; the headline figure is the "
        "geometric mean over the shapes.",
    ]
    if not hardware.roofline_profile().nvls:
        items.append(
            "NVLink multicast (NVLS) is not available: do not use `multimem` instructions, "
            "`multicast_ptr` or symmetric-memory operations that need multicast."
        )
    return items


def build_prompt(problem: Problem, hardware: Hardware) -> str:
    shapes = "\n".join(
        f"- {s['name']}: "
        + ", ".join(f"{k}={v}" for k, v in s["dims"].items())
        + (" (default)" if s.get("default") else "")
        for s in problem.shapes
    )
    numbered_rules = "\n".join(f"{i}. {rule}" for i, rule in enumerate(rules(problem, hardware), start=1))
    number = f"problem {problem.pkb_id}" if problem.pkb_id else "problem"
    return f"""# ParallelKernelBench {number}: {problem.title} ({problem.slug})

Level {problem.level}, {problem.parallelism} parallelism, from {problem.origin or "the suite"}.

## Task

{problem.description}

Write a faster multi-GPU implementation of the reference `solution()` below.

## System topology

{hardware.topology()}
World size: {world_size_for(problem, hardware)} ranks, one process per GPU; the process group is already
initialized when `solution()` is called, and each rank's inputs are on its own GPU. Data type: {problem.dtype}.

## Shapes

{shapes}

## Reference implementation

```python
{problem.reference_source.rstrip()}
```

## Rules

{numbered_rules}

## Example: adding a peer GPU's vector through symmetric memory (two ranks)

```python
{EXAMPLE}
```

Answer with the complete Python file that defines `solution()`.
"""
