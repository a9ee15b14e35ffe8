"""Expert parallelism: each ep rank holds E / ep routed experts; tokens travel to them and back.

For one MoE layer on one rank (`ExpertDispatch.__call__`):

1. The rows (token copies, one per routing slot) arrive sorted by global expert, with the count
   per expert. Experts are split in contiguous blocks, so the rows are already grouped by the
   ep rank that holds them.
2. Counts first: an all-to-all of the E counts tells every rank how many rows each peer will
   send to each of its local experts, which fixes the split sizes of the row exchange.
3. Dispatch: an all-to-all sends each block of rows to its ep rank. What arrives is ordered by
   source rank, then local expert; it is regrouped by local expert (a permutation) and runs
   through the module's own grouped GEMMs (`GroupedExperts.compute`, fp32 or MXFP8 alike).
4. Combine: the outputs are put back in arrival order and a second all-to-all, with the split
   sizes swapped, returns them to their source ranks in the order they left.

Both all-to-alls are differentiable: backward sends the gradients the opposite way.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn

from overture.model.moe import GroupedExperts

EXPERT_WEIGHTS = ("gate_proj", "up_proj", "down_proj")


class _AllToAll(torch.autograd.Function):
    """Rows of `x` in blocks of `send_splits` go to ranks 0..n-1; blocks of `receive_splits` arrive."""

    @staticmethod
    def forward(ctx, x, receive_splits: list[int], send_splits: list[int], group: dist.ProcessGroup):
        ctx.splits = (receive_splits, send_splits)
        ctx.group = group
        out = x.new_empty((sum(receive_splits), *x.shape[1:]))
        dist.all_to_all_single(out, x.contiguous(), receive_splits, send_splits, group=group)
        return out

    @staticmethod
    def backward(ctx, grad):
        receive_splits, send_splits = ctx.splits
        grad_in = grad.new_empty((sum(send_splits), *grad.shape[1:]))
        dist.all_to_all_single(grad_in, grad.contiguous(), send_splits, receive_splits, group=ctx.group)
        return grad_in, None, None, None


def all_to_all(
    x: torch.Tensor, receive_splits: list[int], send_splits: list[int], group: dist.ProcessGroup
) -> torch.Tensor:
    """Differentiable all-to-all of rows with uneven splits."""
    return _AllToAll.apply(x, receive_splits, send_splits, group)


def expert_major_order(received: torch.Tensor) -> torch.Tensor:
    """Row permutation from source-major to expert-major order.

    `received[s, j]` rows came from source rank s for local expert j, stored source by source.
    Returns indices that list every expert's rows together (sources in rank order within an
    expert), the order the grouped GEMM needs.
    """
    block_starts = (torch.cumsum(received.reshape(-1), 0) - received.reshape(-1)).view_as(received)
    starts, lengths = block_starts.T.reshape(-1), received.T.reshape(-1)
    target_starts = torch.cumsum(lengths, 0) - lengths
    total = int(lengths.sum())
    # Each output row i of block b reads input row starts[b] + (i - target_starts[b]).
    return torch.arange(total, device=received.device) + torch.repeat_interleave(
        starts - target_starts, lengths, output_size=total
    )


class ExpertDispatch:
    """The `GroupedExperts.dispatch` of one ep rank: exchange rows, run local experts, send back.

    Not an nn.Module on purpose: it holds no weights, so the model's state dict is unchanged.
    """

    def __init__(self, group: dist.ProcessGroup, num_experts: int) -> None:
        self.group = group
        self.size = dist.get_world_size(group)
        self.rank = dist.get_rank(group)
        self.num_experts = num_experts
        self.local_experts = num_experts // self.size

    def __deepcopy__(self, memo: dict) -> ExpertDispatch:
        # A copy of the model (e.g. float32 master weights) still talks over the same group.
        return self

    @property
    def first_expert(self) -> int:
        return self.rank * self.local_experts

    def exchange_counts(self, counts: torch.Tensor) -> torch.Tensor:
        """counts[e] of this rank's rows per global expert → received[s, j]: rows that source
        rank s sends to this rank's local expert j."""
        received = torch.empty_like(counts)
        dist.all_to_all_single(received, counts.contiguous(), group=self.group)
        return received.view(self.size, self.local_experts)

    def __call__(self, experts: GroupedExperts, rows: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        received = self.exchange_counts(counts)
        send_splits = counts.view(self.size, self.local_experts).sum(1).tolist()
        receive_splits = received.sum(1).tolist()
        arrived = all_to_all(rows, receive_splits, send_splits, self.group)
        order = expert_major_order(received)
        computed = experts.compute(arrived[order], received.sum(0))
        back_in_arrival_order = torch.empty_like(computed).index_copy(0, order, computed)
        return all_to_all(back_in_arrival_order, send_splits, receive_splits, self.group)


def expert_modules(model: nn.Module) -> list[GroupedExperts]:
    return [module for module in model.modules() if isinstance(module, GroupedExperts)]


@torch.no_grad()
def shard_experts(model: nn.Module, group: dist.ProcessGroup) -> None:
    """Keep only this ep rank's block of experts in every `GroupedExperts` and route through
    `ExpertDispatch`. The weights stay E_local × out × in, so FSDP can shard them further."""
    for experts in expert_modules(model):
        dispatch = ExpertDispatch(group, experts.num_experts)
        block = slice(dispatch.first_expert, dispatch.first_expert + dispatch.local_experts)
        for name in EXPERT_WEIGHTS:
            full = getattr(experts, name)
            setattr(experts, name, nn.Parameter(full[block].clone(), requires_grad=full.requires_grad))
        experts.dispatch = dispatch
