"""Repeat recovery: spans of assistant tokens repeated in place, out of the loss, every trained
target kept; SFT with `sft.repeats` trains on them and resumes with the same insertions."""

from __future__ import annotations

import random

import pytest
from test_rl_sft import quiet, sft_config

from overture.rl.repeat_recovery import insert_repeats
from overture.rl.run_dir import read_metrics
from overture.rl.samples import TrainingSample
from overture.rl.sft import sft

# a system turn (0), then two assistant bodies (1) with a tool response (0) between them
TOKENS = list(range(100, 130))
MASK = [0] * 6 + [1] * 10 + [0] * 4 + [1] * 10


def trained_targets(sample: TrainingSample) -> list[int]:
    return [t for t, m in zip(sample.token_ids, sample.loss_mask, strict=True) if m]


def test_a_repeat_copies_the_span_before_a_trained_token_out_of_the_loss():
    plain = TrainingSample(token_ids=TOKENS, loss_mask=MASK, name="demo")
    for seed in range(50):
        sample = insert_repeats(plain, 1, random.Random(seed), max_tokens=100, max_span=3, max_times=2)
        inserted = len(sample.token_ids) - len(TOKENS)
        at = next(i for i, (a, b) in enumerate(zip(sample.token_ids, TOKENS, strict=False)) if a != b)
        span = sample.token_ids[at - 1] - sample.token_ids[at] + 1  # a copy restarts the run of ids
        assert 1 <= span <= 3 and inserted in (span, 2 * span)
        assert sample.token_ids[at : at + inserted] == TOKENS[at - span : at] * (inserted // span)
        assert sample.loss_mask[at : at + inserted] == [0] * inserted
        # the demonstration's next token follows the repeat and is trained there
        assert sample.token_ids[at + inserted] == TOKENS[at] and sample.loss_mask[at + inserted] == 1
        assert all(MASK[i] for i in range(at - span, at + 1))  # the span and its successor trained
        assert trained_targets(sample) == trained_targets(plain)


def test_repeats_stop_at_the_token_limit_and_refuse_policy_samples():
    plain = TrainingSample(token_ids=TOKENS, loss_mask=MASK)
    assert insert_repeats(plain, 10, random.Random(0), max_tokens=len(TOKENS)).token_ids == TOKENS
    many = insert_repeats(plain, 10, random.Random(0), max_tokens=60)
    assert len(TOKENS) < len(many.token_ids) <= 60 and trained_targets(many) == trained_targets(plain)
    rollout = TrainingSample(TOKENS, MASK, behavior_logprobs=[0.0] * len(TOKENS), versions=[0] * len(TOKENS))
    with pytest.raises(ValueError, match="supervised samples only"):
        insert_repeats(rollout, 1, random.Random(0), max_tokens=100)


def test_sft_with_repeats_trains_on_them_and_resumes_with_the_same_ones(tmp_path):
    def config(name: str, repeats: int = 4):
        run = sft_config(tmp_path, name=name, steps=8, checkpoint_every=3)
        run.sft.repeats = repeats
        return run

    def losses(summary) -> dict[int, float]:
        return {r["step"]: r["loss"] for r in read_metrics(summary["run_dir"]) if "loss" in r}

    whole = sft(config("whole"), echo=quiet)
    sft(config("part"), until_step=5, echo=quiet)
    resumed = sft(config("part"), resume=True, echo=quiet)
    assert losses(resumed)[8] == pytest.approx(losses(whole)[8], rel=1e-6)
    # without the repeats the contexts differ, and so do the losses (a rerun matches within 1e-6)
    plain = losses(sft(config("plain", repeats=0), echo=quiet))
    with_repeats = losses(whole)
    assert plain.keys() == with_repeats.keys()
    assert max(abs(plain[s] / with_repeats[s] - 1) for s in plain) > 1e-5
