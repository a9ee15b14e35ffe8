"""Micro-batches: training samples laid out as model inputs and per-position training targets.

Each sample of L tokens contributes L - 1 positions: inputs `token_ids[:-1]`, targets
`token_ids[1:]` (position t predicts token t + 1), and the target token's loss mask,
behavior logprob, version, advantage and aggregation weight.

Two layouts:

- **packed** (default): samples are bin-packed (first-fit decreasing) into rows as long as
  the longest sample, and rows are grouped into micro-batches of at most `token_budget`
  positions. Positions restart at 0 for every sample and the batch's `SegmentLayout`
  (`overture.model.segments`) keeps attention inside each sample, so a packed sample sees
  exactly what it would see alone.
  Padding is left only at the ends of rows the packing could not fill. With
  `shared_prefix_cost` the units packed are not single samples but runs of samples that share
  their untrained beginning, computed once (`overture.rl.prefix_sharing`); the layout then also
  lets a position see the shared segments above its own.
- **padded**: samples in their given order, one per row, as many rows per micro-batch as fit
  the budget when each is padded to the longest; the baseline `benchmarks/trainer.py`
  compares against.

Attention is computed segment by segment, so what a row costs is its samples' own attention,
whatever else shares the row. A sample longer than the budget gets a micro-batch of its own.

Over several training processes each rank lays out only its share of the step's samples
(`rank_shares`), and ranks with fewer micro-batches run `padding_micro_batch`es, which train
nothing but keep every rank's collectives (FSDP gathers, expert all-to-alls) in step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields

import torch

from overture.model import RowSegments, SegmentLayout
from overture.rl.prefix_sharing import Segment, Unit, prefix_units
from overture.rl.samples import TrainingSample

PAD_SEQUENCE = -1


@dataclass
class MicroBatch:
    """B×T model inputs plus per-position targets; `sequence_ids` is -1 on padding."""

    input_ids: torch.Tensor
    positions: torch.Tensor
    attention: SegmentLayout | None  # None: plain causal attention in every row
    targets: torch.Tensor
    trained: torch.Tensor  # bool: the loss sees this position
    behavior_logprobs: torch.Tensor
    versions: torch.Tensor
    advantages: torch.Tensor
    weights: torch.Tensor
    sequence_ids: torch.Tensor  # index of the sample in the step's sample list

    def to(self, device: torch.device) -> MicroBatch:
        moved = {f.name: getattr(self, f.name) for f in fields(self)}
        # The layout holds no tensors: its masks are made on the device of the queries.
        return MicroBatch(**{k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in moved.items()})

    @property
    def num_tokens(self) -> int:
        """Real (non-padding) positions."""
        return int((self.sequence_ids != PAD_SEQUENCE).sum())

    @property
    def num_positions(self) -> int:
        """Positions the model computes, padding included."""
        return self.input_ids.numel()

    def trained_values(self, tensor: torch.Tensor) -> torch.Tensor:
        """`tensor` (B×T, aligned with this batch) at the trained positions, flattened."""
        return tensor[self.trained]


def pack_indices(lengths: Sequence[int], token_budget: int) -> list[list[int]]:
    """First-fit decreasing: sample indices grouped into bins of at most `token_budget` positions."""
    bins: list[list[int]] = []
    room: list[int] = []
    for index in sorted(range(len(lengths)), key=lambda i: (-lengths[i], i)):
        size = lengths[index]
        slot = next((b for b, free in enumerate(room) if free >= size), None)
        if slot is None:
            bins.append([index])
            room.append(token_budget - size)
        else:
            bins[slot].append(index)
            room[slot] -= size
    return bins


def pad_indices(lengths: Sequence[int], token_budget: int) -> list[list[int]]:
    """Samples in order, grouped while (rows × longest row) stays within `token_budget`."""
    groups: list[list[int]] = []
    longest = 0
    for index, size in enumerate(lengths):
        if groups and (len(groups[-1]) + 1) * max(longest, size) <= token_budget:
            groups[-1].append(index)
            longest = max(longest, size)
        else:
            groups.append([index])
            longest = size
    return groups


def _positions_of(sample: TrainingSample, index: int, weight: float) -> dict[str, list]:
    """The per-position lists of one sample (L - 1 positions)."""
    length = len(sample.token_ids) - 1
    behavior = sample.behavior_logprobs or [0.0] * (length + 1)
    versions = sample.versions or [-1] * (length + 1)
    return {
        "input_ids": sample.token_ids[:-1],
        "positions": list(range(length)),
        "targets": sample.token_ids[1:],
        "trained": [bool(m) for m in sample.loss_mask[1:]],
        "behavior_logprobs": behavior[1:],
        "versions": versions[1:],
        "advantages": [sample.advantage] * length,
        "weights": [weight] * length,
        "sequence_ids": [index] * length,
    }


_PADDING = {
    "input_ids": 0,
    "positions": 0,
    "targets": 0,
    "trained": False,
    "behavior_logprobs": 0.0,
    "versions": -1,
    "advantages": 0.0,
    "weights": 0.0,
    "sequence_ids": PAD_SEQUENCE,
}
_DTYPES = {
    "input_ids": torch.long,
    "positions": torch.long,
    "targets": torch.long,
    "trained": torch.bool,
    "versions": torch.long,
    "sequence_ids": torch.long,
}


def _collate(rows: list[dict[str, list]], packed: bool) -> MicroBatch:
    width = max(len(row["input_ids"]) for row in rows)
    tensors = {}
    for key, pad in _PADDING.items():
        data = [row[key] + [pad] * (width - len(row[key])) for row in rows]
        tensors[key] = torch.tensor(data, dtype=_DTYPES.get(key, torch.float32))
    # A single segment per row needs no layout: plain causal attention is already right, and
    # padding sits after the real tokens where nothing real attends to it.
    attention = None
    if packed and any(len(row["parents"]) > 1 for row in rows):
        attention = SegmentLayout(
            [RowSegments(tuple(row["spans"]), tuple(row["parents"]), width) for row in rows]
        )
    return MicroBatch(attention=attention, **tensors)


def _unit_row(units: list[Unit], parts: list[dict[str, list]]) -> dict[str, list]:
    """The units side by side in one row: their positions' lists, each segment's span in the row
    and the segment above it (numbered across the row)."""
    row: dict[str, list] = {key: [] for key in _PADDING}
    row["spans"], row["parents"] = [], []
    for unit in units:
        offset = len(row["parents"])
        for segment in unit.segments:
            part = parts[segment.sample]
            start = len(row["input_ids"])
            for key in _PADDING:
                row[key] += part[key][segment.start : segment.end]
            row["spans"].append((start, start + segment.length))
            row["parents"].append(None if segment.parent is None else offset + segment.parent)
    return row


def build_micro_batches(
    samples: Sequence[TrainingSample],
    weights: Sequence[float],
    token_budget: int,
    packing: bool = True,
    shared_prefix_cost: float | None = None,
) -> list[MicroBatch]:
    """Lay out `samples` (with per-sample aggregation weights) as micro-batches.

    With `packing` and a `shared_prefix_cost` (one position's work in attention pairs, as
    `overture.rl.prefix_sharing.position_cost` estimates it), common untrained prefixes are
    computed once; with None every sample is packed whole."""
    if len(weights) != len(samples):
        raise ValueError(f"got {len(weights)} aggregation weights for {len(samples)} samples")
    if not samples:
        return []
    parts = [_positions_of(s, i, w) for i, (s, w) in enumerate(zip(samples, weights, strict=True))]
    lengths = [len(part["input_ids"]) for part in parts]
    if not packing:
        return [_collate([parts[i] for i in group], False) for group in pad_indices(lengths, token_budget)]
    if shared_prefix_cost is not None:
        units = prefix_units(samples, token_budget, shared_prefix_cost)
    else:
        units = [Unit([Segment(i, 0, n, None)], 1) for i, n in enumerate(lengths)]
    # Rows as long as the longest sample: every sample fits one. A unit of shared prefixes longer
    # than that gets a row of its own. Rows of about equal width share a micro-batch within the
    # budget.
    row_tokens = max(lengths)
    rows = [
        _unit_row([units[i] for i in row], parts)
        for row in pack_indices([u.length for u in units], row_tokens)
    ]
    batches: list[list[dict[str, list]]] = []
    width = 0
    for row in sorted(rows, key=lambda r: -len(r["input_ids"])):
        if batches and (len(batches[-1]) + 1) * width <= token_budget:
            batches[-1].append(row)
        else:
            batches.append([row])
            width = len(row["input_ids"])
    return [_collate(rows_of_batch, True) for rows_of_batch in batches]


def rank_shares(lengths: Sequence[int], ranks: int) -> list[list[int]]:
    """Sample indices for each of `ranks` data-parallel ranks, balanced by length: longest first,
    each to the rank with the fewest positions so far (lowest rank on ties); ascending within a
    rank. Every rank computes the same split from the same global list."""
    loads = [0] * ranks
    shares: list[list[int]] = [[] for _ in range(ranks)]
    for index in sorted(range(len(lengths)), key=lambda i: (-lengths[i], i)):
        rank = min(range(ranks), key=lambda r: (loads[r], r))
        shares[rank].append(index)
        loads[rank] += lengths[index]
    return [sorted(share) for share in shares]


def sample_positions(sample: TrainingSample) -> int:
    """Positions a sample contributes to a micro-batch (its length minus one)."""
    return len(sample.token_ids) - 1


def padding_micro_batch() -> MicroBatch:
    """One padding position: no real token, nothing trained, zero weight."""
    return _collate([{key: [pad] for key, pad in _PADDING.items()}], packed=False)
