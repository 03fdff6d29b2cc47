"""GPU only: outputs that are written after the call has returned, by work the judge's clock might
not see. The honest work includes a kernel of DELAY_US (`torch.cuda._sleep`, calibrated at import)
before the all-gather's result is copied into the output.

Problem: allgather.

VARIANT "honest": everything on the current stream (the control).
VARIANT "side_stream": everything on a side stream that the current stream never waits for, so
CUDA events recorded on the current stream around the call see nothing.
VARIANT "late_copy": the all-gather on the current stream; the delay and the copy into the output
on a side stream.
VARIANT "sync_noop": like "side_stream", with `torch.cuda.synchronize`, `Stream.synchronize`,
`Event.synchronize` and `Event.wait` made no-ops at import.

The judge must report it not `correct` (outputs read before they are written), or a solution time
of at least the delay per call.
"""

import torch
import torch.distributed as dist

VARIANT = "side_stream"
DELAY_US = 2000

_side = []


def _cycles_per_us() -> float:
    if not torch.cuda.is_available():
        return 1000.0
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(1000)
    start.record()
    torch.cuda._sleep(20_000_000)
    end.record()
    end.synchronize()
    return 20_000_000 / max(1.0, start.elapsed_time(end) * 1e3)


CYCLES = int(DELAY_US * _cycles_per_us())

if VARIANT == "sync_noop":
    torch.cuda.synchronize = lambda *args, **kwargs: None
    torch.cuda.Stream.synchronize = lambda self: None
    torch.cuda.Event.synchronize = lambda self: None
    torch.cuda.Event.wait = lambda self, stream=None: None
elif VARIANT not in ("honest", "side_stream", "late_copy"):
    raise ValueError(f"unknown variant {VARIANT!r}")


def _gather(tensor):
    out = tensor.new_empty((dist.get_world_size(),) + tuple(tensor.shape))
    dist.all_gather_into_tensor(out.view(-1), tensor.contiguous().view(-1))
    return out


@torch.no_grad()
def solution(tensor):
    if VARIANT == "honest":
        torch.cuda._sleep(CYCLES)
        return _gather(tensor)
    if not _side:
        _side.append(torch.cuda.Stream(device=tensor.device))
    side, current = _side[0], torch.cuda.current_stream(tensor.device)
    out = torch.empty((dist.get_world_size(),) + tuple(tensor.shape), dtype=tensor.dtype, device=tensor.device)
    if VARIANT == "late_copy":
        gathered = _gather(tensor)
        side.wait_stream(current)
        with torch.cuda.stream(side):
            torch.cuda._sleep(CYCLES)
            out.copy_(gathered)
        gathered.record_stream(side)
    else:
        side.wait_stream(current)
        with torch.cuda.stream(side):
            torch.cuda._sleep(CYCLES)
            out.copy_(_gather(tensor))
    out.record_stream(side)
    return out
