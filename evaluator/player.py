"""A player: the process that runs a submitted solution (or, under the same protocol, the
reference), started as `python -m evaluator.player FD` inside the evaluation's sandbox, or forked
as if so (evaluator/forkserver.py).

Everything here is in reach of the solution, which may patch or replace any of it: nothing a
player says is trusted. The judge decides what is correct from the bytes in its arenas and how
fast from its own clock; this side only runs calls when asked, on inputs the judge wrote, and
copies the outputs where the judge said.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import socket
import sys
import traceback
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from evaluator import isolation_init, transport


class Player:
    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.device = torch.device("cpu")
        self.fn = None
        self.arenas: dict[str, transport.Arena] = {}
        self.groups: dict[tuple, Any] = {}
        self.pending: list[Any] = []
        self.prepared: list[tuple[Any, Any]] = []
        self.null = None  # what a null call returns (op_null)
        self.call_null = False
        self.flush: torch.Tensor | None = None  # written before every call when the judge asks (flush_mib)

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    # -- operations -----------------------------------------------------------------------------
    def op_init(self, msg: dict, fds: list[int]) -> dict:
        if msg["device"] != "cpu":
            self.device = torch.device(msg["device"])
            torch.cuda.set_device(self.device)
        kwargs = {"device_id": self.device} if msg["backend"] == "nccl" else {}
        dist.init_process_group(msg["backend"], init_method=f"file://{msg['store']}", rank=msg["rank"],
                                world_size=msg["world"], timeout=timedelta(seconds=msg["timeout_s"]), **kwargs)
        if msg["backend"] == "gloo":
            from evaluator import gloo_as_nccl

            gloo_as_nccl.install()
        # Before any solution code runs here: the addresses this process started at, for the
        # result's record of how both sides were timed.
        return {"layout": isolation_init.layout()}

    def op_arena(self, msg: dict, fds: list[int]) -> dict:
        self.arenas[msg["id"]] = transport.Arena.attach(msg["desc"], fds, self.device)
        return {}

    def op_load(self, msg: dict, fds: list[int]) -> dict:
        from evaluator.loading import load_target

        self.fn = load_target(msg["target"])
        if msg.get("perturb"):
            self.fn = perturbed(self.fn)
        return {}

    def op_groups(self, msg: dict, fds: list[int]) -> dict:
        """Process groups the problem's inputs use, created in the order the judges created theirs
        (new_group is collective: every rank creates every group)."""
        for ranks in msg["create"]:
            group = dist.new_group(ranks)
            if dist.get_rank() in ranks:
                self.groups[tuple(ranks)] = group
        return {}

    def op_null(self, msg: dict, fds: list[int]) -> dict:
        """Outputs for null calls: calls that return these at once instead of running the function,
        so that the judge measures what the protocol costs around each call."""
        self.null = transport.null_outputs(msg["outputs"], self.device)
        return {}

    def op_allocator(self, msg: dict, fds: list[int]) -> dict:
        """The CUDA caching allocator's counters so far (none on the CPU): the judge takes their
        change over a shape's timed pairs."""
        if self.device.type != "cuda":
            return {"allocator": None}
        try:
            stats = torch.cuda.memory_stats(self.device)
        except Exception:  # noqa: BLE001 - an allocator of the solution's own (CUDAPluggableAllocator) may keep none
            return {"allocator": None}
        return {"allocator": {"device_allocs": int(stats.get("num_device_alloc", 0)),
                              "device_frees": int(stats.get("num_device_free", 0)),
                              "retries": int(stats.get("num_alloc_retries", 0))}}

    def op_prepare(self, msg: dict, fds: list[int]) -> dict:
        """Views of the next batch's inputs, made before the judge starts its clock and writes
        them (the arena still holds older bytes), so that timed calls run back to back."""
        self.call_null = bool(msg.get("null"))
        flush_bytes = int(float(msg.get("flush_mib") or 0) * 2**20)
        if (self.flush.numel() if self.flush is not None else 0) != flush_bytes:
            self.flush = torch.empty(flush_bytes, dtype=torch.uint8, device=self.device) if flush_bytes else None
        arena_in = self.arenas.get("in")
        self.prepared = [(transport.decode_inputs(call["args"], arena_in, self.groups, self.device), call.get("slot"))
                         for call in msg["calls"]]
        return {}

    def op_run(self, msg: dict, fds: list[int]) -> dict:
        """Calls the function once per prepared call; copies each call's outputs into its slot
        right after the call, or keeps them for `deliver` when the call names no slot."""
        prepared, self.prepared = self.prepared, []
        fn = (lambda *args: self.null) if self.call_null else self.fn
        replies = []
        self.pending = []
        for args, slot in prepared:
            if self.flush is not None:
                self.flush.zero_()
            out = fn(*args)
            if slot is None:
                self.pending.append(out)
                replies.append({"needed": transport.output_bytes(out)})
            else:
                replies.append(self._pack(out, slot))
            del out
        prepared = args = None
        self.sync()
        return {"outputs": replies}

    def op_deliver(self, msg: dict, fds: list[int]) -> dict:
        replies = [self._pack(out, slot) for out, slot in zip(self.pending, msg["slots"])]
        self.pending = []
        self.sync()
        return {"outputs": replies}

    def _pack(self, out: Any, slot: list) -> dict:
        offset, capacity = slot
        try:
            return {"tree": transport.pack_outputs(out, self.arenas["out"], offset, capacity)}
        except transport.OutputTooLarge as exc:
            return {"overflow": exc.needed}

    def serve(self) -> None:
        while True:
            try:
                msg, fds = transport.recv(self.sock, with_fds=True)
            except EOFError:
                return
            op = msg.get("op")
            if op == "exit":
                return
            handler = getattr(self, f"op_{op}", None)
            try:
                reply = {"ok": True, **handler(msg, fds)}
            except BaseException as exc:  # noqa: BLE001 - every failure of the code it runs is reported
                from evaluator.loading import failure_kind

                reply = {"ok": False, "kind": failure_kind(exc), "reason": f"{type(exc).__name__}: {exc}",
                         "traceback": traceback.format_exc()[-8000:]}
            transport.send(self.sock, reply)


def perturbed(fn):
    """The function, with the first element of the last non-empty rank's output changed (the
    selfcheck proves with it that the checks can fail). All ranks agree which rank that is: the
    last rank's output may be empty for some draws, and failing there alone would make it skip
    the reference's collectives while its peers wait in them."""
    from evaluator import checks

    def call(*inputs):
        out = fn(*inputs)
        counts: list[Any] = [None] * dist.get_world_size()
        dist.all_gather_object(counts, checks.element_count(out))
        holders = [rank for rank, count in enumerate(counts) if count]
        if not holders:
            raise ValueError("no rank's output has an element to perturb")
        if dist.get_rank() == holders[-1]:
            checks.perturb_(out)
        return out

    return call


def main(argv: list[str]) -> int:
    # On a time-out the evaluator asks for every thread's stack, written into this player's log.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    sock = socket.socket(fileno=int(argv[0]))
    home = os.environ.get("HOME", "/tmp")
    os.makedirs(home, exist_ok=True)
    os.chdir(home)
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    try:
        Player(sock).serve()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    # Skip interpreter teardown: a solution's leftovers must not hang the exit.
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
