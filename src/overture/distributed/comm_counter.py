"""Counting the bytes that collectives move, by wrapping torch.distributed's collective functions.

`CollectiveCounter` replaces the module-level functions that FSDP2 and expert parallelism call
(`all_gather_single`, `all_gather_into_tensor`, `all_gather`, `reduce_scatter_single`,
`reduce_scatter_tensor`, `all_reduce`, `all_to_all_single`) with wrappers that record every call,
then puts the originals back. Callers that look the functions up on `torch.distributed` at call
time, as FSDP2 does, are counted; nothing else changes.

Per call it records the payload and the bytes this rank sends over the wire, with the usual
costs: all-gather and reduce-scatter send (n-1)/n of the full tensor (ring), all-reduce twice
that, all-to-all every block not addressed to this rank itself. `count_remote_slots` counts
what expert parallelism's all-to-all carries: routing slots whose expert is on another rank.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist

KIND_OF = {
    "all_gather_single": "all_gather",
    "all_gather_into_tensor": "all_gather",
    "all_gather": "all_gather",
    "reduce_scatter_single": "reduce_scatter",
    "reduce_scatter_tensor": "reduce_scatter",
    "all_reduce": "all_reduce",
    "all_to_all_single": "all_to_all",
}


def _nbytes(tensor: torch.Tensor) -> int:
    return tensor.numel() * tensor.element_size()


@dataclass
class CollectiveCall:
    kind: str  # all_gather, reduce_scatter, all_reduce, all_to_all
    group_size: int
    payload_bytes: int  # the full (gathered / reduced / exchanged) tensor this rank sees
    sent_bytes: int  # what this rank sends to other ranks


@dataclass
class CollectiveCounter:
    """Records the collectives called while `counting()` is active (in any thread)."""

    calls: list[CollectiveCall] = field(default_factory=list)

    def totals(self, key: str = "sent_bytes") -> dict[str, int]:
        out: dict[str, int] = defaultdict(int)
        for call in self.calls:
            out[call.kind] += getattr(call, key)
        return dict(out)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = defaultdict(int)
        for call in self.calls:
            out[call.kind] += 1
        return dict(out)

    def record(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        group = kwargs.get("group")
        size = dist.get_world_size(group)
        if size <= 1:
            return
        kind = KIND_OF[name]
        payload, sent = _measure(name, size, args, kwargs)
        self.calls.append(CollectiveCall(kind, size, payload, sent))

    @contextmanager
    def counting(self) -> Iterator[CollectiveCounter]:
        originals = {name: getattr(dist, name) for name in KIND_OF if hasattr(dist, name)}
        for name, original in originals.items():
            setattr(dist, name, self._wrap(name, original))
        try:
            yield self
        finally:
            for name, original in originals.items():
                setattr(dist, name, original)

    def _wrap(self, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def counted(*args: Any, **kwargs: Any) -> Any:
            self.record(name, args, kwargs)
            return original(*args, **kwargs)

        return counted


def _argument(args: tuple[Any, ...], kwargs: dict[str, Any], position: int, *names: str) -> Any:
    for name in names:
        if name in kwargs:
            return kwargs[name]
    return args[position]


def _measure(name: str, size: int, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[int, int]:
    ring = (size - 1) / size
    if name == "all_gather":
        tensor = _argument(args, kwargs, 1, "tensor")
        full = _nbytes(tensor) * size
        return full, round(full * ring)
    if name in ("all_gather_single", "all_gather_into_tensor"):
        full = _nbytes(_argument(args, kwargs, 0, "output_tensor", "output"))
        return full, round(full * ring)
    if name in ("reduce_scatter_single", "reduce_scatter_tensor"):
        full = _nbytes(_argument(args, kwargs, 1, "input", "input_tensor"))
        return full, round(full * ring)
    if name == "all_reduce":
        full = _nbytes(_argument(args, kwargs, 0, "tensor"))
        return full, round(2 * full * ring)
    # all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None, group=...)
    source = _argument(args, kwargs, 1, "input")
    splits = kwargs.get("input_split_sizes", args[3] if len(args) > 3 else None)
    row_bytes = _nbytes(source) // max(1, source.shape[0]) if source.dim() else _nbytes(source)
    if not splits:
        splits = [source.shape[0] // size] * size
    own = dist.get_rank(kwargs.get("group"))
    sent = sum(rows for peer, rows in enumerate(splits) if peer != own) * row_bytes
    return _nbytes(source), sent


def count_remote_slots(model: torch.nn.Module, ep_rank: int, local_experts: int) -> list[int]:
    """A running count (`[n]`, updated in place) of the routing slots `model`'s routers send to
    experts held by other ep ranks, by a forward hook on each router."""
    from overture.model import Router

    remote = [0]

    def count(_router, _inputs, route) -> None:
        remote[0] += int((route.indices // local_experts != ep_rank).sum())

    for module in model.modules():
        if isinstance(module, Router):
            module.register_forward_hook(count)
    return remote
