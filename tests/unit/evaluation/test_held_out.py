"""Evaluation: the unbiased pass@k estimator, and `overture eval` on a real checkpoint served by the
engine, every episode graded in a sandbox."""

from __future__ import annotations

import json

import pytest
from agent_helpers import tokenizer
from conftest import tiny_model_config
from typer.testing import CliRunner

from overture.agent import Trajectory
from overture.cli.main import app
from overture.engine.vllm_server import default_python
from overture.evaluation.held_out import PAIRED_MEASURES, paired_changes, pass1_change, pass_at_k, summarize
from overture.model import Transformer, save_pretrained
from overture.tasks import Task, write_tasks


@pytest.mark.parametrize(
    "samples, passed, k, expected",
    [(1, 1, 1, 1.0), (1, 0, 1, 0.0), (5, 2, 1, 0.4), (5, 2, 2, 0.7), (5, 4, 2, 1.0), (10, 0, 5, 0.0)],
)
def test_pass_at_k_is_the_unbiased_estimator(samples, passed, k, expected):
    assert pass_at_k(samples, passed, k) == pytest.approx(expected)


def test_pass_at_k_refuses_impossible_counts():
    with pytest.raises(ValueError, match="pass@3"):
        pass_at_k(2, 1, 3)
    with pytest.raises(ValueError, match="pass@1"):
        pass_at_k(2, 3, 1)


def test_pass1_change_is_paired_by_task():
    before, after = {"a": 1, "b": 0, "c": 2}, {"a": 2, "b": 0, "c": 2}
    change, error = pass1_change(before, 2, after, 2)
    assert change == pytest.approx(1 / 6)
    assert error == pytest.approx(1 / 6)  # changes 0.5, 0, 0: standard deviation 12 ** -0.5, over 3 ** 0.5
    # How far apart the tasks are in difficulty adds no error: each moved by the same here.
    assert pass1_change({"a": 3, "b": 0, "c": 1}, 4, {"a": 4, "b": 1, "c": 2}, 4) == (0.25, 0.0)
    # Other episode counts on each side compare per-task rates.
    assert pass1_change({"a": 2, "b": 0}, 4, {"a": 1, "b": 0}, 1)[0] == pytest.approx(0.25)
    with pytest.raises(ValueError, match="1 in one only"):
        pass1_change({"a": 1, "b": 0}, 1, {"a": 1}, 1)


def _trajectory(task_id: str, resolved: bool, turns: int, records: list | None = None) -> Trajectory:
    return Trajectory(
        [1, 2], [0, 1], [0.0, -1.0], [-1, 0], task_id=task_id,
        reward_info={"resolution": "resolved" if resolved else "none"},
        metrics={"turns": turns, "edited": resolved, "edits_applied": int(resolved)}, turns=records or [],
    )  # fmt: skip


FIX = "--- a/r.py\n+++ b/r.py\n@@ -3 +3 @@\n-x = 1\n+x = 2\n"
READ_THE_FIX = {
    "calls": [{"name": "read_file", "arguments": {"path": "r.py"}, "response": " 3|x = 1", "error": None}]
}


def test_summary_averages_pass_at_k_over_tasks_and_metrics_over_episodes():
    tasks = [
        Task("a", "r", "p", ["t::x"], patch=FIX),
        Task("b", "r", "p", ["t::x"]),
        Task("c", "q", "p", ["t::x"]),
    ]
    episodes = [_trajectory("a", True, 2, [READ_THE_FIX]), _trajectory("a", False, 4),
                _trajectory("b", False, 6), _trajectory("b", False, 8),
                _trajectory("c", True, 5), _trajectory("c", True, 5)]  # fmt: skip
    report = summarize(tasks, episodes, samples=2, ks=[1, 2])
    assert report.pass_at == {1: pytest.approx(0.5), 2: pytest.approx(2 / 3)}
    assert report.pass1_by_repo == {"q": 1.0, "r": 0.25}
    assert report.resolved == {"a": 1, "b": 0, "c": 2}
    assert report.times_resolved == {0: 1, 1: 1, 2: 1}
    assert report.metrics["turns"] == 5.0
    assert report.metrics["edited"] == 0.5 and report.metrics["edits_applied"] == 0.5
    assert report.metrics["read_fix_lines"] == pytest.approx(1 / 6) and report.metrics["edited_fix_file"] == 0
    assert report.statuses == {"finished": 6}


def _episode(task_id: str, resolved: bool, turns: int, parallel: float) -> Trajectory:
    episode = _trajectory(task_id, resolved, turns)
    episode.metrics.update(
        parallel_turn_share=parallel, tool_calls_per_turn=1 + parallel, policy_tokens=10 * turns
    )
    return episode


