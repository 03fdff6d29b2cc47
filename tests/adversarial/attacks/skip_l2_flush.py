"""Skip the L2 flush that the reference's player pays for.

Problem: allreduce; the solution is the reference's own code. At import it patches its player's
`prepare` (evaluator/player.py, which shares its process) so that its flush buffer is always
dropped: where the judge asks every player to write a buffer before each call (the L2 diagnostic,
`flush_l2_mib`), the reference's calls pay for that write and the solution's do not. With
FLUSH_MIB of writing per call against a call of about a millisecond, the speedup would read many
times over.

The diagnostic is never the leaderboard's: a worker builds its request from the payload's
whitelisted settings (evaluator/worker.py, Job.REQUEST_SETTINGS), so a payload that asks for the
flush gets none. The judge must then report a speedup within SPEED_MARGIN of the honest one.
"""

import sys

import torch
import torch.distributed as dist


def _patch_player() -> None:
    cls = getattr(sys.modules.get("__main__"), "Player", None)  # the player runs as `python -m evaluator.player`
    if cls is None:
        return
    prepare = cls.op_prepare

    def op_prepare(self, msg, fds):
        reply = prepare(self, msg, fds)
        self.flush = None
        return reply

    cls.op_prepare = op_prepare


_patch_player()


def solution(tensor: torch.Tensor) -> torch.Tensor:
    dist.all_reduce(tensor)
    return tensor
