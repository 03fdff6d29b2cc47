import torch
import torch.distributed as dist

from tasks.torchrec_kjt_all2all.problem import key_splits as owned_features

ID_RANGE = 1_000_000


def make_inputs(ctx):
    b, length = ctx.dims["B"], ctx.dims["L"]
    splits = owned_features(ctx.world_size)
    lengths = ctx.randint(length // 4, length + 1, sum(splits) * b)
    values = ctx.randint(0, ID_RANGE, int(lengths.sum().item()))
    return (lengths, values, splits, b, None)


@torch.no_grad()
def solution(lengths, values, key_splits, batch_size, pg=None):
    pg = pg or dist.group.WORLD
    world = dist.get_world_size(pg)
    rank = dist.get_rank(pg)
    features = sum(key_splits)
    per_feature = lengths.view(features, batch_size).sum(dim=1)

    # Splits per destination: lengths, values, and this rank's batch size.
    bounds = [0]
    for k in key_splits:
        bounds.append(bounds[-1] + k)
    length_splits = [k * batch_size for k in key_splits]
    value_splits = [int(per_feature[bounds[d]:bounds[d + 1]].sum().item()) for d in range(world)]
    meta = torch.tensor([length_splits, value_splits, [batch_size] * world], dtype=torch.long,
                        device=lengths.device).T.contiguous()
    meta_in = torch.empty_like(meta)
    dist.all_to_all_single(meta_in, meta, group=pg)
    recv_length_splits, recv_value_splits, strides = (meta_in[:, i].tolist() for i in range(3))

    recv_lengths = lengths.new_empty(sum(recv_length_splits))
    dist.all_to_all_single(recv_lengths, lengths, recv_length_splits, length_splits, group=pg)
    recv_values = values.new_empty(sum(recv_value_splits))
    dist.all_to_all_single(recv_values, values, recv_value_splits, value_splits, group=pg)

    # Received: per source s, its k features x its batch. Recat: feature, then source, then sample.
    k = key_splits[rank]
    length_chunks = list(recv_lengths.split(recv_length_splits))
    value_chunks = list(recv_values.split(recv_value_splits))
    out_lengths, out_values = [], []
    for f in range(k):
        for s in range(world):
            rows = length_chunks[s].view(k, strides[s])
            sizes = rows.sum(dim=1).tolist()
            start = sum(sizes[:f])
            out_lengths.append(rows[f])
            out_values.append(value_chunks[s][start:start + sizes[f]])
    return {
        "lengths": torch.cat(out_lengths),
        "values": torch.cat(out_values),
        "stride": torch.tensor(sum(strides), device=lengths.device),
        "stride_per_rank": torch.tensor(strides, device=lengths.device),
    }
