import math

import torch
import torch.distributed as dist
import torch.nn.functional as F


def make_inputs(ctx):
    d = ctx.dims
    local, dim = d["B"] // ctx.world_size, d["D"]
    image = F.normalize(ctx.randn(local, dim, dtype=torch.float32), dim=-1)
    # A matching caption points near its image (cosine about 0.7); other pairs are nearly orthogonal.
    text = F.normalize(image + ctx.randn(local, dim, dtype=torch.float32) * dim**-0.5, dim=-1)
    # SigLIP's initial temperature (10) and a bias near -log(batch), SigLIP's own choice for its
    # batch: the negatives then add up to O(1) at every batch size. Both vary a little per draw.
    logit_scale = float(ctx.rand(1, dtype=torch.float32, shared=True, low=8.0, high=12.0))
    logit_bias = float(ctx.rand(1, dtype=torch.float32, shared=True, low=-1.0, high=1.0)) - math.log(d["B"])
    return image.to(ctx.dtype), text.to(ctx.dtype), logit_scale, logit_bias, None


def _pair_loss(image, text, logit_scale, logit_bias, matching):
    """Sum of -log sigmoid(label * logit) over the block, divided by the local batch; label +1 on
    the diagonal of a matching block, -1 everywhere else."""
    logits = logit_scale * image @ text.T + logit_bias
    signs = -torch.ones_like(logits)
    if matching:
        signs.fill_diagonal_(1)
    return -F.logsigmoid(signs * logits).sum() / image.shape[0]


def _shift(tensor, to_rank, from_rank, group):
    received = torch.empty_like(tensor)
    ops = [dist.P2POp(dist.isend, tensor, to_rank, group), dist.P2POp(dist.irecv, received, from_rank, group)]
    for request in dist.batch_isend_irecv(ops):
        request.wait()
    return received


@torch.no_grad()
def solution(image_features, text_features, logit_scale: float, logit_bias: float = 0.0, group=None) -> torch.Tensor:
    """SigLIP loss of this rank's images against every rank's texts (open_clip's SigLipLoss with
    neighbour exchange): the local block with its positives, then each other rank's texts, passed
    around the ring one hop per step, as negatives."""
    group = group or dist.group.WORLD
    members = dist.get_process_group_ranks(group)
    rank, world = dist.get_rank(group), len(members)
    right, left = members[(rank + 1) % world], members[(rank - 1) % world]
    loss = _pair_loss(image_features, text_features, logit_scale, logit_bias, matching=True)
    travelling = text_features.contiguous()
    for _ in range(world - 1):
        travelling = _shift(travelling, right, left, group)
        loss = loss + _pair_loss(image_features, travelling, logit_scale, logit_bias, matching=False)
    return loss
