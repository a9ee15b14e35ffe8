"""How tools print line numbers: ` N|text`, right-aligned behind at least one space.

The space makes a line number the same token in a listing as in the JSON of a call that names it
(`"start_line": 11`): a byte-level BPE reads ` 11` as one token and `11` at the start of a line
as another, and the tiny model copies a number more often than it translates one
(docs/experiments/edit-lines.md). The agent's tools and the corpus' sample
conversations print listings through this one function, so the two cannot drift apart.
"""

from __future__ import annotations

import re

__all__ = ["NUMBERED_LINE", "numbered_lines"]

NUMBERED_LINE = re.compile(r"^\s*(\d+)\|(.*)$")  # one line of a listing: its number, its text


def numbered_lines(lines: list[str], first: int) -> str:
    """`lines` as ` N|text`, N counted from `first` (1-based)."""
    width = len(str(first + len(lines) - 1)) + 1
    return "\n".join(f"{n:>{width}}|{line}" for n, line in enumerate(lines, first))
