"""Building what every training job starts from: the tokenizer and the policy a config names."""

from __future__ import annotations

from pathlib import Path

import torch

from overture.config import RunConfig
from overture.model import Transformer, load_pretrained
from overture.text import Tokenizer, train_default_tokenizer
from overture.text.tokenizer import TOKENIZER_FILE


def load_tokenizer(config: RunConfig) -> Tokenizer:
    """`tokenizer.path` when set; else the tokenizer saved with the `model.path` checkpoint; else
    the byte-level BPE trained on the shipped corpus.

    The default BPE is trained on overture's own source, so another version of the package gives
    other token ids: a checkpoint is always read with the tokenizer it was trained with.
    """
    if config.tokenizer.path:
        return Tokenizer.from_dir(config.tokenizer.path)
    if config.model.path and (Path(config.model.path) / TOKENIZER_FILE).is_file():
        return Tokenizer.from_dir(config.model.path)
    return train_default_tokenizer(config.tokenizer.vocab_size, config.tokenizer.identifiers)


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
