"""A run's own tokenizer: saved with a record of where it came from, read back on resume and
refused when the config now gives another (for SFT: `unit/supervised/test_sft.py`), and the only
one the viewer decodes the run with."""

from __future__ import annotations

import json

import pytest

from overture.config import RunConfig
from overture.rl.setup import run_tokenizer
from overture.rl.tokenizer_record import TOKENIZER_RECORD_FILE, TokenizerMismatch
from overture.text import corpus_sha256, train_default_tokenizer
from overture.viewer.run_data import find_tokenizer


def _config(tmp_path, **tokenizer) -> RunConfig:
    settings = {"output_dir": str(tmp_path), "tokenizer": {"vocab_size": 600, **tokenizer}}
    return RunConfig.model_validate(settings)


def test_a_new_run_saves_its_tokenizer_and_where_it_came_from(tmp_path):
    tokenizer = run_tokenizer(_config(tmp_path), tmp_path, resume=False)
    record = json.loads((tmp_path / TOKENIZER_RECORD_FILE).read_text())
    assert record == {
        "fingerprint": tokenizer.fingerprint, "vocab_size": tokenizer.vocab_size, "from": "corpus",
        "corpus": {"version": "v1", "sha256": corpus_sha256("v1")},
    }  # fmt: skip
    assert tokenizer.fingerprint == train_default_tokenizer(600).fingerprint
    named = run_tokenizer(_config(tmp_path / "b", path=str(tmp_path)), tmp_path / "b", resume=False)
    assert json.loads((tmp_path / "b" / TOKENIZER_RECORD_FILE).read_text())["from"] == "tokenizer.path"
    assert named.fingerprint == tokenizer.fingerprint


def test_a_resume_reads_the_runs_own_tokenizer_and_refuses_another(tmp_path):
    own = run_tokenizer(_config(tmp_path), tmp_path, resume=False)
    assert run_tokenizer(_config(tmp_path), tmp_path, resume=True).fingerprint == own.fingerprint
    with pytest.raises(TokenizerMismatch) as refused:
        run_tokenizer(_config(tmp_path, vocab_size=700), tmp_path, resume=True)
    message = str(refused.value)
    assert str(tmp_path / "tokenizer.json") in message and "the BPE of corpus v1, vocab_size 700" in message
    assert "resume under the run's own config.toml" in message


def test_the_viewer_decodes_only_with_the_runs_own_tokenizer(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    problems: list[str] = []
    assert find_tokenizer(run, _config(tmp_path), problems) is None  # never trained behind the run's back
    assert problems == ["tokenizer: none found; turns are shown as their recorded text"]

    own = run_tokenizer(_config(tmp_path), run, resume=False)
    problems = []
    assert find_tokenizer(run, _config(tmp_path), problems).fingerprint == own.fingerprint
    assert problems == []

    train_default_tokenizer(700).save(run)  # the saved file is no longer the one the run recorded
    found = find_tokenizer(run, _config(tmp_path), problems)
    assert found is None
    assert "is not the tokenizer the run recorded" in problems[0]
