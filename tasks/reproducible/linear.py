"""A drop-in replacement for `torch.nn.Linear` whose outputs are bitwise reproducible, and a
function that swaps a model's linear layers for it."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from tasks.reproducible.gemm import WEIGHT_DTYPES, reproducible_matmul


class ReproducibleLinear(nn.Module):
    """y = x @ W.T + b with W kept in bf16 or fp16 and upcast in registers, accumulated in fp32
    in a fixed order (config.py). Returns x's dtype by default (fp32 in, fp32 out), or
    `out_dtype` if given; the rounding of the fp32 result to a narrower dtype is itself exact
    and deterministic. The bias is kept in fp32. Inference only: a backward pass through it
    raises (see gemm.py).

    `static_weight` (frozen inference weights): a call whose weight is the very tensor the last
    call read, with the same storage and version counter (so nothing wrote it in place since),
    lets a decode GEMV start reading it before the GPU work queued ahead of it ends (same bits).
    The first call, and the first after any change, reads it in order. Writes the version counter
    does not see (through `.data`, or a raw pointer) need `static_weight` off, as do inference-mode
    weights, which keep no counter (they always read in order)."""

    static_weight: bool = False
    _seen_weight: tuple | None = None  # (weight, its data pointer, its version) at the last call

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
        out_dtype: torch.dtype | None = None,
        static_weight: bool = False,
    ) -> None:
        super().__init__()
        self.static_weight = static_weight
        dtype = dtype or torch.bfloat16
        if dtype not in WEIGHT_DTYPES:
            raise TypeError(f"weight dtype must be bfloat16 or float16, got {dtype}")
        self.in_features = in_features
        self.out_features = out_features
        self.out_dtype = out_dtype
        self.weight = nn.Parameter(torch.empty(out_features, in_features, device=device, dtype=dtype))
        if bias:
            self.bias = nn.Parameter(torch.empty(out_features, device=device, dtype=torch.float32))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        # The same initialisation as nn.Linear, drawn in fp32 then rounded.
        ref = nn.Linear(self.in_features, self.out_features, bias=self.bias is not None, device="cpu")
        with torch.no_grad():
            self.weight.copy_(ref.weight.to(self.weight.dtype))
            if self.bias is not None:
                self.bias.copy_(ref.bias)

    @classmethod
    def from_linear(
        cls,
        linear: nn.Linear,
        dtype: torch.dtype | None = None,
        out_dtype: torch.dtype | None = None,
        static_weight: bool = False,
    ) -> ReproducibleLinear:
        """Copy of an nn.Linear. Weights already in bf16/fp16 keep their dtype; fp32 weights are
        rounded to `dtype` (default bf16)."""
        w = linear.weight
        wdtype = dtype or (w.dtype if w.dtype in WEIGHT_DTYPES else torch.bfloat16)
        new = cls.__new__(cls)
        nn.Module.__init__(new)
        new.in_features, new.out_features, new.out_dtype = linear.in_features, linear.out_features, out_dtype
        new.static_weight = static_weight
        new.weight = nn.Parameter(w.detach().to(wdtype).contiguous(), requires_grad=w.requires_grad)
        if linear.bias is not None:
            new.bias = nn.Parameter(linear.bias.detach().float().contiguous(), requires_grad=linear.bias.requires_grad)
        else:
            new.register_parameter("bias", None)
        return new

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = reproducible_matmul(x, self.weight, self.bias, static_weight=self._weight_at_rest())
        return y.to(self.out_dtype or x.dtype)

    def _weight_at_rest(self) -> bool:
        """With `static_weight`, whether the weight is unchanged since the last call read it. The
        tensor itself is kept (not its id, which a new weight may reuse once the old is freed)."""
        if not self.static_weight:
            return False
        w = self.weight
        if w.is_inference():
            return False
        seen = (w, w.data_ptr(), w._version)
        last, self._seen_weight = self._seen_weight, seen
        return last is not None and last[0] is w and last[1:] == seen[1:]

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}, "
            f"weight_dtype={self.weight.dtype}"
        )


def patch_linear_layers(
    model: nn.Module,
    dtype: torch.dtype | None = None,
    out_dtype: torch.dtype | None = None,
    include: Callable[[str, nn.Linear], bool] | None = None,
    static_weight: bool = False,
) -> int:
    """Replace every `nn.Linear` in `model` (in place) by a ReproducibleLinear with the same
    weights; `include(name, module)` may keep some; `static_weight` as in ReproducibleLinear.
    Returns how many were replaced."""
    replaced = 0
    for parent_name, parent in list(model.named_modules()):
        for child_name, child in list(parent.named_children()):
            if type(child) is not nn.Linear:
                continue
            full = f"{parent_name}.{child_name}" if parent_name else child_name
            if include is not None and not include(full, child):
                continue
            new = ReproducibleLinear.from_linear(child, dtype=dtype, out_dtype=out_dtype, static_weight=static_weight)
            setattr(parent, child_name, new)
            replaced += 1
    return replaced
