"""The token-level conversation: an append-only token list with per-token training labels.

`Conversation` turns chat-format pieces (see `chat.py`) into token ids once, as each turn
arrives, and never re-renders or re-tokenizes history. Alongside the ids it keeps

- `loss_mask`: 1 exactly where the policy produced the token,
- `logprobs`: the behaviour log-probability of each policy token (0.0 elsewhere),
- `versions`: the policy version that produced each policy token (-1 elsewhere).

Markers (`<|im_start|>`, `<tool_call>`, ...) are inserted by id; everything else goes through
`Tokenizer.encode`, which treats special-token strings as plain text, so content cannot forge
a turn. Decoding all ids gives the text `chat.py` renders for the same turns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from overture.text.chat import (
    TURN_SEPARATOR,
    Piece,
    assistant_body_pieces,
    assistant_header_pieces,
    split_markers,
    system_pieces,
    tool_response_pieces,
    user_pieces,
)
from overture.text.tokenizer import Tokenizer
from overture.text.tool_calls import ToolCall

NOT_POLICY_VERSION = -1


class ConversationError(ValueError):
    """A turn was added out of order (e.g. a user turn inside an open assistant turn)."""


@dataclass
class Turn:
    """Where one turn lies in the token list: `token_ids[start:end]`.

    For an assistant turn, `body_start:body_end` are the policy's tokens (the header before
    and the template tokens after excluded). `end` and `body_end` are None while it is open.
    """

    role: str  # "system", "user", "assistant" or "tool"
    start: int
    end: int | None = None
    body_start: int | None = None
    body_end: int | None = None


class Conversation:
    """An append-only token list of chat turns with loss mask, logprobs and versions."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer
        self.token_ids: list[int] = []
        self.loss_mask: list[int] = []
        self.logprobs: list[float] = []
        self.versions: list[int] = []
        self.turns: list[Turn] = []
        self._open: Turn | None = None
        self._assistant_header: list[int] | None = None

    # ----------------------------------------------------------------- non-policy turns

    def add_system(self, text: str, tools: Sequence[dict[str, Any]] | None = None) -> None:
        """Append a system turn; `tools` (JSON schemas) are listed in it."""
        self._add_template_turn("system", system_pieces(text, tools))

    def add_user(self, text: str) -> None:
        self._add_template_turn("user", user_pieces(text))

    def add_tool_responses(self, results: Sequence[str]) -> None:
        """Append one user turn with a `<tool_response>` per result, in call order."""
        self._add_template_turn("tool", tool_response_pieces(results))

    def _add_template_turn(self, role: str, pieces: Sequence[Piece]) -> None:
        self._require_closed(f"add a {role} turn")
        turn = Turn(role=role, start=len(self.token_ids))
        self._append_template(self._piece_ids(pieces))
        turn.end = len(self.token_ids)
        self.turns.append(turn)

    # ----------------------------------------------------------------- assistant turns

    @property
    def assistant_header_ids(self) -> list[int]:
        """The ids `begin_assistant` appends before the first policy token (encoded once)."""
        if self._assistant_header is None:
            self._assistant_header = self._piece_ids(assistant_header_pieces())
        return self._assistant_header

    def begin_assistant(self) -> list[int]:
        """Open an assistant turn; return all ids so far, the prompt to generate from."""
        self._require_closed("begin an assistant turn")
        turn = Turn(role="assistant", start=len(self.token_ids))
        self._append_template(self.assistant_header_ids)
        turn.body_start = len(self.token_ids)
        self.turns.append(turn)
        self._open = turn
        return list(self.token_ids)

    def add_policy_tokens(
        self,
        ids: Sequence[int],
        logprobs: Sequence[float] | None = None,
        version: int = 0,
    ) -> None:
        """Append tokens the policy sampled (loss mask 1) in the open assistant turn.

        May be called several times per turn, e.g. when a generation aborted under one
        policy version is resumed under the next.
        """
        if self._open is None:
            raise ConversationError("add_policy_tokens needs an open assistant turn (call begin_assistant)")
        if logprobs is not None and len(logprobs) != len(ids):
            raise ValueError(f"got {len(ids)} token ids but {len(logprobs)} logprobs")
        if version < 0:
            raise ValueError(f"policy version must be >= 0, got {version}")
        self.token_ids.extend(int(i) for i in ids)
        self.loss_mask.extend([1] * len(ids))
        self.logprobs.extend([float(p) for p in logprobs] if logprobs is not None else [0.0] * len(ids))
        self.versions.extend([version] * len(ids))

    def end_assistant(self) -> bool:
        """Close the open assistant turn; return True when it was cut off.

        A turn whose last policy token is not `<|im_end|>` was truncated: `<|im_end|>` is
        appended with loss mask 0 (the policy did not choose to stop). Then the template
        newline follows, also mask 0.
        """
        turn = self._open
        if turn is None:
            raise ConversationError("end_assistant without an open assistant turn")
        assert turn.body_start is not None
        turn.body_end = len(self.token_ids)
        truncated = turn.body_end == turn.body_start or self.token_ids[-1] != self.tokenizer.im_end_id
        ends = [self.tokenizer.im_end_id] if truncated else []
        self._append_template(ends + self.tokenizer.encode(TURN_SEPARATOR))
        turn.end = len(self.token_ids)
        self._open = None
        return truncated

    def add_assistant(
        self,
        content: str,
        calls: Sequence[ToolCall] = (),
        version: int = 0,
        trained: bool = True,
    ) -> None:
        """Append a whole assistant turn from known text (e.g. supervised data).

        The body, `<|im_end|>` included, counts as the policy's (mask 1, logprob 0.0); with
        `trained` False it is context only (mask 0): a turn to show but not to learn to write,
        such as a demonstration's edit that the tools refuse before the right one.
        """
        self.begin_assistant()
        body = self._piece_ids(assistant_body_pieces(content, calls))
        if trained:
            self.add_policy_tokens(body, version=version)
        else:
            self._append_template(body)
        self.end_assistant()

    def assistant_text(self, turn: int = -1) -> str:
        """Decoded policy tokens of an assistant turn (counted among assistant turns only)."""
        spans = [t for t in self.turns if t.role == "assistant"]
        if not spans:
            raise IndexError("the conversation has no assistant turn")
        try:
            chosen = spans[turn]
        except IndexError:
            raise IndexError(f"assistant turn {turn} out of range ({len(spans)} assistant turns)") from None
        end = chosen.body_end if chosen.body_end is not None else len(self.token_ids)
        return self.tokenizer.decode(self.token_ids[chosen.body_start : end])

    # ----------------------------------------------------------------- views

    def __len__(self) -> int:
        return len(self.token_ids)

    @property
    def policy_token_count(self) -> int:
        return sum(self.loss_mask)

    @property
    def assistant_turn_count(self) -> int:
        return sum(1 for t in self.turns if t.role == "assistant")

    @property
    def in_assistant_turn(self) -> bool:
        return self._open is not None

    def text(self) -> str:
        """The whole conversation decoded."""
        return self.tokenizer.decode(self.token_ids)

    # ----------------------------------------------------------------- internals

    def _require_closed(self, action: str) -> None:
        if self._open is not None:
            raise ConversationError(f"cannot {action} while an assistant turn is open (call end_assistant)")

    def _append_template(self, ids: Sequence[int]) -> None:
        self.token_ids.extend(ids)
        self.loss_mask.extend([0] * len(ids))
        self.logprobs.extend([0.0] * len(ids))
        self.versions.extend([NOT_POLICY_VERSION] * len(ids))

    def _piece_ids(self, pieces: Sequence[Piece]) -> list[int]:
        return encode_pieces(self.tokenizer, pieces)


def encode_pieces(tokenizer: Tokenizer, pieces: Sequence[Piece]) -> list[int]:
    """Ids of pieces: markers by id, runs of adjacent text encoded together."""
    ids: list[int] = []
    pending: list[str] = []
    for piece in pieces:
        if not piece.marker:
            pending.append(piece.text)
            continue
        if pending:
            ids += tokenizer.encode("".join(pending))
            pending = []
        ids += _marker_ids(tokenizer, piece.text)
    if pending:
        ids += tokenizer.encode("".join(pending))
    return ids


def encode_written(tokenizer: Tokenizer, text: str) -> list[int]:
    """Ids of text as a model writes it: the format's marker strings by id, the rest as content."""
    return encode_pieces(tokenizer, split_markers(text))


def _marker_ids(tokenizer: Tokenizer, marker: str) -> list[int]:
    # An external tokenizer may lack an optional marker (`<tool_response>` in older Qwen
    # vocabularies); it is then spelled out as text, which decodes the same.
    found = tokenizer.find_token_id(marker)
    return [found] if found is not None else tokenizer.encode(marker)
