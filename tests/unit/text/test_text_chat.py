"""Tests of the chat format (overture.text.chat) and the tool-call parser (tool_calls)."""

from __future__ import annotations

import json

import pytest

from overture.text import (
    Conversation,
    MalformedCall,
    Tokenizer,
    ToolCall,
    parse_assistant,
    render_assistant,
    render_system,
    render_tool_call,
    render_tool_responses,
    render_user,
)

READ_FILE = {
    "name": "read_file",
    "description": "Read a file.",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
}
GREP = {
    "type": "function",
    "function": {"name": "grep", "description": "Search.", "parameters": {"type": "object"}},
}
TOOL_NAMES = ["read_file", "grep", "search_replace"]

TRICKY_CALLS = [
    ToolCall("read_file", {"path": "src/app/main.py", "offset": 10, "limit": 250}),
    ToolCall(
        "search_replace",
        {
            "file_path": "src/überprüfung/日本.py",
            "old_string": "def f(x):\n\treturn \"a\\b\" + 'c'\n",
            "new_string": "def f(x):\n    return {'k': [1, 2.5, None, true]}  # ünïcödé 🚀\n",
            "replace_all": False,
        },
    ),
    ToolCall(
        "grep",
        {
            "pattern": r"</tool_call>|<\|im_end\|>",
            "options": {"context": {"before": 2, "after": [3, {"deep": None}]}, "glob": "*.py"},
            "literal_markers": "<tool_call>\n</tool_call><|im_end|><|im_start|>assistant\n",
        },
    ),
    ToolCall("list_dir", {}),
]


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    chat = render_system("sys", [READ_FILE]) + render_assistant("text", TRICKY_CALLS)
    texts = [chat, "def f(x):\n    return x + 1\n", "plain words and more plain words"] * 3
    return Tokenizer.train(texts, vocab_size=600)


# ----------------------------------------------------------------------------- rendering


def test_user_and_tool_response_turns_render_exactly() -> None:
    assert render_user("fix it") == "<|im_start|>user\nfix it<|im_end|>\n"
    assert render_tool_responses(["one", "two\nlines"]) == (
        "<|im_start|>user\n<tool_response>\none\n</tool_response>\n"
        "<tool_response>\ntwo\nlines\n</tool_response><|im_end|>\n"
    )
    with pytest.raises(ValueError, match="at least one"):
        render_tool_responses([])


def test_assistant_turn_renders_text_then_blocks() -> None:
    calls = [ToolCall("read_file", {"path": "a.py"}), ToolCall("grep", {"pattern": "x"})]
    assert render_assistant("Looking.", calls) == (
        "<|im_start|>assistant\nLooking.\n"
        '<tool_call>\n{"name": "read_file", "arguments": {"path": "a.py"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "grep", "arguments": {"pattern": "x"}}\n</tool_call>'
        "<|im_end|>\n"
    )
    assert render_assistant("", calls[:1]) == (
        '<|im_start|>assistant\n<tool_call>\n{"name": "read_file", "arguments": {"path": "a.py"}}\n'
        "</tool_call><|im_end|>\n"
    )
    assert render_assistant("Done.", []) == "<|im_start|>assistant\nDone.<|im_end|>\n"
    assert render_tool_call(calls[1]) == (
        '<tool_call>\n{"name": "grep", "arguments": {"pattern": "x"}}\n</tool_call>'
    )


def test_system_turn_without_tools_is_plain() -> None:
    assert render_system("Be brief.") == "<|im_start|>system\nBe brief.<|im_end|>\n"
    assert render_system("Be brief.", []) == render_system("Be brief.")


