"""Make the result misstate where the players ran. The judge starts both sides' players at fixed
addresses and records so (`environment.player_layout`), as each player read its persona before any
solution code ran. This solution clears the flag from its own persona at import, so that a judge
reading it later would record the sides as "mixed" (or, clearing it first in the reference's
process too, were that reachable, "random"), and it checks that the flag is really gone.

Appended to the reference's source by the test, so the answers are honest. The judge passes when
the evaluation is `correct` and its record of the layout is the one an honest solution's
evaluation gets: the persona a process started with, not one it changed afterwards.
"""

import ctypes

_ADDR_NO_RANDOMIZE = 0x0040000
_libc = ctypes.CDLL(None, use_errno=True)
_persona = _libc.personality(0xFFFFFFFF)
if _persona == -1 or _libc.personality(_persona & ~_ADDR_NO_RANDOMIZE) == -1:
    raise RuntimeError("could not change this process's persona")
with open("/proc/self/personality") as _f:
    if int(_f.read(), 16) & _ADDR_NO_RANDOMIZE:
        raise RuntimeError("the persona still says fixed addresses")
