"""The `overture` command line: config inspection, the warm-up job, and clear errors."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from overture.cli.main import app
from overture.config import load_config
from overture.model import load_pretrained
from overture.rl.run_dir import read_metrics
from overture.text import Tokenizer

REPO = Path(__file__).resolve().parents[3]
runner = CliRunner()


def test_console_script_is_installed():
    script = Path(sys.executable).with_name("overture")
    found = str(script) if script.exists() else shutil.which("overture")
    assert found, "the overture console script is not installed"
    result = subprocess.run([found, "--help"], capture_output=True, text=True, check=True)
    assert "pretrain" in result.stdout


def test_config_show_resolves_overrides(tmp_path):
    result = runner.invoke(
        app, ["config", "show", str(REPO / "configs/tiny.toml"), "--set", "training.lr=0.5"]
    )
    assert result.exit_code == 0, result.output
    shown = tmp_path / "shown.toml"
    shown.write_text(result.stdout)
    assert load_config(shown).training.lr == 0.5


def test_bad_config_is_a_clear_error_not_a_traceback(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[model]\nnum_experts = 'eight'\n")
    result = runner.invoke(app, ["config", "show", str(bad)])
    assert result.exit_code == 2
    assert f"{bad}: model.num_experts" in result.output
    assert "Traceback" not in result.output


@pytest.fixture(scope="module")
def pretrain_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs")
    args = [
        "pretrain",
        str(REPO / "configs/pretrain_tiny.toml"),
        "--set",
        f"output_dir={out}",
        "--set",
        "name=smoke",
        "--set",
        "training.steps=80",
        "--set",
        "training.batch_size=8",
        "--set",
        "training.seq_len=64",
        "--set",
        "training.warmup_steps=5",
        "--set",
        "tokenizer.vocab_size=1024",
        "--set",
        "model.vocab_size=1024",
        "--set",
        "model.balance_bias=true",
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return out / "smoke", json.loads(result.stdout.strip().splitlines()[-1]), args


def test_pretrain_learns_and_writes_a_complete_run_directory(pretrain_run):
    run_dir, summary, _ = pretrain_run
    assert summary["final_val_loss"] < summary["initial_val_loss"] - 0.7
    assert {"config.toml", "metrics.jsonl", "tb", "checkpoints", "trajectories"} <= {
        p.name for p in run_dir.iterdir()
    }
    assert load_config(run_dir / "config.toml").training.steps == 80
    metrics = read_metrics(run_dir)
    assert metrics[0]["step"] == 0 and "val_loss" in metrics[0]
    assert [m["step"] for m in metrics if "loss" in m] == list(range(10, 81, 10))
    assert any(p.name.startswith("events.out.tfevents") for p in (run_dir / "tb").iterdir())


def test_pretrain_checkpoint_reloads_with_its_tokenizer(pretrain_run):
    run_dir, summary, _ = pretrain_run
    checkpoint = run_dir / "checkpoints" / "final"
    assert summary["reload_max_logit_difference"] == 0.0
    model = load_pretrained(checkpoint)
    tokenizer = Tokenizer.from_dir(checkpoint)
    assert model.config.balance_bias
    assert tokenizer.vocab_size <= model.config.vocab_size
    assert summary["sample"].startswith("def ")


def test_pretrain_refuses_to_overwrite_a_run(pretrain_run):
    run_dir, _, args = pretrain_run
    before = (run_dir / "metrics.jsonl").read_text()
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert "run directory exists" in result.output
    assert (run_dir / "metrics.jsonl").read_text() == before
