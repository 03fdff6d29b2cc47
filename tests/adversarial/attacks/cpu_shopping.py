"""Leave the CPU the judge placed the player on, for one of the solution's choosing.

On a virtual machine each CPU changes speed for seconds at a time, by up to 1.8x; the judge puts
both sides' players of a rank on one CPU so that a pair's two batches meet the same state. A
solution that widens its CPU affinity (and so may be run on, or move itself to, a CPU in its fast
state) would time against a reference that cannot follow. Appended to the reference's source by
the test, so the answers are honest.

VARIANT "main_thread": the player's main thread widens its own affinity at import.
VARIANT "every_thread": every thread of the process, widened from a thread of its own, at the
first call.
VARIANT "while_calling": widened at the start of every call and narrowed back at its end, so that
between batches, when the judge could look, it is where the judge put it.
VARIANT "relay": players load on more CPUs than they are timed on, and the judge then moves every
thread onto the shared one. A relay of threads started at import, each starting the next and
ending, tries to keep one thread on the CPUs it loaded on through that move.

Each raises once its escape took effect, so the judge passes when the document is not
`correct`-with-a-widened-player: the sandbox makes sched_setaffinity a no-op for placed players,
so the first three must end `correct` (their widening did nothing), and the judge's own checks
(`rejected`, naming the threads) are the fallback where that filter is missing. The relay ends
`correct` when the judge's move caught it, `rejected` when it kept ahead.
"""

import os
import threading

VARIANT = "main_thread"

_every_cpu = set(range(os.cpu_count() or 1))
_placed = os.sched_getaffinity(0)  # where the player loads; read again at the first call, once it is placed


def _left(tid: int = 0) -> bool:
    return os.sched_getaffinity(tid) != _placed


_relay_tid = [0]


def _relay() -> None:
    _relay_tid[0] = threading.get_native_id()
    threading.Thread(target=_relay, daemon=True).start()


def _widen_every_thread(report: list) -> None:
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), _every_cpu)
            report.append(_left(int(tid)))
        except OSError:
            pass


if VARIANT == "main_thread":
    os.sched_setaffinity(0, _every_cpu)
    if _left():
        raise RuntimeError(f"left the placed CPUs {sorted(_placed)}")
if VARIANT == "relay":
    _relay()

_honest_solution = solution  # noqa: F821 - the reference's, defined above when appended
_widened = False


def solution(*inputs):
    global _widened, _placed
    if not _widened:
        _placed = os.sched_getaffinity(0)
    if VARIANT == "relay":
        _widened = True
        try:
            if _left(_relay_tid[0]):
                raise RuntimeError(f"a relay thread stayed off the placed CPUs {sorted(_placed)}")
        except OSError:
            pass  # that thread has just ended; its successor is checked at the next call
    if VARIANT == "every_thread" and not _widened:
        _widened = True
        report: list = []
        worker = threading.Thread(target=_widen_every_thread, args=(report,))
        worker.start()
        worker.join()
        if any(report):
            raise RuntimeError(f"threads left the placed CPUs {sorted(_placed)}")
    if VARIANT != "while_calling":
        return _honest_solution(*inputs)
    os.sched_setaffinity(0, _every_cpu)
    try:
        if _left():
            raise RuntimeError(f"left the placed CPUs {sorted(_placed)} during a call")
        return _honest_solution(*inputs)
    finally:
        os.sched_setaffinity(0, _placed)
