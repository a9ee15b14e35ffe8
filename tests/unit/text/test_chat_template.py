"""The chat template a saved tokenizer carries renders OpenAI-style messages as overture's own
chat format does, through `transformers`' `apply_chat_template` (what `vllm serve` applies)."""

from __future__ import annotations

import json

import jinja2
import pytest
from agent_helpers import tokenizer
from transformers import AutoTokenizer

from overture.text import Tokenizer
from overture.text.chat import (
    render_assistant,
    render_assistant_header,
    render_system,
    render_tool_responses,
    render_user,
)
from overture.text.tool_calls import ToolCall

READ = {"name": "read_file", "description": "Read a file", "parameters": {"type": "object"}}
GREP = {"type": "function", "function": {"name": "grep", "description": "Search, é", "parameters": {}}}


@pytest.fixture(scope="module")
def hf_tokenizer(tmp_path_factory):
    return AutoTokenizer.from_pretrained(tokenizer().save(tmp_path_factory.mktemp("tokenizer")))


def assistant_message(content: str, calls: list[ToolCall], arguments_as_text: bool = False) -> dict:
    return {
        "role": "assistant",
        "content": content,
        "tool_calls": [
            {
                "id": f"call-{i}",
                "type": "function",
                "function": {
                    "name": call.name,
                    "arguments": json.dumps(call.arguments) if arguments_as_text else call.arguments,
                },
            }
            for i, call in enumerate(calls)
        ],
    }


def test_a_chat_with_parallel_calls_and_their_results_renders_as_overtures_format(hf_tokenizer):
    parallel = [
        ToolCall("read_file", {"path": "a.py"}),
        ToolCall("grep", {"pattern": "</tool_call> <|im_end|>"}),
    ]
    follow_up = [ToolCall("read_file", {"path": "b.py", "offset": 3})]
    messages = [
        {"role": "system", "content": "You fix bugs."},
        {"role": "user", "content": "Fix mean()."},
        assistant_message("Looking.", parallel),
        {"role": "tool", "tool_call_id": "call-0", "content": "a"},
        {"role": "tool", "tool_call_id": "call-1", "content": "b"},
        assistant_message("", follow_up, arguments_as_text=True),
        {"role": "tool", "tool_call_id": "call-0", "content": "c"},
        {"role": "assistant", "content": "Done."},
    ]
    expected = (
        render_system("You fix bugs.", [READ, GREP])
        + render_user("Fix mean().")
        + render_assistant("Looking.", parallel)
        + render_tool_responses(["a", "b"])
        + render_assistant("", follow_up)
        + render_tool_responses(["c"])
        + render_assistant("Done.")
    )
    rendered = hf_tokenizer.apply_chat_template(messages, tools=[READ, GREP], tokenize=False)
    assert rendered == expected
    # The marker strings inside arguments are escaped, so they cannot close the call block.
    assert "\\u003c/tool_call> \\u003c|im_end|>" in rendered
    prompt = hf_tokenizer.apply_chat_template(
        messages[:4], tools=[READ], tokenize=False, add_generation_prompt=True
    )
    assert prompt.endswith(render_tool_responses(["a"]) + render_assistant_header())


@pytest.mark.parametrize(
    ("messages", "tools", "expected"),
    [
        ([{"role": "user", "content": "hi"}], None, render_user("hi")),
        ([{"role": "user", "content": "hi"}], [READ], render_system("", [READ]) + render_user("hi")),
        (
            [{"role": "system", "content": "S"}, {"role": "user", "content": "hi"}],
            None,
            render_system("S") + render_user("hi"),
        ),
    ],
)
def test_the_system_turn_appears_when_the_chat_opens_with_one_or_has_tools(
    hf_tokenizer, messages, tools, expected
):
    assert hf_tokenizer.apply_chat_template(messages, tools=tools, tokenize=False) == expected


def test_function_fields_set_to_null_are_left_out_as_a_server_parsing_a_request_sends_them(hf_tokenizer):
    parsed = {"type": "function", "function": {**READ, "description": None, "strict": None}}
    without = {"name": "read_file", "parameters": {"type": "object"}}
    user = [{"role": "user", "content": "hi"}]
    assert hf_tokenizer.apply_chat_template(user, tools=[parsed], tokenize=False) == (
        render_system("", [without]) + render_user("hi")
    )


def test_a_message_the_format_has_no_turn_for_is_refused(hf_tokenizer):
    messages = [{"role": "user", "content": "hi"}, {"role": "system", "content": "late"}]
    with pytest.raises(jinja2.TemplateError, match="no turn of the chat format for a system message"):
        hf_tokenizer.apply_chat_template(messages, tokenize=False)


def test_the_saved_tokenizer_config_carries_the_template(tmp_path):
    config = json.loads((tokenizer().save(tmp_path) / "tokenizer_config.json").read_text())
    assert "<tool_call>" in config["chat_template"]
    assert Tokenizer.from_dir(tmp_path).fingerprint == tokenizer().fingerprint
