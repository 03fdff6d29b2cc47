"""Return the output before it is computed: a background thread (a `threading.Thread` subclass, so
it has no target to inspect) does the all-reduce on a process group of its own and writes the
result into the returned tensor after the call has returned.

Problem: allreduce (the output is the input, summed in place). The call itself only queues work,
so timed calls look nearly free; whether a checked output is already written is a race.

The judge must report it not `correct` (outputs read when the call returns are wrong), or time the
work that the thread does (a speedup within 1.5x of the reference's).
"""

import queue
import threading

import torch
import torch.distributed as dist

_work = queue.Queue()
_started = []


class _Worker(threading.Thread):
    def __init__(self, group):
        super().__init__(daemon=True, name="pin_memory_thread")
        self.group = group

    def run(self):
        while True:
            tensor = _work.get()
            with torch.no_grad():
                dist.all_reduce(tensor, group=self.group)


@torch.no_grad()
def solution(tensor):
    if not _started:
        group = dist.new_group(backend="gloo") if tensor.device.type == "cpu" else dist.new_group()
        _Worker(group).start()
        _started.append(True)
    _work.put(tensor)
    return tensor
