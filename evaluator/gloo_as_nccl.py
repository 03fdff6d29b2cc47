"""NCCL's behaviour for the collectives where gloo's differs, installed in a player whose process
group is gloo (cpu and shared-gpu modes), so that those modes judge what gpu mode would.

Public-suite references rely on five of them:
- `all_gather_into_tensor` into an output of any shape holding world x input elements (NCCL checks
  the element count; gloo wants the inputs concatenated along dimension 0), e.g. stacked (W, ...);
- `reduce_scatter_tensor` from an input of any such shape, likewise;
- `all_gather` of tensors of different sizes per rank (NCCL broadcasts each; gloo refuses);
- `all_to_all` of tensor lists of different sizes per peer (gloo wants them all alike);
- `reduce` leaving the buffers of ranks other than the destination unchanged (gloo leaves partial
  sums there).

And in shared-gpu mode, point-to-point calls (send, recv, isend, irecv, and so batch_isend_irecv)
and list `all_to_all` on GPU tensors: gloo's transport writes from and reads into host memory only
(a GPU pointer kills the process with "writev: Bad address"), so those go through host copies.

Anything else goes to gloo unchanged, and a call NCCL would refuse is still refused by gloo. The
solution can undo this (it runs in the same process), which only changes how its own calls behave.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed import distributed_c10d as c10d


class _Done:
    """The work handle of a collective that has already completed (async_op=True)."""

    def wait(self, timeout: Any = None) -> bool:
        return True

    def is_completed(self) -> bool:
        return True

    def is_success(self) -> bool:
        return True


class _HostCopied:
    """The work handle of a point-to-point call made on a host copy: keeps the copy alive until the
    call completes, and for a receive copies it into the caller's tensor on `wait`."""

    def __init__(self, work: Any, host: torch.Tensor, into: torch.Tensor | None = None):
        self.work, self.host, self.into = work, host, into

    def wait(self, timeout: Any = None) -> bool:
        done = self.work.wait() if timeout is None else self.work.wait(timeout)
        if self.into is not None:
            self.into.copy_(self.host)
            self.into = None
        return done

    def is_completed(self) -> bool:
        return self.work.is_completed()

    def is_success(self) -> bool:
        return self.work.is_success()


def _on_device(t: torch.Tensor) -> bool:
    """Whether gloo's transport cannot read or write `t` where it is."""
    return t.device.type != "cpu"


