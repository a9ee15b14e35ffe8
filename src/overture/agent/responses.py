"""Tool responses capped in tokens: a long output keeps its head and tail, with a note of the cut.

The cap is counted with the policy's tokenizer, since the limit protects the context window.
Head and tail are kept because both ends of an output matter (a command's first error, a test
run's summary line).
"""

from __future__ import annotations

from overture.text import Tokenizer


def cap_response(text: str, tokenizer: Tokenizer, max_tokens: int) -> tuple[str, bool]:
    """`text` cut to about `max_tokens` tokens (head and tail kept), and whether it was cut."""
    ids = tokenizer.encode(text)
    if len(ids) <= max_tokens:
        return text, False
    note_budget = 32  # room for the note itself, so the whole stays near the cap
    keep = max(2, max_tokens - note_budget)
    head, tail = ids[: keep - keep // 2], ids[len(ids) - keep // 2 :]
    cut = len(ids) - len(head) - len(tail)
    note = f"\n[... {cut} of {len(ids)} tokens cut from the middle of this response ...]\n"
    return tokenizer.decode(head) + note + tokenizer.decode(tail), True
