"""Put what it likes into the result document through the judge's diagnostic of the players'
allocators. On a GPU the judge asks each player for its CUDA caching allocator's counters before
and after a shape's timed pairs (`timing_run.allocator`); a solution owns its player's process and
can answer anything. This one replaces its player's answer with a negative count, a string and a
number no JSON reader keeps exactly, and checks that the replacement is in place.

Appended to the reference's source by the test, so the outputs are honest. The judge passes when
the evaluation is `correct`, its document valid, and it holds no allocator record for the
solution's side (on the CPU the judge asks neither side).
"""

import gc


def _claim(self, msg, fds):
    return {"allocator": {"device_allocs": -1, "device_frees": "many", "retries": 10**30}}


_players = [o for o in gc.get_objects() if type(o).__name__ == "Player" and hasattr(o, "op_allocator")]
if not _players:
    raise RuntimeError("found no player to answer for")
for _player in _players:
    type(_player).op_allocator = _claim
if _players[0].op_allocator(None, []) != _claim(None, None, []):
    raise RuntimeError("the player's answer was not replaced")