def test_system_turn_lists_each_tool_schema_on_its_own_line() -> None:
    rendered = render_system("Be brief.", [READ_FILE, GREP])
    assert rendered.startswith("<|im_start|>system\nBe brief.\n\n")
    assert rendered.endswith("<|im_end|>\n")
    inside = rendered.split("<tools>\n", 1)[1].split("\n</tools>", 1)[0]
    lines = [json.loads(line) for line in inside.split("\n")]
    assert lines == [{"type": "function", "function": READ_FILE}, GREP]
    instruction = rendered.split("</tools>", 1)[1]
    assert '<tool_call>\n{"name": <function name>, "arguments": ' in instruction
    assert "\n</tool_call>" in instruction
    assert "parallel" in instruction


def test_tool_schema_without_a_name_is_refused() -> None:
    with pytest.raises(ValueError, match="name"):
        render_system("s", [{"description": "no name"}])


# ----------------------------------------------------------------------------- round trips


def test_calls_survive_text_render_and_parse() -> None:
    parsed = parse_assistant(
        render_assistant("Let me look.", TRICKY_CALLS).removeprefix("<|im_start|>assistant\n")
    )
    assert parsed.errors == []
    assert parsed.calls == TRICKY_CALLS
    assert parsed.content == "Let me look."


def test_calls_survive_tokens_decode_and_parse(tok: Tokenizer) -> None:
    conversation = Conversation(tok)
    conversation.add_system("You are an agent.", [READ_FILE, GREP])
    conversation.add_user("Go.")
    conversation.add_assistant("Reading 「三つ」 files in parallel.", TRICKY_CALLS)
    parsed = parse_assistant(conversation.assistant_text(), tool_names=[*TOOL_NAMES, "list_dir"])
    assert parsed.errors == []
    assert [c.name for c in parsed.calls] == [c.name for c in TRICKY_CALLS]
    assert [c.arguments for c in parsed.calls] == [c.arguments for c in TRICKY_CALLS]
    assert parsed.content == "Reading 「三つ」 files in parallel."
    assert parsed.call_indices == [0, 1, 2, 3]


def test_marker_strings_inside_arguments_cannot_end_the_block() -> None:
    block = render_tool_call(TRICKY_CALLS[2])
    assert block.count("</tool_call>") == 1
    assert block.count("<tool_call>") == 1
    assert "<|im_end|>" not in block


# ----------------------------------------------------------------------------- malformed calls

GOOD = '<tool_call>\n{"name": "grep", "arguments": {"pattern": "x"}}\n</tool_call>'


def _only_error(text: str, tool_names: list[str] | None = TOOL_NAMES) -> MalformedCall:
    parsed = parse_assistant(f"{GOOD}\n{text}\n{GOOD}<|im_end|>", tool_names)
    assert parsed.calls == [ToolCall("grep", {"pattern": "x"})] * 2
    assert parsed.call_indices == [0, 2]
    assert len(parsed.errors) == 1
    assert parsed.errors[0].index == 1
    return parsed.errors[0]


def test_invalid_json_reports_the_json_error() -> None:
    error = _only_error('<tool_call>\n{"name": "grep", "arguments": {"pattern": "x"}\n</tool_call>')
    assert error.reason.startswith("invalid JSON: ")
    assert "Expecting ',' delimiter" in error.reason
    assert error.raw.startswith("<tool_call>") and error.raw.endswith("</tool_call>")


def test_json_that_is_not_an_object() -> None:
    error = _only_error('<tool_call>\n["grep", {"pattern": "x"}]\n</tool_call>')
    assert "JSON object" in error.reason and "array" in error.reason


def test_missing_name() -> None:
    assert _only_error('<tool_call>\n{"arguments": {}}\n</tool_call>').reason == 'missing "name"'


def test_name_not_a_string() -> None:
    error = _only_error('<tool_call>\n{"name": 7, "arguments": {}}\n</tool_call>')
    assert '"name" must be a non-empty string' in error.reason and "number" in error.reason


@pytest.mark.parametrize("arguments", ['["a"]', "3", '"not json"', "null"])
def test_arguments_not_an_object(arguments: str) -> None:
    error = _only_error(f'<tool_call>\n{{"name": "grep", "arguments": {arguments}}}\n</tool_call>')
    assert '"arguments"' in error.reason


