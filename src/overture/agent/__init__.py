"""Layer 3: the agent harness — the production tool set, parallel tool execution, semantic code
search, the episode loop, behaviour metrics, and the `Policy` protocol the loop talks to.

Knows nothing of the engine class: anything with `generate(prompt_ids, max_new_tokens)` that
returns an awaitable, abortable request is a policy. Importing this package is cheap; the
embedding model loads on the first semantic search.
"""

from overture.agent.episode import Episode
from overture.agent.executor import CallRecord, ToolSet
from overture.agent.metrics import behaviour_metrics
from overture.agent.policy import Generation, Policy, PolicyRequest
from overture.agent.prompts import SYSTEM_PROMPT
from overture.agent.records import TurnRecord
from overture.agent.scripted import ScriptedPolicy, scripted_logprob
from overture.agent.tools import ALL_TOOLS, Tool, ToolContext, ToolError
from overture.agent.trajectory import STATUSES, Status, Trajectory

__all__ = [
    "ALL_TOOLS",
    "STATUSES",
    "SYSTEM_PROMPT",
    "CallRecord",
    "Episode",
    "Generation",
    "Policy",
    "PolicyRequest",
    "ScriptedPolicy",
    "Status",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolSet",
    "Trajectory",
    "TurnRecord",
    "behaviour_metrics",
    "scripted_logprob",
]
