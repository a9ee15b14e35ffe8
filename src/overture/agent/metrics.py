"""Behaviour metrics of one episode, from its turn records.

What the seed system's policy learned and what we want to watch: calls per turn, how often a
turn makes several calls at once, how much the agent reads and searches before its first edit,
how often it writes an invalid call, how many of its edits apply and how many were refused
because the file would no longer compile, and what the episode cost (turns, tokens, tool time).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from overture.agent.tools import ALL_TOOLS, INVALID_PYTHON_REFUSAL

# From each tool's declared kind, so a new tool is counted as what it is.
READ_TOOLS = frozenset(tool.name for tool in ALL_TOOLS if tool.kind == "read")
EDIT_TOOLS = frozenset(tool.name for tool in ALL_TOOLS if tool.kind == "edit")
# The behaviour RL should move, watched over training and compared before and after it: calls at
# once (parallel turns, calls per turn), how long an episode takes (turns, generated tokens), how
# much it looks before it edits.
RL_BEHAVIOUR = (
    "parallel_turn_share", "tool_calls_per_turn", "turns", "reads_before_first_edit", "policy_tokens",
)  # fmt: skip


def behaviour_metrics(
    turns: Sequence[dict[str, Any]], token_count: int, policy_tokens: int
) -> dict[str, Any]:
    """Metrics of an episode whose turn records (`TurnRecord.to_dict()`) are `turns`."""
    calls_per_turn = [len(turn["calls"]) for turn in turns]
    calls = [call for turn in turns for call in turn["calls"]]
    invalid = sum(call["error"] in ("malformed", "arguments") for call in calls)
    applied = sum(call["name"] in EDIT_TOOLS and not call["error"] for call in calls)
    return {
        "turns": len(turns),
        "tool_calls": len(calls),
        "tool_calls_per_turn": sum(calls_per_turn) / len(turns) if turns else 0.0,
        "parallel_turn_share": sum(n >= 2 for n in calls_per_turn) / len(turns) if turns else 0.0,
        "reads_before_first_edit": reads_before_first_edit(calls),
        "edited": applied > 0,
        "edit_calls": sum(call["name"] in EDIT_TOOLS for call in calls),
        "edits_applied": applied,
        "edits_refused": sum(refused_as_invalid_python(call) for call in calls),
        "invalid_calls": invalid,
        "invalid_call_rate": invalid / len(calls) if calls else 0.0,
        "tool_errors": sum(call["error"] == "tool" for call in calls),
        "truncated_responses": sum(bool(call["truncated"]) for call in calls),
        "tokens": token_count,
        "policy_tokens": policy_tokens,
        "tool_time_s": round(sum(call["duration_s"] for call in calls), 6),
        "tool_wall_s": round(sum(turn["tool_wall_s"] for turn in turns), 6),
        "generation_s": round(sum(turn["generation_s"] for turn in turns), 6),
    }


def refused_as_invalid_python(call: dict[str, Any]) -> bool:
    """Whether the call is an edit the tools refused because the file would not compile."""
    refused = call["error"] == "tool" and INVALID_PYTHON_REFUSAL in call["response"]
    return call["name"] in EDIT_TOOLS and refused


def reads_before_first_edit(calls: Sequence[dict[str, Any]]) -> int:
    """Valid read/search calls before the first successful edit (all of them if none edits)."""
    count = 0
    for call in calls:
        if call["name"] in EDIT_TOOLS and not call["error"]:
            break
        count += call["name"] in READ_TOOLS and call["error"] not in ("malformed", "arguments")
    return count
