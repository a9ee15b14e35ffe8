"""Shared prefixes: each sample's logprobs and the step's gradients are those of the samples laid
out alone, while common untrained beginnings are computed once."""

from __future__ import annotations

import pytest
import torch
from conftest import tiny_model_config

from overture.config import RunConfig
from overture.model import Transformer
from overture.rl.batching import build_micro_batches
from overture.rl.logprobs import token_logprobs
from overture.rl.prefix_sharing import Segment, Unit, position_cost, prefix_units, unit_cost
from overture.rl.samples import TrainingSample
from overture.rl.trainer import rl_trainer


def tokens(count: int, seed: int, vocab: int = 96) -> list[int]:
    return torch.randint(0, vocab, (count,), generator=torch.Generator().manual_seed(seed)).tolist()


def sample(prompt: list[int], answer: list[int], index: int) -> TrainingSample:
    ids = prompt + answer
    mask = [0] * len(prompt) + [1] * len(answer)
    logprobs = [0.0] * len(prompt) + [-0.1 * (i % 7) - 0.05 for i in range(len(answer))]
    return TrainingSample(ids, mask, logprobs, [0] * len(ids), advantage=(-1.0) ** index * (index + 1) / 4)


def agent_batch() -> list[TrainingSample]:
    """Two groups of three on a shared system message, each group on its own task; plus a sample
    that trains on a token inside the others' system message, and one that shares nothing."""
    system = tokens(60, 1)
    samples = []
    for group in range(2):
        task = tokens(6, 10 + group)
        for member in range(3):
            samples.append(sample(system + task, tokens(3 + member, 100 + 3 * group + member), len(samples)))
    early = system[:8] + tokens(6, 50)
    samples.append(TrainingSample(early, [0] * 4 + [1] * 10, [-0.3] * 14, [0] * 14, advantage=0.5))
    samples.append(sample(tokens(7, 60), tokens(9, 61), len(samples)))
    return samples


COST = position_cost(tiny_model_config())


def layout_positions(batches) -> int:
    return sum(b.num_tokens for b in batches)


def test_shared_prefixes_are_computed_once():
    samples = agent_batch()
    batches = build_micro_batches(samples, [1.0] * len(samples), token_budget=4096, shared_prefix_cost=COST)
    assert sum(len(s.token_ids) - 1 for s in samples) == 2 * (68 + 69 + 70) + 13 + 15
    # The six group members share positions 0-58 (position 59 predicts a task token), each group
    # 59-64, then each member has its 3-5 positions. The early sample shares positions 0-2 (it
    # trains on position 3): its 10 other positions attend to those 3 and to their own. The
    # unrelated last sample stays alone.
    assert layout_positions(batches) == 59 + 2 * (6 + 3 + 4 + 5) + 10 + 15
    trained = sum(int(b.trained.sum()) for b in batches)
    assert trained == sum(s.trained_tokens for s in samples)
    shared, last = prefix_units(samples, 4096, COST)
    assert (shared.samples, last.samples) == (7, 1)
    assert [(seg.start, seg.end) for seg in shared.segments][:4] == [(0, 3), (3, 59), (59, 65), (65, 68)]
    assert (shared.segments[-1].start, shared.segments[-1].parent) == (3, 0)  # the early sample's own


def test_a_sample_joins_a_unit_only_while_that_costs_less_than_apart():
    samples = agent_batch()
    # Attention alone (no other work per position): the groups share their long beginning, whose
    # queries are then computed once; the early sample's 10 own positions would each attend to 3
    # shared ones and to all 10 of their own block (l·(a + l) = 130 pairs), more than its 13
    # positions alone (84.5), so it stays apart, as does the sample that shares nothing.
    assert [unit.samples for unit in prefix_units(samples, 4096, 0.0)] == [6, 1, 1]
    # Positions dear: the seven that share a beginning in one unit; the unrelated sample saves
    # nothing by joining, so it stays apart. Within a budget, units stay within it.
    assert [unit.samples for unit in prefix_units(samples, 4096, 1e9)] == [7, 1]
    assert all(unit.length <= 150 for unit in prefix_units(samples, 150, 1e9))