def _host_p2p(fn, receives: bool, returns_work: bool):
    """`fn` (send, recv, isend or irecv) through a host copy of a GPU tensor."""
    signature = inspect.signature(fn)

    def call(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        tensor = bound.arguments["tensor"]
        if not _on_device(tensor):
            return fn(*bound.args, **bound.kwargs)
        host = torch.empty(tensor.shape, dtype=tensor.dtype) if receives else tensor.cpu()
        bound.arguments["tensor"] = host
        result = fn(*bound.args, **bound.kwargs)
        if returns_work:
            return _HostCopied(result, host, tensor if receives else None) if result is not None else None
        if receives:
            tensor.copy_(host)
        return result

    call.__name__, call.__doc__, call.__wrapped__ = fn.__name__, fn.__doc__, fn
    return call


def _flat(t: torch.Tensor) -> torch.Tensor | None:
    """A one-dimensional view of `t`'s storage, or None when it has none (not contiguous)."""
    return t.view(-1) if t.is_contiguous() else None


def _regrouped(fn, into: str, source: str, large: str):
    """`fn` (all_gather_into_tensor or reduce_scatter_tensor) taking an `into`/`source` pair whose
    element counts follow NCCL's rule (`large` holds world times the other's), whatever their
    shapes: such a pair goes to gloo flattened."""
    signature = inspect.signature(fn)
    small = source if large == into else into

    def call(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        big, little = bound.arguments[large], bound.arguments[small]
        world = dist.get_world_size(bound.arguments.get("group"))
        native = big.dim() >= 1 and little.dim() >= 1 and big.shape[1:] == little.shape[1:]
        flat_into = _flat(bound.arguments[into])
        if not native and big.numel() == world * little.numel() and flat_into is not None:
            bound.arguments[into], bound.arguments[source] = flat_into, bound.arguments[source].reshape(-1)
        return fn(*bound.args, **bound.kwargs)

    call.__name__, call.__doc__, call.__wrapped__ = fn.__name__, fn.__doc__, fn
    return call


def _uneven_all_gather(fn):
    signature = inspect.signature(fn)

    def all_gather(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        outputs, tensor = bound.arguments["tensor_list"], bound.arguments["tensor"]
        group = bound.arguments.get("group")
        if all(o.shape == tensor.shape for o in outputs):
            return fn(*bound.args, **bound.kwargs)
        me = dist.get_rank(group)
        if len(outputs) != dist.get_world_size(group) or outputs[me].numel() != tensor.numel():
            return fn(*bound.args, **bound.kwargs)  # let gloo refuse what NCCL refuses too
        for i, out in enumerate(outputs):
            buffer = out if out.is_contiguous() else out.contiguous()
            if i == me:
                buffer.copy_(tensor.reshape(buffer.shape))
            dist.broadcast(buffer, src=dist.get_global_rank(group or c10d._get_default_group(), i), group=group)
            if buffer is not out:
                out.copy_(buffer)
        return _Done() if bound.arguments.get("async_op") else None

    all_gather.__doc__, all_gather.__wrapped__ = fn.__doc__, fn
    return all_gather


def _flattened_all_to_all(fn):
    """List `all_to_all` as one `all_to_all_single`, where gloo's own would refuse: tensors of
    different sizes per peer, or GPU tensors (shared-gpu)."""
    signature = inspect.signature(fn)

    def all_to_all(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        outputs, inputs = bound.arguments["output_tensor_list"], bound.arguments["input_tensor_list"]
        shapes = {t.shape for t in (*outputs, *inputs)}
        dtypes = {t.dtype for t in (*outputs, *inputs)}
        on_device = any(_on_device(t) for t in (*outputs, *inputs))
        if (len(shapes) <= 1 and not on_device) or len(dtypes) != 1:
            return fn(*bound.args, **bound.kwargs)
        # One all_to_all_single over the flattened tensors, with each peer's element count.
        sent = torch.cat([t.reshape(-1) for t in inputs])
        received = sent.new_empty(sum(t.numel() for t in outputs))
        dist.all_to_all_single(received, sent, [t.numel() for t in outputs], [t.numel() for t in inputs],
                               group=bound.arguments.get("group"))
        for out, part in zip(outputs, received.split([t.numel() for t in outputs])):
            out.copy_(part.view(out.shape))
        return _Done() if bound.arguments.get("async_op") else None

    all_to_all.__doc__, all_to_all.__wrapped__ = fn.__doc__, fn
    return all_to_all


def _root_only_reduce(fn):
    signature = inspect.signature(fn)

    def reduce(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        group = bound.arguments.get("group")
        if bound.arguments.get("group_dst") is not None:
            root_is_me = bound.arguments["group_dst"] == dist.get_rank(group)
        else:
            root_is_me = bound.arguments.get("dst") == dist.get_rank()
        if not root_is_me:
            bound.arguments["tensor"] = bound.arguments["tensor"].clone()
        return fn(*bound.args, **bound.kwargs)

    reduce.__doc__, reduce.__wrapped__ = fn.__doc__, fn
    return reduce


def install() -> None:
    """Replace those calls in torch.distributed (both names every caller can reach)."""
    replacements = {
        "all_gather_into_tensor": _regrouped(c10d.all_gather_into_tensor, "output_tensor", "input_tensor", large="output_tensor"),
        "reduce_scatter_tensor": _regrouped(c10d.reduce_scatter_tensor, "output", "input", large="input"),
        "all_gather": _uneven_all_gather(c10d.all_gather),
        "all_to_all": _flattened_all_to_all(c10d.all_to_all),
        "reduce": _root_only_reduce(c10d.reduce),
        "send": _host_p2p(c10d.send, receives=False, returns_work=False),
        "recv": _host_p2p(c10d.recv, receives=True, returns_work=False),
        "isend": _host_p2p(c10d.isend, receives=False, returns_work=True),
        "irecv": _host_p2p(c10d.irecv, receives=True, returns_work=True),
    }
    for name, replacement in replacements.items():
        setattr(c10d, name, replacement)
        setattr(dist, name, replacement)
