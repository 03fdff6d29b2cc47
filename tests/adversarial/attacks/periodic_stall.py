"""An honest solution that stalls on purpose: it sleeps STALL_S on every EVERY-th call, hoping that a
judge which measures again after stalls keeps a lucky attempt without them.

Problem: grad_acc_loss (a scalar all-reduce: the stall is many times a call's honest time).

The judge must keep the stalls in the solution's time where every timed batch holds them (batches
of 7 consecutive calls hold one each, STALL_S / 7 per call); the speedup must not come out higher
than the honest one.
"""

import time

import torch
import torch.distributed as dist

STALL_S = 0.005
EVERY = 7

_calls = [0]


@torch.no_grad()
def solution(loss, local_valid_tokens, global_valid_tokens, grad_normalized_loss, grad_loss_sum=None):
    _calls[0] += 1
    if _calls[0] % EVERY == 0:
        time.sleep(STALL_S)
    if local_valid_tokens.item() == 0:
        loss = torch.nan_to_num(loss)
    loss_sum = loss * local_valid_tokens
    dist.all_reduce(loss_sum, op=dist.ReduceOp.SUM)
    normalized_loss = loss_sum / global_valid_tokens
    grad_loss = grad_normalized_loss * local_valid_tokens / global_valid_tokens
    if grad_loss_sum is not None:
        grad_loss = grad_loss + grad_loss_sum * local_valid_tokens
    return normalized_loss, loss_sum, grad_loss
