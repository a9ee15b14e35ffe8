"""Demonstrations for supervised fine-tuning: the JSONL format, its reader, and a synthetic set.

One demonstration per line, a JSON object with a `messages` list in chat order:

    {"role": "system", "content": "...", "tools": [<JSON schema>, ...]}   (tools optional)
    {"role": "user", "content": "..."}
    {"role": "assistant", "content": "...", "tool_calls": [{"name": "...", "arguments": {...}}]}
    {"role": "tool", "content": "..."}     consecutive tool messages form one turn of results

An assistant message with `"train": false` is context, not a target: a turn the model sees
(e.g. an edit the tools refuse, which the next turn writes again) but is not taught to write.
Each is rendered through `overture.text.Conversation`, so its tokens are exactly what the
agent loop produces and the trained assistant bodies are the only tokens with loss mask 1.
`synthetic_demonstrations` makes a small tool-use set (read a file, report its line count)
for the tiny model, used when `sft.data` is unset and by the tests.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from overture.rl.samples import TrainingSample
from overture.text import Conversation, Tokenizer, ToolCall

ROLES = ("system", "user", "assistant", "tool")


class DemonstrationError(ValueError):
    """A demonstration that cannot be used; the message names the file, line and message."""


def read_demonstrations(path: str | Path) -> list[dict[str, Any]]:
    """Every demonstration of a JSONL file (blank lines skipped), each checked for shape."""
    path = Path(path)
    if not path.is_file():
        raise DemonstrationError(f"{path}: demonstrations file not found")
    records = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DemonstrationError(f"{path}:{number}: not valid JSON: {exc}") from None
        problem = demonstration_problem(record)
        if problem:
            raise DemonstrationError(f"{path}:{number}: {problem}")
        records.append(record)
    if not records:
        raise DemonstrationError(f"{path}: no demonstrations")
    return records


def demonstration_problem(record: Any) -> str | None:
    """What is wrong with one demonstration record, or None."""
    messages = record.get("messages") if isinstance(record, dict) else None
    if not isinstance(messages, list) or not messages:
        return "expected an object with a non-empty 'messages' list"
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if not isinstance(message, dict) or message.get("role") not in ROLES:
            return f"{where}: needs a 'role' of {', '.join(ROLES)}"
        if not isinstance(message.get("content", ""), str):
            return f"{where}: 'content' must be a string"
        if not isinstance(message.get("train", True), bool):
            return f"{where}: 'train' must be true or false"
        for call in message.get("tool_calls", []):
            if not isinstance(call, dict) or not isinstance(call.get("name"), str):
                return f"{where}: every tool call needs a 'name'"
            if not isinstance(call.get("arguments", {}), dict):
                return f"{where}: tool call arguments must be an object"
    if not any(m["role"] == "assistant" and m.get("train", True) for m in messages):
        return "no trained assistant message (nothing to learn from)"
    return None


def render_demonstration(tokenizer: Tokenizer, record: dict[str, Any]) -> Conversation:
    """The demonstration as a token-level conversation (trained assistant bodies carry loss mask 1)."""
    conversation = Conversation(tokenizer)
    pending_results: list[str] = []
    for message in record["messages"]:
        role, content = message["role"], message.get("content", "")
        if role == "tool":
            pending_results.append(content)
            continue
        if pending_results:
            conversation.add_tool_responses(pending_results)
            pending_results = []
        if role == "system":
            conversation.add_system(content, message.get("tools"))
        elif role == "user":
            conversation.add_user(content)
        else:
            calls = [ToolCall(c["name"], c.get("arguments", {})) for c in message.get("tool_calls", [])]
            conversation.add_assistant(content, calls, trained=message.get("train", True))
    if pending_results:
        conversation.add_tool_responses(pending_results)
    return conversation


def without_system(record: dict[str, Any]) -> dict[str, Any]:
    """The record with its system messages left out (the conversation from the user's task on)."""
    return {**record, "messages": [m for m in record["messages"] if m.get("role") != "system"]}


def without_untrained_turns(record: dict[str, Any]) -> dict[str, Any]:
    """The record without its untrained assistant messages and the tool results that answered
    them: the demonstration as if those turns had not happened (for uses that would otherwise
    learn every token, or read every call, of them)."""
    messages, skipping = [], False
    for message in record["messages"]:
        if message["role"] == "assistant":
            skipping = not message.get("train", True)
        elif message["role"] != "tool":
            skipping = False
        if not skipping:
            messages.append(message)
    return {**record, "messages": messages}


def demonstration_samples(
    tokenizer: Tokenizer, records: list[dict[str, Any]], max_tokens: int, source: str = "demonstrations"
) -> list[TrainingSample]:
    """Training samples of the records; one longer than `max_tokens` is an error naming it."""
    samples = []
    for index, record in enumerate(records):
        conversation = render_demonstration(tokenizer, record)
        if len(conversation) > max_tokens:
            raise DemonstrationError(
                f"{source}: demonstration {index} has {len(conversation)} tokens, more than "
                f"training.seq_len = {max_tokens}; raise it or shorten the demonstration"
            )
        samples.append(
            TrainingSample(
                token_ids=conversation.token_ids, loss_mask=conversation.loss_mask, name=f"{source}[{index}]"
            )
        )
    return samples


# ----------------------------------------------------------------------------- synthetic set

READ_FILE_TOOL = {
    "name": "read_file",
    "description": "Read a file of the workspace.",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
}
_DIRECTORIES = ("src", "lib", "tests", "tools", "app")
_STEMS = ("parser", "config", "utils", "cache", "server", "client", "models", "views", "tasks", "io")
_CODE = ("import os", "x = 1", "def f():", "    return x", "class A:", "    pass", "print(x)", "y = [x]")


def synthetic_demonstrations(count: int, seed: int = 0) -> list[dict[str, Any]]:
    """`count` demonstrations of one tool-use pattern: read the file asked about, report its length."""
    rng = random.Random(seed)
    records = []
    for _ in range(count):
        path = f"{rng.choice(_DIRECTORIES)}/{rng.choice(_STEMS)}.py"
        lines = [rng.choice(_CODE) for _ in range(rng.randint(1, 9))]
        listing = "\n".join(f"{n}|{line}" for n, line in enumerate(lines, 1))
        records.append(
            {
                "messages": [
                    {"role": "system", "content": "You are a coding agent.", "tools": [READ_FILE_TOOL]},
                    {"role": "user", "content": f"How many lines does {path} have?"},
                    {
                        "role": "assistant",
                        "content": "",
                        "tool_calls": [{"name": "read_file", "arguments": {"path": path}}],
                    },
                    {"role": "tool", "content": listing},
                    {"role": "assistant", "content": f"{path} has {len(lines)} lines."},
                ]
            }
        )
    return records
