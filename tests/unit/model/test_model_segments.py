"""Segment-by-segment attention equals SDPA under the dense mask of the same layout, values and
gradients, and malformed layouts are refused with what is wrong."""

from __future__ import annotations

import random

import pytest
import torch
import torch.nn.functional as F

from overture.model import RowSegments, SegmentLayout, segments


def random_row(rng: random.Random, width: int) -> RowSegments:
    """Segments of 1-9 positions filling most of `width`, each below a random earlier one or none."""
    spans, parents, at = [], [], 0
    while True:
        length = rng.randint(1, 9)
        if at + length > width - rng.randint(0, 3):
            break
        parents.append(rng.choice([None, *range(len(spans))]) if spans else None)
        spans.append((at, at + length))
        at += length
    return RowSegments(tuple(spans), tuple(parents), width)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("heads, kv_heads", [(4, 2), (2, 2)])
@pytest.mark.parametrize("query_chunk", [segments.QUERY_CHUNK, 3])  # 3: lower segments in chunks
def test_segment_attention_equals_the_dense_mask(seed, heads, kv_heads, query_chunk, monkeypatch):
    monkeypatch.setattr(segments, "QUERY_CHUNK", query_chunk)
    rng = random.Random(seed)
    width = 40
    rows = [random_row(rng, width) for _ in range(3)]
    rows.append(RowSegments(((0, width - 5),), (None,), width))  # one sequence, padding after it
    layout = SegmentLayout(rows)
    assert any(len(row.spans) > 2 and any(p is not None for p in row.parents) for row in rows)
    generator = torch.Generator().manual_seed(seed)
    q, k, v = (
        torch.randn(len(rows), n, width, 8, generator=generator, requires_grad=True)
        for n in (heads, kv_heads, kv_heads)
    )
    # The single-sequence row is causal over its whole width (its padding sees the sequence, which
    # changes only the padding's outputs); nothing is taken from the padding, as in training.
    real = torch.ones(len(rows), 1, width, 1, dtype=torch.bool)
    real[-1, :, width - 5 :] = False
    weights = torch.randn(len(rows), heads, width, 8, generator=generator) * real
    gqa = heads != kv_heads
    got = layout.attend(q, k, v, enable_gqa=gqa)
    grads = torch.autograd.grad((got * weights).sum(), (q, k, v))
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=layout.dense_mask(), enable_gqa=gqa)
    expected_grads = torch.autograd.grad((expected * weights).sum(), (q, k, v))
    torch.testing.assert_close(got * real, expected * real, atol=1e-5, rtol=1e-5)
    for name, a, b in zip("qkv", grads, expected_grads, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5, msg=name)


def test_the_dense_mask_lets_a_segment_see_itself_and_the_segments_above_it():
    # [0, 3) top, [3, 5) below it, [5, 7) below it too, [7, 9) alone; padding [9, 10)
    row = RowSegments(((0, 3), (3, 5), (5, 7), (7, 9)), (None, 0, 0, None), 10)
    mask = SegmentLayout([row]).dense_mask()[0, 0]
    assert mask[6].nonzero().flatten().tolist() == [0, 1, 2, 5, 6]  # not the sibling at 3-4
    assert mask[7].nonzero().flatten().tolist() == [7]
    assert mask[9].nonzero().flatten().tolist() == [9]


@pytest.mark.parametrize(
    "spans, parents, width, message",
    [
        (((0, 3), (4, 6)), (None, None), 8, "segment 1 spans [4, 6); expected to start at 3"),
        (((0, 3), (3, 6)), (None, 1), 8, "segment 1's parent 1 is not an earlier segment"),
        (((0, 3), (3, 9)), (None, 0), 8, "past the row's width 8"),
        (((0, 3),), (None, None), 8, "1 spans but 2 parents"),
    ],
)
def test_malformed_rows_are_refused(spans, parents, width, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
        RowSegments(spans, parents, width)


def test_queries_that_do_not_fit_the_layout_are_refused():
    layout = SegmentLayout([RowSegments(((0, 4), (4, 6)), (None, 0), 6)])
    q = torch.zeros(1, 2, 7, 8)
    with pytest.raises(ValueError, match="for 1 rows of width 6"):
        layout.attend(q, q, q, enable_gqa=False)
    with pytest.raises(ValueError, match="one width"):
        SegmentLayout([RowSegments(((0, 4),), (None,), 6), RowSegments(((0, 4),), (None,), 5)])
