"""Teacher-forced accuracy of tool calls: would the model write a demonstration's calls exactly?

Held-out loss says how likely a checkpoint finds demonstrations it did not train on; an agent's
call works only when every character of its arguments is right (an `old_string` one character
off is not found, an `offset` or `start_line` one digit off reads or edits other lines). So for
each call of each assistant turn the model is given the conversation up to each token (teacher
forcing), and an
argument counts as reproduced when the greedy choice is the demonstration's token at every
position of its value (a string's quotes included: knowing where to stop is part of copying).
A call counts as reproduced when every token of its JSON is. Per argument name (`path`,
`offset`, `pattern`, `start_line`, `new_string`, ...) and for `tool` (the tool's name) and `call` (the whole
call), the result is the share reproduced and how many there were.

A `search_replace`'s two strings differ where the fix is. `old_string@change` and
`new_string@change` score the one token of each that holds the first character where they
differ: copying the bug exactly (a model that knows the code may write it as it should be, not
as it is) and writing the fix.

This tells which skill a model lacks long before it solves a task: a model that picks the right
tool and path but never reproduces an `old_string` cannot copy from what it read.
"""

from __future__ import annotations

import bisect
import json
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import torch

from overture.model import Transformer
from overture.supervised.demonstrations import render_demonstration
from overture.text import Tokenizer, ToolCall
from overture.text.chat import TOOL_CALL_OPEN, assistant_body_pieces, call_json
from overture.text.conversation import encode_pieces

CALL = "call"
TOOL = "tool"
CHANGE = "@change"  # suffix of the edit strings' change-token entries
EDIT_STRINGS = ("old_string", "new_string")


def value_spans(call: ToolCall) -> tuple[str, list[tuple[str, int, int]]] | None:
    """The call's JSON text piece (`\\n{json}\\n`, as rendered) and the character span of the
    tool name (`tool`) and of each argument value in it; None when the rendered JSON is not the
    plain `json.dumps` layout (a marker string escaped inside an argument)."""
    parts = ['\n{"name": ']
    spans = []

    def value(label: str, item: Any) -> None:
        start = sum(len(part) for part in parts)
        parts.append(json.dumps(item, ensure_ascii=False))
        spans.append((label, start, start + len(parts[-1])))

    value(TOOL, call.name)
    parts.append(', "arguments": {')
    for index, (key, item) in enumerate(call.arguments.items()):
        parts.append((", " if index else "") + json.dumps(key, ensure_ascii=False) + ": ")
        value(key, item)
    parts.append("}}\n")
    text = "".join(parts)
    return (text, spans) if text == "\n" + call_json(call) + "\n" else None


def _token_ends(tokenizer: Tokenizer, ids: Sequence[int]) -> list[int]:
    """Character offset where each token of `ids` ends in their decoded text."""
    return [len(tokenizer.decode(ids[: n + 1])) for n in range(len(ids))]


def call_argument_accuracy(
    model: Transformer, tokenizer: Tokenizer, records: Sequence[dict[str, Any]]
) -> dict[str, dict[str, float | int]]:
    """{argument name, `tool` or `call`: {"exact": share reproduced, "count": how many}} over
    the calls of the demonstration `records` (sorted by name)."""
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    try:
        for record in records:
            conversation = render_demonstration(tokenizer, record)
            ids = conversation.token_ids
            with torch.no_grad():
                logits = model(torch.tensor([ids], device=device)).logits[0]
            predicted = [None, *logits[:-1].argmax(-1).tolist()]  # predicted[p]: the guess for ids[p]
            correct = [guess == actual for guess, actual in zip(predicted, ids, strict=True)]
            turns = [turn for turn in conversation.turns if turn.role == "assistant"]
            messages = [message for message in record["messages"] if message["role"] == "assistant"]
            for turn, message in zip(turns, messages, strict=True):
                if not message.get("train", True):  # shown, not taught: nothing to score
                    continue
                calls = [ToolCall(c["name"], c.get("arguments", {})) for c in message.get("tool_calls", [])]
                content = message.get("content", "")
                end = _score_turn(tokenizer, turn.body_start, content, calls, correct, counts)
                if end != turn.body_end:  # the pieces did not tokenize as the conversation did
                    where = f"assistant turn at token {turn.body_start}"
                    raise ValueError(f"{where}: its calls could not be located in the conversation")
    finally:
        model.train(was_training)
    return {name: {"exact": right / total, "count": total} for name, (right, total) in sorted(counts.items())}


def _score_turn(
    tokenizer: Tokenizer,
    body_start: int,
    content: str,
    calls: list[ToolCall],
    correct: list[bool],
    counts: dict[str, list[int]],
) -> int:
    """Count the calls of one assistant turn whose body starts at token `body_start`; return where
    the body ends. A call's JSON is the text piece after its `<tool_call>` marker; markers are
    tokens of their own, so the pieces before it give its position exactly."""
    pieces = assistant_body_pieces(content, calls)
    openings = [i + 1 for i, piece in enumerate(pieces) if piece.marker and piece.text == TOOL_CALL_OPEN]
    for index, call in zip(openings, calls, strict=True):
        position = body_start + len(encode_pieces(tokenizer, pieces[:index]))
        piece_ids = encode_pieces(tokenizer, [pieces[index]])
        counts[CALL][0] += all(correct[position : position + len(piece_ids)])
        counts[CALL][1] += 1
        rendered = value_spans(call)
        if rendered is None:
            continue
        ends = _token_ends(tokenizer, piece_ids)
        starts = [0, *ends[:-1]]
        for label, start, end in rendered[1]:
            tokens = [n for n in range(len(piece_ids)) if ends[n] > start and starts[n] < end]
            counts[label][0] += all(correct[position + n] for n in tokens)
            counts[label][1] += 1
        for label, at in _change_starts(call, rendered[1]).items():
            token = bisect.bisect_right(ends, at)  # the first token ending after `at`
            counts[label + CHANGE][0] += correct[position + token]
            counts[label + CHANGE][1] += 1
    return body_start + len(encode_pieces(tokenizer, pieces))


def _change_starts(call: ToolCall, spans: list[tuple[str, int, int]]) -> dict[str, int]:
    """For an edit with string `old_string` and `new_string`: the offset, in the call's JSON text,
    of the first character where each differs from the other (its closing quote when it is the
    other's prefix). Empty for other calls."""
    values = [call.arguments.get(name) for name in EDIT_STRINGS]
    if not all(isinstance(value, str) for value in values):
        return {}
    old, new = values
    differ = (i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b)
    first = next(differ, min(len(old), len(new)))
    opening = {label: start for label, start, _ in spans}
    # The JSON of a value's first characters ends with a closing quote where the next one goes.
    return {
        name: opening[name] + len(json.dumps(value[:first], ensure_ascii=False)) - 1
        for name, value in zip(EDIT_STRINGS, values, strict=True)
    }
