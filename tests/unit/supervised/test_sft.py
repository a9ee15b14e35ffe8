"""Supervised warm start: demonstrations render with loss on the policy's tokens only, SFT lowers
held-out loss, stops early, resumes exactly, and bad demonstration files name the culprit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import tiny_model_config
from typer.testing import CliRunner

from overture.cli.main import app
from overture.config import RunConfig, save_config
from overture.rl.run_dir import read_metrics
from overture.rl.setup import load_tokenizer
from overture.rl.tokenizer_record import TokenizerMismatch
from overture.supervised.demonstrations import (
    DemonstrationError,
    read_demonstrations,
    render_demonstration,
    synthetic_demonstrations,
    without_untrained_turns,
)
from overture.supervised.sft import DataOrder, sft
from overture.text import Tokenizer, train_default_tokenizer

VOCAB = 1024


def sft_config(tmp_path: Path, name: str = "sft", **training) -> RunConfig:
    return RunConfig.model_validate(
        {
            "name": name,
            "output_dir": str(tmp_path),
            "model": tiny_model_config(vocab_size=VOCAB).model_dump(),
            "tokenizer": {"vocab_size": VOCAB},
            "training": {
                "steps": 24,
                "batch_size": 6,
                "seq_len": 512,
                "lr": 1e-2,
                "warmup_steps": 2,
                "log_every": 4,
                **training,
            },
            "sft": {"synthetic_count": 40, "val_fraction": 0.2, "eval_every": 8, "patience": 5},
        }
    )


def quiet(_: str) -> None:
    pass


def test_loss_mask_covers_exactly_the_assistant_bodies():
    tokenizer = train_default_tokenizer(VOCAB)
    record = synthetic_demonstrations(1, seed=3)[0]
    conversation = render_demonstration(tokenizer, record)
    policy_ids = [t for t, m in zip(conversation.token_ids, conversation.loss_mask, strict=True) if m]
    text = tokenizer.decode(policy_ids)
    answer = record["messages"][-1]["content"]
    assert text.startswith("<tool_call>") and text.endswith(answer + "<|im_end|>")
    assert "How many lines" not in text and "You are a coding agent" not in text
    assert conversation.assistant_turn_count == 2


def test_an_untrained_turn_is_context_only_and_can_be_left_out():
    """A turn marked `"train": false` renders the same tokens with loss mask 0; without it (and
    the results that answered it) the demonstration is as if it had not happened."""
    tokenizer = train_default_tokenizer(VOCAB)
    record = synthetic_demonstrations(1, seed=3)[0]
    system, user, call, result, answer = record["messages"]
    wrong = {**call, "tool_calls": [{"name": "read_file", "arguments": {"path": "nope.py"}}], "train": False}
    shown = {**record, "messages": [system, user, wrong, {"role": "tool", "content": "Error: no such file"},
                                    call, result, answer]}  # fmt: skip
    conversation = render_demonstration(tokenizer, shown)
    turns = [turn for turn in conversation.turns if turn.role == "assistant"]
    assert conversation.assistant_turn_count == 3
    assert not any(conversation.loss_mask[turns[0].start : turns[0].end])
    assert all(conversation.loss_mask[turns[1].body_start : turns[1].body_end])
    plain = render_demonstration(tokenizer, record)
    assert sum(conversation.loss_mask) == sum(plain.loss_mask)
    assert "nope.py" in tokenizer.decode(conversation.token_ids)
    assert without_untrained_turns(shown) == record


def test_a_checkpoint_is_read_with_the_tokenizer_saved_beside_it(tmp_path):
    # Another version of the package trains another default BPE; the checkpoint's own must win.
    other = Tokenizer.train(["def other_corpus(x):\n    return x + 1\n" * 50], vocab_size=400)
    other.save(tmp_path / "checkpoint")
    config = sft_config(tmp_path)
    assert load_tokenizer(config).vocab_size == VOCAB  # from scratch: the default BPE
    config.model.path = str(tmp_path / "checkpoint")
    assert load_tokenizer(config).vocab_size == other.vocab_size
    assert load_tokenizer(config).encode("return x") == other.encode("return x")


def test_sft_lowers_held_out_loss_and_writes_best_and_final(tmp_path):
    summary = sft(sft_config(tmp_path), echo=quiet)
    assert summary["best_val_loss"] < summary["initial_val_loss"] - 1.0
    assert summary["steps"] == 24 and not summary["stopped_early"]
    for key in ("best", "final"):
        assert (Path(summary[key]) / "tokenizer.json").is_file()
    records = read_metrics(summary["run_dir"])
    assert [r["step"] for r in records if "val_loss" in r] == [0, 8, 16, 24]


def test_sft_stops_when_held_out_loss_stops_improving(tmp_path):
    config = sft_config(tmp_path, steps=40)
    config.sft.eval_every, config.sft.patience, config.sft.min_delta = 2, 1, 100.0
    summary = sft(config, echo=quiet)
    # the first evaluation is always a new best; the next cannot beat it by 100
    assert summary["stopped_early"] and summary["steps"] == 4 and summary["best_step"] == 2


def test_interrupted_and_resumed_sft_matches_an_uninterrupted_run(tmp_path):
    whole = sft(sft_config(tmp_path, name="whole", steps=8, checkpoint_every=3), echo=quiet)
    part = sft(sft_config(tmp_path, name="part", steps=8, checkpoint_every=3), until_step=5, echo=quiet)
    assert part["steps"] == 5 and part["final"] is None
    resumed = sft(sft_config(tmp_path, name="part", steps=8, checkpoint_every=3), resume=True, echo=quiet)
    assert resumed["steps"] == 8

    def losses(summary) -> dict[int, float]:
        return {r["step"]: r["loss"] for r in read_metrics(summary["run_dir"]) if "loss" in r}

    expected, got = losses(whole), losses(resumed)
    assert sorted(got) == sorted(expected) == [4, 8]
    assert got[8] == pytest.approx(expected[8], rel=1e-6)
    assert resumed["best_val_loss"] == pytest.approx(whole["best_val_loss"], rel=1e-6)


def test_data_order_resumes_from_its_position():
    order = DataOrder(size=5, seed=2)
    first = order.take(7)
    again = DataOrder(5, 2, **order.position())
    assert sorted(first[:5]) == list(range(5))
    assert again.take(6) == order.take(6)


@pytest.mark.parametrize(
    "line, message",
    [
        ("{not json", r"demos\.jsonl:2: not valid JSON"),
        ('{"messages": []}', r"demos\.jsonl:2: expected an object with a non-empty 'messages' list"),
        ('{"messages": [{"role": "bot", "content": "x"}]}', r":2: messages\[0\]: needs a 'role'"),
        ('{"messages": [{"role": "user", "content": "x"}]}', r":2: no trained assistant message"),
        (
            '{"messages": [{"role": "assistant", "content": "x", "train": false}]}',
            r":2: no trained assistant message",
        ),
        (
            '{"messages": [{"role": "assistant", "content": "x", "train": 0}]}',
            r"'train' must be true or false",
        ),
        (
            '{"messages": [{"role": "assistant", "tool_calls": [{"arguments": {}}]}]}',
            r":2: messages\[0\]: every tool call needs a 'name'",
        ),
    ],
)
def test_bad_demonstration_lines_name_the_file_and_line(tmp_path, line, message):
    path = tmp_path / "demos.jsonl"
    path.write_text(json.dumps(synthetic_demonstrations(1)[0]) + "\n" + line + "\n")
    with pytest.raises(DemonstrationError, match=message):
        read_demonstrations(path)


def test_sft_command_runs_and_reports_bad_data(tmp_path):
    demos = tmp_path / "demos.jsonl"
    demos.write_text("\n".join(json.dumps(r) for r in synthetic_demonstrations(12)))
    config = sft_config(tmp_path, steps=2)
    config.sft.data = str(demos)
    path = tmp_path / "sft.toml"
    save_config(config, path)
    runner = CliRunner()
    result = runner.invoke(app, ["sft", str(path)])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout.strip().splitlines()[-1])["steps"] == 2

    too_short = runner.invoke(app, ["sft", str(path), "--set", "training.seq_len=64", "--set", "name=short"])
    assert too_short.exit_code == 2
    assert "more than training.seq_len = 64" in too_short.output
    missing = runner.invoke(app, ["sft", str(path), "--set", "sft.data=nowhere.jsonl", "--set", "name=x"])
    assert missing.exit_code == 2 and "nowhere.jsonl: demonstrations file not found" in missing.output


def test_a_resumed_sft_run_under_another_tokenizer_is_refused_before_training(tmp_path):
    sft(sft_config(tmp_path, steps=4), until_step=2, echo=quiet)
    metrics = (tmp_path / "sft" / "metrics.jsonl").read_text()
    other = sft_config(tmp_path, steps=4).model_copy(deep=True)
    other.tokenizer.vocab_size += 64
    with pytest.raises(TokenizerMismatch, match="is not the one this config gives"):
        sft(other, resume=True, echo=quiet)
    assert (tmp_path / "sft" / "metrics.jsonl").read_text() == metrics  # nothing of the run was touched
