"""Building what every training job starts from: the tokenizer and the policy a config names,
and the tokenizer a run keeps as its own.

A run saves its tokenizer in its directory (`tokenizer.json`) with `tokenizer_record.json`
(`overture.rl.tokenizer_record`): the tokenizer's fingerprint and where it came from — the frozen
corpus (version and SHA-256), or the directory it was read from. A resumed run reads its own
tokenizer back (checked against its record) and is refused when its config now gives another. A
run's token ids are never re-derived behind its back.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from overture.config import RunConfig
from overture.model import Transformer, load_pretrained
from overture.rl.tokenizer_record import TOKENIZER_RECORD_FILE, TokenizerMismatch, check_saved_tokenizer
from overture.text import Tokenizer, corpus_sha256, train_default_tokenizer
from overture.text.tokenizer import TOKENIZER_FILE


def tokenizer_directory(config: RunConfig) -> tuple[str, str] | None:
    """Where the config's tokenizer is read from — (`"tokenizer.path"`, it) when set, else
    (`"model.path"`, it) when that checkpoint holds one — or None: the default BPE is trained."""
    if config.tokenizer.path:
        return "tokenizer.path", config.tokenizer.path
    if config.model.path and (Path(config.model.path) / TOKENIZER_FILE).is_file():
        return "model.path", config.model.path
    return None


def load_tokenizer(config: RunConfig) -> Tokenizer:
    """The tokenizer of `tokenizer_directory`, or the byte-level BPE trained on the frozen corpus
    `tokenizer.corpus` (the same ids whatever version of the package trains it)."""
    directory = tokenizer_directory(config)
    if directory is not None:
        return Tokenizer.from_dir(directory[1])
    return train_default_tokenizer(config.tokenizer.vocab_size, config.tokenizer.corpus)


def tokenizer_record(config: RunConfig, tokenizer: Tokenizer) -> dict[str, Any]:
    """What a run records of its tokenizer (see the module docstring)."""
    record: dict[str, Any] = {"fingerprint": tokenizer.fingerprint, "vocab_size": tokenizer.vocab_size}
    directory = tokenizer_directory(config)
    if directory is not None:
        return {**record, "from": directory[0], "path": directory[1]}
    corpus = config.tokenizer.corpus
    return {**record, "from": "corpus", "corpus": {"version": corpus, "sha256": corpus_sha256(corpus)}}


def run_tokenizer(config: RunConfig, run_path: Path, resume: bool) -> Tokenizer:
    """The run's own tokenizer: a new run saves `load_tokenizer(config)` and its record in
    `run_path`; a resumed run that saved one reads it back, and is refused (`TokenizerMismatch`)
    when the config now gives another."""
    wanted = load_tokenizer(config)
    if resume and (run_path / TOKENIZER_FILE).is_file():
        own = check_saved_tokenizer(run_path)
        if own.fingerprint != wanted.fingerprint:
            raise TokenizerMismatch(
                f"{run_path / TOKENIZER_FILE}: the run's tokenizer (fingerprint {own.fingerprint[:12]}, "
                f"{own.vocab_size} ids) is not the one this config gives (fingerprint "
                f"{wanted.fingerprint[:12]}, {wanted.vocab_size} ids, {_described(config)}); resume "
                "under the run's own config.toml, with the overture (and corpus) it was made with, or "
                "start a new run"
            )
        return own
    wanted.save(run_path)
    record = tokenizer_record(config, wanted)
    (run_path / TOKENIZER_RECORD_FILE).write_text(json.dumps(record, indent=2) + "\n")
    return wanted


def _described(config: RunConfig) -> str:
    """Where the config's tokenizer comes from, in words."""
    directory = tokenizer_directory(config)
    if directory is not None:
        return " ".join(directory)
    return f"the BPE of corpus {config.tokenizer.corpus}, vocab_size {config.tokenizer.vocab_size}"


def build_model(config: RunConfig, tokenizer: Tokenizer, device: torch.device) -> Transformer:
    """The policy: loaded from `model.path`, or new from the model section; checked against the tokenizer."""
    dtype = getattr(torch, config.training.dtype)
    if config.model.path:
        model = load_pretrained(config.model.path, dtype=dtype)
    else:
        model = Transformer(config.model).to(dtype)
    if tokenizer.vocab_size > model.config.vocab_size:
        raise ValueError(
            f"tokenizer has {tokenizer.vocab_size} tokens but model.vocab_size is {model.config.vocab_size}"
        )
    return model.to(device)
