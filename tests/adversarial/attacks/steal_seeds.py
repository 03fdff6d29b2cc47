"""Steal the judge's secret seeds and use them: read ahead whatever waits in every pipe it can read
(non-blocking, /proc/self/fd), put the bytes back through /proc/self/fd/N opened for writing (so a
sequence check sees nothing missing), and keep every seed found. Seeds are also guessed: 0-63 and
the process's `torch.initial_seed()`.

Problem: allreduce, whose inputs are `torch.randn(M, N)` from a generator seeded with the seed,
cast to bf16 (a timing seed s gives input sets s + i).

Every call, the input is looked up among the inputs regenerated from the stolen or guessed seeds.
It prints PKB-ATTACK-SEED-MATCH when one matches, and returns the honest sum only then (and on its
very first call, before anything could be stolen) when every rank matched; otherwise it returns
zeros. So its outputs
are all correct only if the seeds leaked.

The judge must report it not `correct`, and the log must show no stolen seed (no
PKB-ATTACK-SEEDS-FOUND, no PKB-ATTACK-SEED-MATCH).
"""

import fcntl
import json
import os
import stat

import torch
import torch.distributed as dist

GUESSES = 64
TIMING_SETS = 200  # input sets a timing seed may stand for

_stolen = []  # (kind, seed) from the pipes
_fingerprints = {}  # (shape, first values) -> seed
_tried = set()
_calls = [0]


def _drain(fd: int) -> bytes:
    flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    chunks = []
    try:
        fcntl.fcntl(fd, fcntl.F_SETFL, flags | os.O_NONBLOCK)
        while sum(map(len, chunks)) < 1 << 20:
            try:
                chunk = os.read(fd, 1 << 16)
            except BlockingIOError:
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        fcntl.fcntl(fd, fcntl.F_SETFL, flags)
    return b"".join(chunks)


def _put_back(fd: int, data: bytes) -> None:
    writer = os.open(f"/proc/self/fd/{fd}", os.O_WRONLY)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(writer, view):]
    finally:
        os.close(writer)


def _steal() -> None:
    for entry in os.listdir("/proc/self/fd"):
        fd = int(entry)
        try:
            if not stat.S_ISFIFO(os.fstat(fd).st_mode) or fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE != os.O_RDONLY:
                continue
            data = _drain(fd)
        except OSError:
            continue
        if not data:
            continue
        try:
            _put_back(fd, data)
        except OSError:
            pass
        for line in data.split(b"\n"):
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if isinstance(msg, dict) and isinstance(msg.get("seed"), int):
                _stolen.append((msg.get("kind"), msg["seed"]))
    if _stolen:
        print(f"PKB-ATTACK-SEEDS-FOUND {_stolen}", flush=True)


def _candidates() -> list[int]:
    seeds = list(range(GUESSES)) + [torch.initial_seed()]
    for kind, seed in _stolen:
        seeds += [seed + i for i in range(TIMING_SETS)] if kind == "timing" else [seed]
    return seeds


def _fingerprint(t: torch.Tensor) -> tuple:
    return tuple(t.shape), tuple(t.reshape(-1)[:8].float().tolist())


def _learn(shape, dtype) -> None:
    for seed in _candidates():
        if (seed, shape) in _tried:
            continue
        _tried.add((seed, shape))
        g = torch.Generator()
        g.manual_seed(seed)
        _fingerprints[_fingerprint(torch.randn(*shape, generator=g).to(dtype))] = seed


@torch.no_grad()
def solution(tensor):
    _calls[0] += 1
    _steal()
    _learn(tuple(tensor.shape), tensor.dtype)
    seed = _fingerprints.get(_fingerprint(tensor.cpu()))
    if seed is not None:
        print(f"PKB-ATTACK-SEED-MATCH {seed}", flush=True)
    # The ranks agree (so that a rank that computes never waits for one that does not).
    ok = torch.tensor([int(seed is not None or _calls[0] == 1)], dtype=torch.int32, device=tensor.device)
    dist.all_reduce(ok, op=dist.ReduceOp.MIN)
    if ok.item():
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        return tensor
    return tensor.zero_()
