"""The record a run keeps of its tokenizer, and reading a run's saved tokenizer against it.

A run directory (or checkpoint) holds `tokenizer.json` and `tokenizer_record.json`, whose
`fingerprint` is `Tokenizer.fingerprint` of the tokenizer the run trained with (`overture.rl.setup`
writes both). Readers — `--resume`, the viewer — take the saved tokenizer only when it is the one
recorded. This module imports no torch: the viewer reads runs without it.
"""

from __future__ import annotations

import json
from pathlib import Path

from overture.text import Tokenizer
from overture.text.tokenizer import TOKENIZER_FILE

TOKENIZER_RECORD_FILE = "tokenizer_record.json"


class TokenizerMismatch(ValueError):
    """A run whose own tokenizer is not the one asked for, or not the one it recorded."""


def check_saved_tokenizer(directory: Path) -> Tokenizer:
    """The tokenizer a run saved in `directory`, checked against its record when it has one;
    `TokenizerMismatch` when they differ."""
    tokenizer = Tokenizer.from_dir(directory)
    record_file = directory / TOKENIZER_RECORD_FILE
    if record_file.is_file():
        try:
            recorded = json.loads(record_file.read_text()).get("fingerprint")
        except (OSError, ValueError, AttributeError) as exc:
            raise TokenizerMismatch(f"{record_file}: not a tokenizer record: {exc}") from None
        if recorded != tokenizer.fingerprint:
            raise TokenizerMismatch(
                f"{directory / TOKENIZER_FILE} is not the tokenizer the run recorded "
                f"(fingerprint {tokenizer.fingerprint[:12]}, recorded {str(recorded)[:12]})"
            )
    return tokenizer
