"""The chat format (`overture.text.chat`) as a Jinja chat template for Hugging Face tokenizers.

`Tokenizer.save` writes it into `tokenizer_config.json` as `chat_template`, so a checkpoint
overture trains renders OpenAI-style messages (`system`, `user`, `assistant` with `tool_calls`,
`tool`) exactly as overture's own episodes do, wherever a chat template is applied:
`transformers`' `apply_chat_template`, or `vllm serve` on the checkpoint directory. It is built
from the same pieces as `chat`'s renderers, so the two cannot drift apart:

- a system turn when the messages open with one or `tools` are given, with the tools section
  (each function schema as overture writes it, fields set to null left out);
- consecutive `tool` messages make one user turn of `<tool_response>` blocks, in order;
- an assistant's tool calls are `{"name": ..., "arguments": ...}` blocks (arguments given as a
  JSON string are written as they are), marker strings inside them escaped as `call_json` does;
- `add_generation_prompt` ends with the assistant header.

Text, once rendered, is tokenized again by whoever applied the template, and a Hugging Face
tokenizer reads a marker string inside a message's content (a tool result holding
`<|im_end|>`, say) as the marker itself, as with any chat template. overture's own episodes
never go through text: `Conversation` inserts markers by id and encodes content as content.
"""

from __future__ import annotations

import json

from overture.text.chat import (
    CALL_EXAMPLE,
    CALL_INSTRUCTION_HEAD,
    CALL_INSTRUCTION_TAIL,
    TOOLS_INTRO,
    TURN_SEPARATOR,
)
from overture.text.markers import (
    IM_END,
    IM_START,
    SPECIAL_TOKENS,
    TOOL_CALL_CLOSE,
    TOOL_CALL_OPEN,
    TOOL_RESPONSE_CLOSE,
    TOOL_RESPONSE_OPEN,
)


def _text(value: str) -> str:
    """`value` as a Jinja expression that prints it verbatim (a JSON string is a Jinja string)."""
    return "{{ " + json.dumps(value) + " }}"


def _markers_escaped(expression: str) -> str:
    """`expression` with every marker string in it written as `call_json` writes it."""
    for special in SPECIAL_TOKENS:
        expression += f" | replace({json.dumps(special)}, {json.dumps(chr(92) + 'u003c' + special[1:])})"
    return expression


_TURN_END = _text(IM_END + TURN_SEPARATOR)

_SYSTEM = (
    "{%- set opens_with_system = messages and messages[0].role == 'system' -%}"
    "{%- if opens_with_system or tools -%}"
    + _text(IM_START + "system\n")
    + "{%- if opens_with_system %}{{ messages[0].content }}{% endif -%}"
    "{%- if tools -%}"
    "{%- if opens_with_system and messages[0].content %}"
    + _text("\n\n")
    + "{% endif -%}"
    + _text(TOOLS_INTRO)
    + "{%- for tool in tools -%}"
    "{%- if not loop.first %}" + _text("\n") + "{% endif -%}"
    "{%- set function = tool.function if tool.type == 'function' and tool.function is defined else tool -%}"
    # json.dumps of the function's schema, less the fields set to null (an OpenAI request parsed
    # by a server, vLLM's, has every optional field, e.g. "description": null).
    + _text('{"type": "function", "function": {')
    + "{%- for key, value in function.items() if value is not none -%}"
    "{%- if not loop.first %}" + _text(", ") + "{% endif -%}"
    "{{ key | tojson }}" + _text(": ") + "{{ value | tojson }}"
    "{%- endfor -%}"
    + _text("}}")
    + "{%- endfor -%}"
    + _text(CALL_INSTRUCTION_HEAD + TOOL_CALL_OPEN + CALL_EXAMPLE + TOOL_CALL_CLOSE + CALL_INSTRUCTION_TAIL)
    + "{%- endif -%}"
    + _TURN_END
    + "{%- endif -%}"
)

_CALL_JSON = (
    "{%- set call = tool_call.function if tool_call.function is defined else tool_call -%}"
    "{%- if call.arguments is string -%}"
    "{%- set encoded = '{\"name\": ' ~ (call.name | tojson) ~ ', \"arguments\": ' ~ call.arguments ~ '}' -%}"
    "{%- else -%}"
    "{%- set encoded = {'name': call.name, 'arguments': call.arguments} | tojson -%}"
    "{%- endif -%}"
    "{{ " + _markers_escaped("encoded") + " }}"
)

_ASSISTANT = (
    _text(IM_START + "assistant\n") + "{%- if message.content %}{{ message.content }}{% endif -%}"
    "{%- for tool_call in message.tool_calls or [] -%}"
    "{%- if message.content or not loop.first %}"
    + _text("\n")
    + "{% endif -%}"
    + _text(TOOL_CALL_OPEN + "\n")
    + _CALL_JSON
    + _text("\n" + TOOL_CALL_CLOSE)
    + "{%- endfor -%}"
    + _TURN_END
)

_TOOL_RESULT = (
    "{%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}"
    + _text(IM_START + "user\n")
    + "{%- else %}"
    + _text("\n")
    + "{% endif -%}"
    + _text(TOOL_RESPONSE_OPEN + "\n")
    + "{{ message.content }}"
    + _text("\n" + TOOL_RESPONSE_CLOSE)
    + "{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}"
    + _TURN_END
    + "{% endif -%}"
)

CHAT_TEMPLATE = (
    _SYSTEM + "{%- for message in messages -%}"
    "{%- if message.role == 'user' -%}"
    + _text(IM_START + "user\n")
    + "{{ message.content }}"
    + _TURN_END
    + "{%- elif message.role == 'assistant' -%}"
    + _ASSISTANT
    + "{%- elif message.role == 'tool' -%}"
    + _TOOL_RESULT
    + "{%- elif message.role != 'system' or not loop.first -%}"
    "{{ raise_exception('no turn of the chat format for a ' ~ message.role ~ ' message here') }}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt %}" + _text(IM_START + "assistant\n") + "{% endif -%}"
)
