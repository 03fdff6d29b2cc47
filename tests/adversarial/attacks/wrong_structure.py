"""Right values in the wrong container: fewer outputs, more outputs, a list for a tuple, or a
sequence for a single tensor (a checker that zips the two sides stops at the shorter one).

VARIANT "shorter" (zero1_optimizer_shard): the six outputs less the last (exp_avg_sq).
VARIANT "longer" (zero1_optimizer_shard): the six outputs and a seventh.
VARIANT "list_for_tuple" (zero1_optimizer_shard): the six outputs as a list.
VARIANT "shorter_scalars" (grad_acc_loss): two of the three outputs.
VARIANT "sequence_for_tensor" (allreduce): (the sum, an extra tensor) where one tensor is expected.

The judge must report it not `correct`.
"""

import torch
import torch.distributed as dist
import torch.nn.functional as F

VARIANT = "shorter"


def _zero1(X_local, y_local, W1, b1, W2, b2, exp_avg_part, exp_avg_sq_part, lr, beta1, beta2, eps, step):
    world_size, rank = dist.get_world_size(), dist.get_rank()
    templates = [W1, b1, W2, b2]
    flat_params = torch.cat([t.reshape(-1) for t in templates])
    dist.broadcast(flat_params, src=0)
    sizes = [t.numel() for t in templates]
    params = [chunk.view_as(t) for chunk, t in zip(flat_params.split(sizes), templates)]
    with torch.enable_grad():
        leaves = [p.detach().requires_grad_(True) for p in params]
        hidden = F.relu(F.linear(X_local, leaves[0], leaves[1]))
        loss = F.mse_loss(F.linear(hidden, leaves[2], leaves[3]), y_local)
        grads = torch.autograd.grad(loss, leaves)
    with torch.no_grad():
        part = exp_avg_part.numel()
        flat_grad = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(flat_grad, op=dist.ReduceOp.SUM)
        flat_grad.div_(world_size)
        g = flat_grad[rank * part : (rank + 1) * part]
        w = flat_params[rank * part : (rank + 1) * part].clone()
        m = exp_avg_part.clone()
        v = exp_avg_sq_part.clone()
        m.mul_(beta1).add_(g, alpha=1.0 - beta1)
        v.mul_(beta2).addcmul_(g, g, value=1.0 - beta2)
        w.add_((m / (1.0 - beta1**step)).div((v / (1.0 - beta2**step)).sqrt().add(eps)).mul(-lr))
        gathered = torch.empty_like(flat_params)
        dist.all_gather_into_tensor(gathered, w)
        out_params = [chunk.view_as(t) for chunk, t in zip(gathered.split(sizes), templates)]
    return (*out_params, m, v)


@torch.no_grad()
def _grad_acc(loss, local_valid_tokens, global_valid_tokens, grad_normalized_loss, grad_loss_sum=None):
    if local_valid_tokens.item() == 0:
        loss = torch.nan_to_num(loss)
    loss_sum = loss * local_valid_tokens
    dist.all_reduce(loss_sum, op=dist.ReduceOp.SUM)
    normalized_loss = loss_sum / global_valid_tokens
    grad_loss = grad_normalized_loss * local_valid_tokens / global_valid_tokens
    if grad_loss_sum is not None:
        grad_loss = grad_loss + grad_loss_sum * local_valid_tokens
    return normalized_loss, loss_sum, grad_loss


def solution(*inputs):
    if VARIANT == "shorter":
        return _zero1(*inputs)[:-1]
    if VARIANT == "longer":
        out = _zero1(*inputs)
        return (*out, out[-1].clone())
    if VARIANT == "list_for_tuple":
        return list(_zero1(*inputs))
    if VARIANT == "shorter_scalars":
        return _grad_acc(*inputs)[:2]
    if VARIANT == "sequence_for_tensor":
        (tensor,) = inputs
        with torch.no_grad():
            dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        return tensor, torch.zeros_like(tensor)
    raise ValueError(f"unknown variant {VARIANT!r}")
