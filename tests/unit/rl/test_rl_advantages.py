"""Group-relative advantages against hand-computed groups, zero-signal groups, and batches of trajectories."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from overture.config import RLConfig
from overture.rl import compute_advantages, zero_signal_groups
from overture.rl.samples import Trajectory, samples_from_trajectories
from overture.text import Conversation, train_default_tokenizer


def test_grpo_divides_by_the_group_population_std():
    result = compute_advantages([1.0, 0.0, 1.0, 0.0, 1.0, 2.0, 3.0, 2.0], 4, "grpo")
    # group 1: mean 0.5, std 0.5; group 2: mean 2, deviations -1, 0, 1, 0, std sqrt(1/2)
    std = (2 / 4) ** 0.5
    expected = [1.0, -1.0, 1.0, -1.0] + [d / (std + 1e-6) for d in (-1.0, 0.0, 1.0, 0.0)]
    assert result.tolist() == pytest.approx(expected, abs=1e-5)
    assert result.dtype == torch.float32


def test_drgrpo_only_centres():
    assert compute_advantages([3.0, 1.0, 0.0, 0.0], 2, "drgrpo").tolist() == [1.0, -1.0, 0.0, 0.0]


def test_rloo_subtracts_the_mean_of_the_others():
    rewards = [1.0, 0.0, 0.0, 2.0]
    others = [(sum(rewards) - r) / 3 for r in rewards]  # 2/3, 1, 1, 1/3
    expected = [r - o for r, o in zip(rewards, others, strict=True)]
    assert compute_advantages(rewards, 4, "rloo").tolist() == pytest.approx(expected)


def test_zero_signal_groups_are_found_and_have_zero_advantage():
    rewards = [1.0, 1.0, 0.0, 1.0, 0.5, 0.5]
    assert zero_signal_groups(rewards, 2).tolist() == [True, False, True]
    for method in ("grpo", "drgrpo", "rloo"):
        advantages = compute_advantages(rewards, 2, method)
        assert advantages[[0, 1, 4, 5]].abs().max() == 0


@pytest.mark.parametrize(
    "rewards, group_size, message",
    [
        ([1.0, 0.0, 1.0], 2, "do not split into whole groups"),
        ([], 2, "do not split"),
        ([1.0, 0.0], 1, "group_size must be at least 2"),
        ([1.0, float("nan")], 2, "finite"),
    ],
)
def test_bad_rewards_are_errors(rewards, group_size, message):
    with pytest.raises(ValueError, match=message):
        compute_advantages(rewards, group_size)


def test_unknown_method_is_an_error():
    with pytest.raises(ValueError, match="unknown advantage method 'ppo'"):
        compute_advantages([1.0, 0.0], 2, "ppo")  # type: ignore[arg-type]


def test_importing_the_package_is_cheap():
    code = "import sys, overture.rl; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def trajectory(reward: float, status: str = "finished", name: str = "t") -> Trajectory:
    return Trajectory(
        token_ids=[1, 2, 3, 4],
        loss_mask=[0, 0, 1, 1],
        behavior_logprobs=[0.0, 0.0, -1.0, -2.0],
        versions=[-1, -1, 0, 0],
        reward=reward,
        status=status,  # type: ignore[arg-type]
        task_id=name,
    )


def test_batch_masks_truncations_and_drops_zero_signal_groups():
    rl = RLConfig(group_size=2, advantage="drgrpo", drop_zero_signal_groups=True, mask_truncated=True)
    batch = [trajectory(1.0), trajectory(0.0, "truncated"), trajectory(1.0), trajectory(1.0)]
    samples, report = samples_from_trajectories(batch, rl)
    assert [s.advantage for s in samples] == [0.5, -0.5]
    assert samples[1].loss_mask == [0, 0, 0, 0] and samples[0].loss_mask == [0, 0, 1, 1]
    assert (report.groups, report.zero_signal_groups, report.dropped_groups) == (2, 1, 1)
    assert report.masked_truncated == 1

    kept, report = samples_from_trajectories(batch, rl.model_copy(update={"drop_zero_signal_groups": False}))
    assert len(kept) == 4 and report.dropped_groups == 0


def test_interleaved_groups_are_an_error_not_wrong_advantages():
    def member(reward: float, group: str) -> Trajectory:
        sample = trajectory(reward)
        sample.group_id = group
        return sample

    whole = [member(1.0, "a"), member(0.0, "a"), member(3.0, "b"), member(1.0, "b")]
    samples, _ = samples_from_trajectories(whole, RLConfig(group_size=2, advantage="drgrpo"))
    assert [s.advantage for s in samples] == [0.5, -0.5, 1.0, -1.0]
    interleaved = [whole[0], whole[2], whole[1], whole[3]]
    with pytest.raises(ValueError, match=r"trajectories 0\.\.1 mix groups \['a', 'b'\]"):
        samples_from_trajectories(interleaved, RLConfig(group_size=2, advantage="drgrpo"))


def test_aborted_trajectories_and_misaligned_fields_are_errors():
    with pytest.raises(ValueError, match="aborted: resume it"):
        samples_from_trajectories([trajectory(1.0), trajectory(0.0, "aborted", "x")], RLConfig(group_size=2))
    with pytest.raises(ValueError, match="behavior_logprobs has 1 entries but token_ids has 2"):
        Trajectory(token_ids=[1, 2], loss_mask=[0, 1], behavior_logprobs=[0.0], versions=[-1, 0])
    with pytest.raises(ValueError, match="unknown status 'done'"):
        trajectory(1.0, "done")


def test_a_conversation_becomes_a_trajectory_with_aligned_fields():
    tokenizer = train_default_tokenizer(512)
    conversation = Conversation(tokenizer)
    conversation.add_user("fix it")
    conversation.begin_assistant()
    conversation.add_policy_tokens([5, 6], logprobs=[-0.5, -1.5], version=2)
    conversation.add_policy_tokens([tokenizer.im_end_id], logprobs=[-0.1], version=3)
    conversation.end_assistant()
    trajectory = Trajectory.from_conversation(conversation, 1.0, status="finished", task_id="t1")
    policy = [i for i, m in enumerate(trajectory.loss_mask) if m]
    assert [trajectory.behavior_logprobs[i] for i in policy] == [-0.5, -1.5, -0.1]
    assert [trajectory.versions[i] for i in policy] == [2, 2, 3]
    assert trajectory.reward == 1.0 and trajectory.task_id == "t1"
