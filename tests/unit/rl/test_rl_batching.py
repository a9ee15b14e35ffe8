"""Micro-batches: packed rows see exactly what each sequence sees alone, budgets hold, nothing is padded."""

from __future__ import annotations

import pytest
import torch
from conftest import tiny_model_config

from overture.model import Transformer
from overture.rl.batching import build_micro_batches, pack_indices, pad_indices
from overture.rl.logprobs import token_logprobs
from overture.rl.samples import TrainingSample


def make_samples(lengths: list[int], vocab: int = 96, seed: int = 0) -> list[TrainingSample]:
    generator = torch.Generator().manual_seed(seed)
    samples = []
    for index, length in enumerate(lengths):
        ids = torch.randint(0, vocab, (length,), generator=generator).tolist()
        mask = [0] * (length // 3) + [1] * (length - length // 3)
        logprobs = [-float(i % 5) for i in range(length)]
        samples.append(
            TrainingSample(ids, mask, logprobs, [0] * length, advantage=index - 1.0, name=f"s{index}")
        )
    return samples


def test_first_fit_decreasing_respects_the_budget_and_keeps_every_sample():
    lengths = [7, 3, 9, 2, 5, 5, 1, 12]
    bins = pack_indices(lengths, 10)
    assert sorted(i for b in bins for i in b) == list(range(len(lengths)))
    assert all(sum(lengths[i] for i in b) <= 10 for b in bins if len(b) > 1)
    assert [12] in [[lengths[i] for i in b] for b in bins]  # too long for the budget: a row of its own
    assert len(bins) == 5  # 12 | 9+1 | 7+3 | 5+5 | 2


def test_padded_groups_fit_rows_times_longest():
    lengths = [4, 4, 5, 9, 2]
    assert pad_indices(lengths, 12) == [[0, 1], [2], [3], [4]]


def test_packed_rows_are_as_long_as_the_longest_sample_and_positions_restart():
    samples = make_samples([9, 6, 4, 3, 5, 5])  # 8, 5, 3, 2, 4, 4 positions
    batches = build_micro_batches(samples, [1.0] * 6, token_budget=20, packing=True)
    # rows of 8: [8] [5+3] [4+4] [2]; two rows per micro-batch
    assert [tuple(b.input_ids.shape) for b in batches] == [(2, 8), (2, 8)]
    assert sum(b.num_tokens for b in batches) == 26 and batches[0].num_tokens == 16
    row = batches[0].positions[1].tolist()
    assert row == [0, 1, 2, 3, 4, 0, 1, 2]
    assert batches[0].attention is not None
    mask = batches[0].attention.dense_mask()
    assert mask.shape == (2, 1, 8, 8)
    # the second sequence's first token attends only to itself
    assert mask[1, 0, 5].nonzero().flatten().tolist() == [5]


@pytest.mark.parametrize("packing, budget", [(True, 24), (True, 48), (False, 48)])
def test_logprobs_in_micro_batches_equal_each_sequence_alone(packing, budget):
    model = Transformer(tiny_model_config()).eval()
    samples = make_samples([11, 5, 17, 8, 3, 6])
    batches = build_micro_batches(samples, [1.0] * len(samples), token_budget=budget, packing=packing)
    assert any(b.num_tokens < b.num_positions for b in batches) == (budget == 48)  # padded rows too
    got: dict[int, torch.Tensor] = {}
    with torch.no_grad():
        for batch in batches:
            out = model(batch.input_ids, positions=batch.positions, attention_mask=batch.attention)
            logprobs = token_logprobs(out.logits, batch.targets)
            for index in batch.sequence_ids.unique().tolist():
                if index >= 0:
                    got[index] = logprobs[batch.sequence_ids == index]
        for index, sample in enumerate(samples):
            ids = torch.tensor([sample.token_ids])
            alone = token_logprobs(model(ids[:, :-1]).logits, ids[:, 1:])[0]
            torch.testing.assert_close(got[index], alone, atol=1e-5, rtol=1e-5)


def test_targets_carry_the_next_tokens_fields():
    sample = TrainingSample(
        [5, 6, 7, 8], [0, 0, 1, 1], [0.0, 0.0, -0.5, -0.25], [-1, -1, 3, 4], advantage=2.0
    )
    (batch,) = build_micro_batches([sample], [0.5], token_budget=16)
    assert batch.input_ids.tolist() == [[5, 6, 7]] and batch.targets.tolist() == [[6, 7, 8]]
    assert batch.trained.tolist() == [[False, True, True]]
    assert batch.trained_values(batch.behavior_logprobs).tolist() == [-0.5, -0.25]
    assert batch.trained_values(batch.versions).tolist() == [3, 4]
    assert batch.trained_values(batch.weights).tolist() == [0.5, 0.5]


def test_mismatched_inputs_are_errors():
    with pytest.raises(ValueError, match="loss_mask has 3 entries but token_ids has 4"):
        TrainingSample([1, 2, 3, 4], [0, 1, 1])
    with pytest.raises(ValueError, match="needs at least 2 tokens"):
        TrainingSample([1], [1])
    with pytest.raises(ValueError, match="loss_mask must hold only 0 and 1"):
        TrainingSample([1, 2], [0, 2])
    with pytest.raises(ValueError, match="got 1 aggregation weights for 2 samples"):
        build_micro_batches(make_samples([4, 4]), [1.0], token_budget=8)
    with pytest.raises(ValueError, match=r"logits \(1, 3, 5\) do not match targets \(1, 4\)"):
        token_logprobs(torch.zeros(1, 3, 5), torch.zeros(1, 4, dtype=torch.long))


def test_tempered_logprobs_are_those_of_the_scaled_logits():
    logits, targets = torch.randn(2, 3, 7), torch.randint(0, 7, (2, 3))
    halved = token_logprobs(logits, targets, temperature=0.5)
    assert torch.allclose(halved, token_logprobs(2 * logits, targets))
    assert torch.equal(token_logprobs(logits, targets, temperature=1.0), token_logprobs(logits, targets))
    with pytest.raises(ValueError, match="temperature must be > 0"):
        token_logprobs(logits, targets, temperature=0.0)
