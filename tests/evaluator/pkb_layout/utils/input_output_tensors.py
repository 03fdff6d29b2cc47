"""A miniature of the public suite's input module, for tests: same function and arguments."""

import torch


def create_input_tensor(rank, world_size, problem_id, base_shape, dtype, trial=0, device=None):
    torch.manual_seed(7 + problem_id * 1000 + rank + trial * 1_000_003)
    device = device if device is not None else torch.device("cuda", rank)
    if problem_id in (1, 2):
        return (torch.randn(base_shape, dtype=torch.float32).to(device=device, dtype=dtype),)
    if problem_id == 3:
        # Like the public suite's variable-count problems: every rank must see the same trial.
        counts = [1 + (r + trial) % 3 for r in range(world_size)]
        rows = torch.randn((counts[rank], base_shape[1]), dtype=torch.float32).to(device=device, dtype=dtype)
        return (rows, counts)
    raise ValueError(f"no inputs for problem {problem_id}")
