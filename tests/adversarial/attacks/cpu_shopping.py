"""Leave the CPU the judge placed the player on, for one of the solution's choosing.

On a virtual machine each CPU changes speed for seconds at a time, by up to 1.8x; the judge puts
both sides' players of a rank on one CPU so that a pair's two batches meet the same state. A
solution that widens its CPU affinity (and so may be run on, or move itself to, a CPU in its fast
state) would time against a reference that cannot follow. Appended to the reference's source by
the test, so the answers are honest.

VARIANT "main_thread": the player's main thread widens its own affinity at import.
VARIANT "every_thread": every thread of the process, widened from a thread of its own, after the
first call.
VARIANT "while_calling": widened at the start of every call and narrowed back at its end, so that
between batches, when the judge looks, it is where the judge put it.

The judge must refuse to rank it: the document is `rejected`, naming the widened threads. It
catches the first two; the third is a known gap (the test is an expected failure): the judge
checks the affinity only while the solution is stopped.
"""

import os
import threading

VARIANT = "main_thread"

_every_cpu = set(range(os.cpu_count() or 1))


def _widen_every_thread() -> None:
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), _every_cpu)
        except OSError:
            pass


if VARIANT == "main_thread":
    os.sched_setaffinity(0, _every_cpu)

_honest_solution = solution  # noqa: F821 - the reference's, defined above when appended
_widened = False


def solution(*inputs):
    global _widened
    if VARIANT == "every_thread" and not _widened:
        _widened = True
        worker = threading.Thread(target=_widen_every_thread)
        worker.start()
        worker.join()
    if VARIANT != "while_calling":
        return _honest_solution(*inputs)
    placed = os.sched_getaffinity(0)
    os.sched_setaffinity(0, _every_cpu)
    try:
        return _honest_solution(*inputs)
    finally:
        os.sched_setaffinity(0, placed)
