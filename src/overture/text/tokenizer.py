"""The tokenizer: a thin wrapper over the `tokenizers` library's byte-level BPE.

`Tokenizer` loads a `tokenizer.json` (ours or an external one such as Qwen's), trains a new
byte-level BPE with the chat-format special tokens, saves a directory that Hugging Face
`transformers` loads as well, and encodes *content*: text in which special-token strings are
ordinary characters. Template markers are never produced by `encode`; the conversation builder
inserts them by id, so hostile content cannot forge a turn boundary or a tool call.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import tokenizers
from tokenizers import decoders, models, pre_tokenizers, trainers

from overture.text.chat_template import CHAT_TEMPLATE
from overture.text.markers import ENDOFTEXT, IM_END, IM_START, REQUIRED_TOKENS, SPECIAL_TOKENS

TOKENIZER_FILE = "tokenizer.json"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
DEFAULT_MODEL_MAX_LENGTH = 32768


class TokenizerError(ValueError):
    """A tokenizer file is missing or unusable, or a token is not in the vocabulary."""


class Tokenizer:
    """Byte-level BPE tokenizer with the chat-format special tokens.

    Build one with `from_dir` or `train`; the constructor takes an already loaded
    `tokenizers.Tokenizer` and checks it has the tokens the chat format needs.
    """

    def __init__(self, backend: tokenizers.Tokenizer, source: str = "<in memory>") -> None:
        self._backend = backend
        self._source = source
        _check_required_tokens(backend, source)
        self._encoder = _content_encoder(backend)
        self._im_start_id = self.token_id(IM_START)
        self._im_end_id = self.token_id(IM_END)

    # ----------------------------------------------------------------- construction

    @classmethod
    def from_dir(cls, path: str | Path) -> Tokenizer:
        """Load `path/tokenizer.json` (`path` may also name the JSON file itself)."""
        path = Path(path)
        file = path if path.suffix == ".json" and not path.is_dir() else path / TOKENIZER_FILE
        text = _read_tokenizer_file(file)
        try:
            backend = tokenizers.Tokenizer.from_str(text)
        except Exception as exc:  # the library raises a bare Exception with a serde message
            raise TokenizerError(f"{file}: not a valid tokenizer.json: {exc}") from None
        return cls(backend, source=str(file))

    @classmethod
    def train(
        cls, texts: Iterable[str], vocab_size: int, min_frequency: int = 2
    ) -> Tokenizer:
        """Train a byte-level BPE (GPT-2's pre-tokenizing split) on `texts`; the special tokens get
        ids 0..len(SPECIAL_TOKENS)-1.

        Same texts and arguments give the same tokenizer.
        """
        floor = len(SPECIAL_TOKENS) + len(pre_tokenizers.ByteLevel.alphabet())
        if vocab_size < floor:
            raise ValueError(f"vocab_size must be at least {floor} (special tokens + 256 bytes)")
        backend = tokenizers.Tokenizer(models.BPE())
        backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        backend.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            min_frequency=min_frequency,
            special_tokens=list(SPECIAL_TOKENS),
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )
        backend.train_from_iterator(texts, trainer=trainer)
        return cls(backend, source="<trained>")

    def save(self, directory: str | Path, model_max_length: int = DEFAULT_MODEL_MAX_LENGTH) -> Path:
        """Write `tokenizer.json` and `tokenizer_config.json` into `directory`; return it."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self._backend.save(str(directory / TOKENIZER_FILE))
        config = self._transformers_config(model_max_length)
        (directory / TOKENIZER_CONFIG_FILE).write_text(json.dumps(config, indent=2) + "\n")
        return directory

    def _transformers_config(self, model_max_length: int) -> dict[str, Any]:
        has_endoftext = self._backend.token_to_id(ENDOFTEXT) is not None
        return {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "bos_token": None,
            "eos_token": IM_END,
            "pad_token": ENDOFTEXT if has_endoftext else IM_END,
            "model_max_length": model_max_length,
            "clean_up_tokenization_spaces": False,
            "add_prefix_space": False,
            "chat_template": CHAT_TEMPLATE,
        }

    # ----------------------------------------------------------------- encode / decode

    def encode(self, text: str) -> list[int]:
        """Ids of `text` as content: special-token strings in it become ordinary tokens."""
        return self._encoder.encode(text, add_special_tokens=False).ids

    def decode(self, ids: Sequence[int]) -> str:
        """Text of `ids`, special tokens kept as their strings."""
        size = self.vocab_size
        bad = [i for i in ids if not 0 <= i < size]
        if bad:
            raise TokenizerError(f"token ids out of range 0..{size - 1}: {bad[:5]}")
        return self._backend.decode(list(ids), skip_special_tokens=False)

    def token_id(self, token: str) -> int:
        """The id of the single token `token`."""
        found = self._backend.token_to_id(token)
        if found is None:
            raise TokenizerError(f"token {token!r} is not in the vocabulary of {self._source}")
        return found

    def find_token_id(self, token: str) -> int | None:
        """The id of the single token `token`, or None when the vocabulary lacks it."""
        return self._backend.token_to_id(token)

    def id_to_token(self, token_id: int) -> str:
        """The vocabulary entry of `token_id` (byte-level form for ordinary tokens)."""
        token = self._backend.id_to_token(token_id)
        if token is None:
            raise TokenizerError(f"token id {token_id} is not in the vocabulary of {self._source}")
        return token

    # ----------------------------------------------------------------- properties

    @property
    def vocab_size(self) -> int:
        """Number of ids, added tokens included."""
        return self._backend.get_vocab_size(with_added_tokens=True)

    @property
    def fingerprint(self) -> str:
        """SHA-256 of what decides the ids — the model's kind, vocabulary and merges, the added
        tokens, the normalizer and pre-tokenizer — in a canonical form: equal for tokenizers that
        give the same ids however they were made (trained, read from a file) and whichever
        `tokenizers` release wrote their JSON (merges were "a b" strings before 0.20, pairs since)."""
        data = json.loads(self._backend.to_str())
        model = data["model"]
        merges = [" ".join(merge) if isinstance(merge, list) else merge for merge in model.get("merges", [])]
        canonical = {
            "type": model.get("type"),
            "vocab": sorted(model.get("vocab", {}).items(), key=lambda item: item[1]),
            "merges": merges,
            "added": sorted((token["id"], token["content"]) for token in data.get("added_tokens", [])),
            "normalizer": data.get("normalizer"),
            "pre_tokenizer": data.get("pre_tokenizer"),
        }
        return hashlib.sha256(json.dumps(canonical, sort_keys=True).encode()).hexdigest()

    @property
    def im_start_id(self) -> int:
        return self._im_start_id

    @property
    def im_end_id(self) -> int:
        return self._im_end_id

    @property
    def endoftext_id(self) -> int:
        """The document separator, also the padding token."""
        return self.token_id(ENDOFTEXT)

    @property
    def source(self) -> str:
        """Where this tokenizer came from: a file path, `<trained>` or `<in memory>`."""
        return self._source

    @property
    def backend(self) -> tokenizers.Tokenizer:
        """The wrapped `tokenizers.Tokenizer` (do not mutate)."""
        return self._backend

    def __repr__(self) -> str:
        return f"Tokenizer(vocab_size={self.vocab_size}, source={self._source!r})"


def _read_tokenizer_file(file: Path) -> str:
    """The text of a tokenizer.json, checked to be a JSON object."""
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TokenizerError(f"{file}: no such file (expected a tokenizer.json)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TokenizerError(f"{file}: cannot read: {exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TokenizerError(f"{file}: corrupt JSON: {exc}") from None
    if not isinstance(data, dict) or "model" not in data:
        raise TokenizerError(f'{file}: not a tokenizer.json (no top-level "model" object)')
    return text


def _check_required_tokens(backend: tokenizers.Tokenizer, source: str) -> None:
    missing = [t for t in REQUIRED_TOKENS if backend.token_to_id(t) is None]
    if missing:
        raise TokenizerError(
            f"{source}: missing required special token(s) {', '.join(missing)}; "
            "the chat format needs each as a single token"
        )


def _content_encoder(backend: tokenizers.Tokenizer) -> tokenizers.Tokenizer:
    """A copy of `backend` that never matches added tokens in the input.

    `encode_special_tokens` only disables matching of tokens flagged special, and external
    tokenizers (Qwen's, for one) flag `<tool_call>` and friends as non-special; so the copy
    flags every added token special first. Flags do not change how plain text is split.
    """
    data = json.loads(backend.to_str())
    for added in data.get("added_tokens") or []:
        added["special"] = True
    encoder = tokenizers.Tokenizer.from_str(json.dumps(data))
    encoder.encode_special_tokens = True
    encoder.no_truncation()
    encoder.no_padding()
    return encoder
