"""GPU only: slow the reference down with GPU work that the solution leaves queued when its batch
ends. Stopping the solution's processes (evaluator/freezer.py) stops their CPUs, not the kernels
they have already queued: without a defence those run on while the reference is timed, and the
GPU shares itself between the two processes' contexts.

Appended to a problem's reference source (the test does it), so the solution itself is honest.
The tests use gsplat_3d_gaussian_splatting: identical code there reads within 1% of itself at
world 1 on an H100, where a one-rank all-reduce of a few microseconds moves by several times from
one evaluation to the next, more than this attack gains. At import it patches its player's `run`
operation (evaluator/player.py shares its process): when a batch's calls are done, it queues
SPIN_US of GPU work (`torch.cuda._sleep`, calibrated at import) on a side stream that nothing
waits for: longer than the reference's batch that follows, short enough that the queue drains
before the solution's next batch or soon after.

VARIANT "one_thread": single-thread spin kernels (time-slicing alone slows the other context).
VARIANT "every_sm": the spins spread over one block per streaming multiprocessor as well, through
as many side streams.

The judge must report it not `correct`, or a speedup within SPEED_MARGIN of the honest one.
"""

import sys

import torch

VARIANT = "one_thread"
SPIN_US = 30_000


def _cycles_per_us() -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(1000)
    start.record()
    torch.cuda._sleep(20_000_000)
    end.record()
    end.synchronize()
    return 20_000_000 / max(1.0, start.elapsed_time(end) * 1e3)


_streams: list = []


def _burn() -> None:
    if not _streams:
        count = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
        _streams.extend(torch.cuda.Stream() for _ in range(count if VARIANT == "every_sm" else 1))
    cycles = int(SPIN_US * _CYCLES_PER_US)
    for stream in _streams:
        with torch.cuda.stream(stream):
            torch.cuda._sleep(cycles)


def _patch_player() -> None:
    player = sys.modules.get("__main__")  # the player runs as `python -m evaluator.player`
    cls = getattr(player, "Player", None)
    if cls is None:
        return
    run = cls.op_run

    def op_run(self, msg, fds):
        reply = run(self, msg, fds)
        if self.device.type == "cuda" and not self.call_null:
            with torch.cuda.device(self.device):
                _burn()
        return reply

    cls.op_run = op_run


if VARIANT not in ("one_thread", "every_sm"):
    raise ValueError(f"unknown variant {VARIANT!r}")
_CYCLES_PER_US = _cycles_per_us() if torch.cuda.is_available() else 1000.0
_patch_player()