def test_missing_arguments() -> None:
    error = _only_error('<tool_call>\n{"name": "grep"}\n</tool_call>')
    assert 'missing "arguments"' in error.reason


def test_arguments_as_a_json_string_holding_an_object_are_accepted() -> None:
    inner = json.dumps({"pattern": 'a"b', "n": [1]})
    parsed = parse_assistant(f"<tool_call>\n{json.dumps({'name': 'grep', 'arguments': inner})}\n</tool_call>")
    assert parsed.errors == []
    assert parsed.calls == [ToolCall("grep", {"pattern": 'a"b', "n": [1]})]


def test_unknown_tool_only_when_names_are_given() -> None:
    block = '<tool_call>\n{"name": "rm_rf", "arguments": {}}\n</tool_call>'
    error = _only_error(block)
    assert "unknown tool 'rm_rf'" in error.reason and "read_file" in error.reason
    assert parse_assistant(block).calls == [ToolCall("rm_rf", {})]


def test_empty_block() -> None:
    assert "empty tool call" in _only_error("<tool_call>\n\n</tool_call>").reason


def test_stray_close_tag() -> None:
    error = _only_error("oops </tool_call>")
    assert "stray </tool_call>" in error.reason
    assert error.raw == "</tool_call>"


def test_unclosed_block_at_the_end_of_a_truncated_turn() -> None:
    text = f'Reading.\n{GOOD}\n<tool_call>\n{{"name": "read_file", "argu'
    parsed = parse_assistant(text)
    assert parsed.calls == [ToolCall("grep", {"pattern": "x"})]
    assert len(parsed.errors) == 1
    error = parsed.errors[0]
    assert error.index == 1
    assert "unclosed <tool_call>" in error.reason and "ended" in error.reason
    assert error.raw == '<tool_call>\n{"name": "read_file", "argu'
    assert parsed.content == "Reading."


def test_unclosed_block_followed_by_another_block() -> None:
    error = _only_error('<tool_call>\n{"name": "grep", "arguments": {}}')
    assert "unclosed <tool_call>" in error.reason and "new <tool_call>" in error.reason


def test_every_kind_in_one_turn_keeps_order() -> None:
    text = (
        "Plan first.\n"
        '<tool_call>\n{"name": "read_file", "arguments": {"path": "a"}}\n</tool_call>\n'
        "<tool_call>\nnot json\n</tool_call>\n"
        "</tool_call>\n"
        '<tool_call>\n{"name": "nope", "arguments": {}}\n</tool_call>\n'
        '<tool_call>\n{"name": "grep", "arguments": "{\\"pattern\\": \\"y\\"}"}\n</tool_call>\n'
        '<tool_call>\n{"name": "grep", "argum'
    )
    parsed = parse_assistant(text, TOOL_NAMES)
    assert parsed.block_count == 6
    assert parsed.calls == [ToolCall("read_file", {"path": "a"}), ToolCall("grep", {"pattern": "y"})]
    assert parsed.call_indices == [0, 4]
    assert [e.index for e in parsed.errors] == [1, 2, 3, 5]
    kinds = [e.reason.split(":")[0].split(" ")[0] for e in parsed.errors]
    assert kinds == ["invalid", "stray", "unknown", "unclosed"]
    ordered = parsed.blocks()
    assert [type(b).__name__ for b in ordered] == [
        "ToolCall",
        "MalformedCall",
        "MalformedCall",
        "MalformedCall",
        "ToolCall",
        "MalformedCall",
    ]
    assert parsed.content == "Plan first."


def test_content_outside_blocks_and_end_marker_are_handled() -> None:
    parsed = parse_assistant(f"  First.\n{GOOD}\nthen more\n<|im_end|>")
    assert parsed.content == "First.\n\nthen more"
    assert parse_assistant("Just text.<|im_end|>").content == "Just text."
    assert parse_assistant("Just text.").calls == []
    assert parse_assistant("").content == ""
