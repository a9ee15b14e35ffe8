"""overture.text: tokenizer, chat format, tool-call rendering and parsing, and the
token-level conversation builder.

Layer 1: knows nothing of models or sandboxes. The wire format is ChatML with Hermes-style
tool calls (`<tool_call>{json}</tool_call>` blocks in assistant turns, one user turn of
`<tool_response>` blocks per batch of results). Conversations are built once, as token ids,
and never re-rendered; markers go in by id, content through `Tokenizer.encode`, so content
cannot forge a turn or a call.
"""

from overture.text.chat import (
    Piece,
    render_assistant,
    render_assistant_header,
    render_system,
    render_tool_call,
    render_tool_responses,
    render_user,
)
from overture.text.conversation import Conversation, ConversationError, Turn
from overture.text.corpus import (
    DEFAULT_CORPUS,
    CorpusError,
    corpus_sha256,
    corpus_texts,
    train_default_tokenizer,
)
from overture.text.listing import NUMBERED_LINE, numbered_lines
from overture.text.markers import REQUIRED_TOKENS, SPECIAL_TOKENS
from overture.text.tokenizer import Tokenizer, TokenizerError
from overture.text.tool_calls import MalformedCall, ParsedTurn, ToolCall, parse_assistant

__all__ = [
    "DEFAULT_CORPUS",
    "NUMBERED_LINE",
    "REQUIRED_TOKENS",
    "SPECIAL_TOKENS",
    "Conversation",
    "ConversationError",
    "CorpusError",
    "MalformedCall",
    "ParsedTurn",
    "Piece",
    "Tokenizer",
    "TokenizerError",
    "ToolCall",
    "Turn",
    "corpus_sha256",
    "corpus_texts",
    "numbered_lines",
    "parse_assistant",
    "render_assistant",
    "render_assistant_header",
    "render_system",
    "render_tool_call",
    "render_tool_responses",
    "render_user",
    "train_default_tokenizer",
]
