"""The marker strings of the wire format: ChatML turn markers and Hermes tool-call tags.

Each is one token of the tokenizer (see `SPECIAL_TOKENS`). They live in their own module so
that the text-only modules (chat rendering, parsing) need not import the tokenizer library.
"""

ENDOFTEXT = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
TOOL_CALL_OPEN = "<tool_call>"
TOOL_CALL_CLOSE = "</tool_call>"
TOOL_RESPONSE_OPEN = "<tool_response>"
TOOL_RESPONSE_CLOSE = "</tool_response>"
THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"

# Order fixes the ids of a freshly trained tokenizer: <|endoftext|> is 0, <|im_start|> 1, ...
SPECIAL_TOKENS: tuple[str, ...] = (
    ENDOFTEXT,
    IM_START,
    IM_END,
    TOOL_CALL_OPEN,
    TOOL_CALL_CLOSE,
    TOOL_RESPONSE_OPEN,
    TOOL_RESPONSE_CLOSE,
    THINK_OPEN,
    THINK_CLOSE,
)

# An external tokenizer (e.g. Qwen's) must have at least these as single tokens: without
# them the chat format cannot be produced or parsed at the token level.
REQUIRED_TOKENS: tuple[str, ...] = (IM_START, IM_END, TOOL_CALL_OPEN, TOOL_CALL_CLOSE)
