"""Attention over packed rows of segments, computed segment by segment instead of through a dense mask.

A packed training row holds several sequences, and with shared prefixes a tree of them: each
segment (positions [start, end) of the row) attends causally to itself and to every position of
the segments above it. As a dense T×T mask that is exact but costs every query-key pair of the
row, masked or not, and loses the causal kernel's skipping of the upper triangle. Here a
segment with nothing above it is one causal call of PyTorch's SDPA over its own keys; one below
others attends to their keys, then its own, through a small mask (all of the keys above, causal
over its own), in chunks of `QUERY_CHUNK` queries, each against the keys up to its last query.
The pairs computed are then those the mask allows, plus the masked triangle of each chunk's own
block. (The kernel skips nothing under a mask: one call for a segment of 2,150 positions below
1,550 computes its whole 2,150 × 3,700 block, and chunks of 512 take 17 % less time forward and
backward; docs/benchmarks.md, "Trainer".)

Positions after a row's last segment (padding) attend causally among themselves, as in
`dense_mask`, so that they stay finite; nothing real attends to them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

QUERY_CHUNK = 512


@dataclass(frozen=True)
class RowSegments:
    """One row: `spans[s]` = segment s's positions [start, end), in order and without gaps from 0;
    `parents[s]` = the segment above it (an earlier one) or None; `width` = the row's length."""

    spans: tuple[tuple[int, int], ...]
    parents: tuple[int | None, ...]
    width: int

    def __post_init__(self) -> None:
        if len(self.spans) != len(self.parents):
            raise ValueError(f"{len(self.spans)} spans but {len(self.parents)} parents")
        at = 0
        for index, ((start, end), parent) in enumerate(zip(self.spans, self.parents, strict=True)):
            if start != at or end <= start:
                raise ValueError(f"segment {index} spans [{start}, {end}); expected to start at {at}")
            if parent is not None and not 0 <= parent < index:
                raise ValueError(f"segment {index}'s parent {parent} is not an earlier segment")
            at = end
        if at > self.width:
            raise ValueError(f"segments end at {at}, past the row's width {self.width}")

    def ancestors(self, segment: int) -> list[int]:
        """The segments above `segment`, top first."""
        chain = []
        above = self.parents[segment]
        while above is not None:
            chain.append(above)
            above = self.parents[above]
        return chain[::-1]

    @property
    def is_causal(self) -> bool:
        """One sequence from position 0 (and padding after it): plain causal attention is exact."""
        return len(self.spans) <= 1

    def pieces(self) -> list[tuple[int, int, list[int]]]:
        """(start, end, segments above) for every segment, then the padding as one more piece."""
        pieces = [(start, end, self.ancestors(s)) for s, (start, end) in enumerate(self.spans)]
        filled = self.spans[-1][1] if self.spans else 0
        if filled < self.width:
            pieces.append((filled, self.width, []))
        return pieces


class SegmentLayout:
    """How the queries of a micro-batch's rows attend (see the module docstring)."""

    def __init__(self, rows: Sequence[RowSegments]) -> None:
        widths = {row.width for row in rows}
        if len(widths) > 1:
            raise ValueError(f"rows of one micro-batch must have one width, got {sorted(widths)}")
        self.rows = list(rows)
        self._masks: dict[tuple[int, int, torch.device], torch.Tensor] = {}

    @property
    def width(self) -> int:
        return self.rows[0].width if self.rows else 0

    def dense_mask(self) -> torch.Tensor:
        """The same attention as a B×1×T×T boolean mask (True = may attend)."""
        width = self.width
        masks = []
        for row in self.rows:
            allowed = torch.zeros(width, width, dtype=torch.bool)
            for start, end, above in row.pieces():
                allowed[start:end, start:end] = True
                for segment in above:
                    allowed[start:end, slice(*row.spans[segment])] = True
            masks.append(allowed.tril_())
        return torch.stack(masks)[:, None]

    def _context_mask(self, above: int, start: int, end: int, device: torch.device) -> torch.Tensor:
        """1×1×(end - start)×(above + end): the queries of a segment's own positions [start, end)
        see every key above and the segment's own keys causally."""
        key = (above, start, end, device)
        if key not in self._masks:
            mask = torch.ones(end - start, above + end, dtype=torch.bool, device=device).tril_(above + start)
            self._masks[key] = mask[None, None]
        return self._masks[key]

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, enable_gqa: bool) -> torch.Tensor:
        """SDPA's output (B×heads×T×head_dim) for q, k, v of B×heads×T×head_dim laid out as the rows."""
        if q.shape[0] != len(self.rows) or q.shape[2] != self.width:
            raise ValueError(
                f"queries of shape {tuple(q.shape)} for {len(self.rows)} rows of width {self.width}"
            )
        rows = []
        for index, row in enumerate(self.rows):
            qr, kr, vr = q[index : index + 1], k[index : index + 1], v[index : index + 1]
            if row.is_causal:
                rows.append(F.scaled_dot_product_attention(qr, kr, vr, is_causal=True, enable_gqa=enable_gqa))
                continue
            pieces = row.pieces()
            lengths = [end - start for start, end, _ in pieces]
            # split (not slicing per piece): its backward is one concatenation of the pieces' gradients
            q_parts, k_parts, v_parts = (t.split(lengths, dim=2) for t in (qr, kr, vr))
            outputs = []
            for at, (_, _, above) in enumerate(pieces):
                if not above:
                    outputs.append(
                        F.scaled_dot_product_attention(
                            q_parts[at], k_parts[at], v_parts[at], is_causal=True, enable_gqa=enable_gqa
                        )
                    )
                    continue
                keys = torch.cat([k_parts[s] for s in above] + [k_parts[at]], dim=2)
                values = torch.cat([v_parts[s] for s in above] + [v_parts[at]], dim=2)
                context = keys.shape[2] - lengths[at]
                chunks = q_parts[at].split(QUERY_CHUNK, dim=2)
                for start, chunk in zip(range(0, lengths[at], QUERY_CHUNK), chunks, strict=True):
                    end = start + chunk.shape[2]
                    mask = self._context_mask(context, start, end, q.device)
                    seen = slice(0, context + end)
                    out = F.scaled_dot_product_attention(
                        chunk, keys[:, :, seen], values[:, :, seen], attn_mask=mask, enable_gqa=enable_gqa
                    )
                    outputs.append(out)
            rows.append(torch.cat(outputs, dim=2))
        return torch.cat(rows, dim=0)