def test_logprobs_with_shared_prefixes_equal_each_sample_alone():
    model = Transformer(tiny_model_config()).eval()
    samples = agent_batch()
    got: dict[int, torch.Tensor] = {}
    with torch.no_grad():
        for batch in build_micro_batches(
            samples, [1.0] * len(samples), token_budget=4096, shared_prefix_cost=COST
        ):
            assert batch.attention is not None
            out = model(batch.input_ids, positions=batch.positions, attention_mask=batch.attention)
            logprobs = token_logprobs(out.logits, batch.targets)
            for index in range(len(samples)):
                chosen = batch.trained & (batch.sequence_ids == index)
                if chosen.any():
                    got[index] = logprobs[chosen]
        for index, s in enumerate(samples):
            ids = torch.tensor([s.token_ids])
            alone = token_logprobs(model(ids[:, :-1]).logits, ids[:, 1:])[0]
            trained = torch.tensor(s.loss_mask[1:], dtype=torch.bool)
            torch.testing.assert_close(got[index], alone[trained], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("step", ["rl", "lm"])
def test_a_training_step_with_shared_prefixes_has_the_gradients_of_one_without(step):
    samples = agent_batch()
    grads = {}
    for share in (False, True):
        config = RunConfig(model=tiny_model_config(router_aux_loss_coef=0.0))
        config.training.share_prefixes = share
        config.training.micro_batch_tokens = 4096
        torch.manual_seed(0)
        trainer = rl_trainer(Transformer(config.model), config)
        trainer.optimizer_step = lambda: {}  # keep the gradients of the step, unapplied
        metrics = trainer.rl_step(samples) if step == "rl" else trainer.lm_step(samples)
        grads[share] = {n: p.grad.clone() for n, p in trainer.model.named_parameters() if p.grad is not None}
        grads[share]["loss"] = torch.tensor(metrics["loss"])
    assert grads[True].keys() == grads[False].keys()
    for name, grad in grads[False].items():
        torch.testing.assert_close(grads[True][name], grad, atol=1e-6, rtol=1e-4, msg=name)


def test_units_stay_within_the_budget_and_cost_no_more_than_their_samples_apart():
    samples = agent_batch()
    alone = [
        unit_cost(Unit([Segment(i, 0, len(s.token_ids) - 1, None)], 1), COST) for i, s in enumerate(samples)
    ]
    for budget in (80, 150, 4096):
        units = prefix_units(samples, budget, COST)
        ends = [
            seg.sample
            for u in units
            for seg in u.segments
            if seg.end == len(samples[seg.sample].token_ids) - 1
        ]
        assert sorted(ends) == list(range(len(samples)))  # every sample ends in exactly one unit
        assert sum(u.samples for u in units) == len(samples)
        for unit in units:
            assert unit.length <= max(budget, max(len(s.token_ids) - 1 for s in samples))
            members = [
                seg.sample for seg in unit.segments if seg.end == len(samples[seg.sample].token_ids) - 1
            ]
            assert unit_cost(unit, COST) <= sum(alone[i] for i in members)


def test_without_common_prefixes_the_layout_is_plain_packing():
    samples = [sample(tokens(5, 200 + i), tokens(4 + i, 300 + i), i) for i in range(5)]
    shared = build_micro_batches(samples, [1.0] * 5, token_budget=64, shared_prefix_cost=COST)
    plain = build_micro_batches(samples, [1.0] * 5, token_budget=64)
    assert len(shared) == len(plain)
    for a, b in zip(shared, plain, strict=True):
        assert torch.equal(a.input_ids, b.input_ids) and torch.equal(a.sequence_ids, b.sequence_ids)
        assert (a.attention is None) == (b.attention is None)
        if a.attention is not None:
            assert torch.equal(a.attention.dense_mask(), b.attention.dense_mask())