def test_behaviour_changes_are_paired_by_task_with_their_standard_errors():
    tasks = [Task(name, "r", "p", ["t::x"]) for name in "abc"]
    sft = [_episode("a", True, 6, 0.0), _episode("a", False, 8, 0.0), _episode("b", False, 6, 0.5),
           _episode("b", False, 6, 0.5), _episode("c", True, 4, 0.0),
           _episode("c", True, 6, 0.0)]  # fmt: skip
    rl = [_episode("a", True, 4, 0.5), _episode("a", True, 4, 0.5), _episode("b", False, 6, 0.5),
          _episode("b", True, 4, 1.0), _episode("c", True, 4, 0.5), _episode("c", True, 4, 0.5)]  # fmt: skip
    before, after = (summarize(tasks, episodes, samples=2, ks=[1, 2]) for episodes in (sft, rl))
    assert before.by_task["b"].keys() == {"pass@1", "pass@2", *PAIRED_MEASURES} - {"turns_resolved"}
    changes = paired_changes(before.by_task, after.by_task)
    assert set(changes) == {"pass@1", "pass@2", *PAIRED_MEASURES}
    parallel = changes["parallel_turn_share"]  # per task: +0.5, +0.25, +0.5
    assert parallel["change"] == pytest.approx(5 / 12) and parallel["tasks"] == 3
    assert parallel["standard_error"] == pytest.approx(((1 / 48) ** 0.5) / 3**0.5)
    assert (parallel["before"], parallel["after"]) == (pytest.approx(1 / 6), pytest.approx(7 / 12))
    # Turns of resolved episodes pair only the tasks resolved in both: a (6 -> 4) and c (5 -> 4).
    resolved_turns = changes["turns_resolved"]
    assert resolved_turns["tasks"] == 2 and resolved_turns["change"] == pytest.approx(-1.5)
    pass1 = pass1_change(before.resolved, 2, after.resolved, 2)
    assert (changes["pass@1"]["change"], changes["pass@1"]["standard_error"]) == pytest.approx(pass1)
    with pytest.raises(ValueError, match="1 in one only"):
        paired_changes(before.by_task, {k: v for k, v in after.by_task.items() if k != "c"})


@pytest.mark.parametrize(
    "backend",
    [
        "overture",
        pytest.param("vllm", marks=pytest.mark.skipif(
            not default_python().exists(), reason="vLLM's environment is not built: `make vllm-env`"
        )),
    ],
)  # fmt: skip
def test_eval_command_grades_every_episode_of_a_checkpoint(numbers_task_set, tmp_path, backend):
    _, tasks = numbers_task_set
    checkpoint = tmp_path / "checkpoint"
    # Widths vLLM's CPU kernels take as they are (multiples of 32; its attention has no head_dim 8).
    model = tiny_model_config(
        vocab_size=tokenizer().vocab_size, hidden_size=64, head_dim=32, moe_intermediate_size=32
    )
    save_pretrained(Transformer(model), checkpoint)
    tokenizer().save(checkpoint)
    task_file = write_tasks(tmp_path / "tasks.jsonl", [t for t in tasks if t.split == "train"][:2])
    out = tmp_path / "episodes.jsonl"
    result = CliRunner().invoke(app, [
        "eval", "configs/tiny.toml", "--checkpoint", str(checkpoint), "--tasks", str(task_file),
        "--split", "train", "--samples", "2", "--k", "1", "--k", "2", "--trajectories", str(out),
        "--set", "agent.max_turns=2", "--set", "agent.max_new_tokens=8", "--set", "agent.search_backend=bm25",
        "--set", f"engine.backend={backend}", "--set", "engine.kv_cache_tokens=16384",
    ])  # fmt: skip
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["tasks"] == 2 and summary["samples"] == 2
    assert set(summary["pass_at"]) == {"pass@1", "pass@2"}
    assert set(summary["times_resolved"]) == {"0", "1", "2"} and sum(summary["times_resolved"].values()) == 2
    assert sum(summary["statuses"].values()) == 4 and "failed" not in summary["statuses"]
    episodes = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(episodes) == 4
    assert all("resolution" in e["reward_info"] for e in episodes)  # graded (or said why not)


def test_eval_names_a_missing_task_file(tmp_path):
    missing, checkpoint = tmp_path / "nope.jsonl", tmp_path / "checkpoint"
    save_pretrained(Transformer(tiny_model_config(vocab_size=tokenizer().vocab_size)), checkpoint)
    tokenizer().save(checkpoint)
    result = CliRunner().invoke(app, ["eval", "configs/tiny.toml", "--checkpoint", str(checkpoint),
                                      "--tasks", str(missing)])  # fmt: skip
    assert result.exit_code == 2
    assert "no such task file" in " ".join(result.output.replace("│", " ").split())
