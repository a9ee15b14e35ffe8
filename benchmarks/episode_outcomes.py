"""How the main job's held-out episodes end, before and after RL: where the policy stops short.

Each episode of `trajectories/eval-before.jsonl` and `eval-after.jsonl` of a run directory
(`overture train` output, `RUN/NAME`) falls in the first of these that holds:

- `resolved`: the tests pass;
- `edited, collection failed`: an edit applied and pytest could not collect the tests (exit code 2);
- `edited, tests fail`: an edit applied and the failing tests still fail;
- `edit refused`: no edit applied, and at least one was refused because the file would no longer
  compile (`agent.refuse_syntax_errors`);
- `edit call malformed`: no edit applied, and a turn that names an edit tool did not parse as a
  tool call (invalid JSON, cut off at `agent.max_new_tokens`): the new text broke the call;
- `edit failed otherwise`: no edit applied; the edit calls failed for other reasons (arguments
  missing or misnamed, lines out of range, text not found);
- `no edit call`: the episode never tried to call an edit tool.

Then, of the episodes with a refused edit, how many called an edit tool again afterwards, how
many of those later edits applied, and how many were resolved; and the turns of resolved and of
failed episodes.

    .venv/bin/python benchmarks/episode_outcomes.py RUN/NAME

Prints a table, then one JSON object on its last line.
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

from overture.agent.metrics import EDIT_TOOLS, refused_as_invalid_python

OUTCOMES = (
    "resolved",
    "edited, collection failed",
    "edited, tests fail",
    "edit refused",
    "edit call malformed",
    "edit failed otherwise",
    "no edit call",
)
REFUSAL_FOLLOW_UPS = ("edited_again", "applied_later", "resolved")
# An edit call in a turn's text, whether or not the call parsed.
NAMES_AN_EDIT = re.compile(r'"name":\s*"(?:' + "|".join(sorted(EDIT_TOOLS)) + ')"')
COLLECTION_FAILED = "exit code 2"  # in the grader's reason when pytest could not collect the tests


def resolved(episode: dict[str, Any]) -> bool:
    return episode["reward_info"].get("resolution") == "resolved"


def edit_calls(episode: dict[str, Any]) -> list[dict[str, Any]]:
    return [call for turn in episode["turns"] for call in turn["calls"] if call["name"] in EDIT_TOOLS]


def outcome(episode: dict[str, Any]) -> str:
    edits = edit_calls(episode)
    if resolved(episode):
        return "resolved"
    if any(not call["error"] for call in edits):
        reason = str(episode["reward_info"].get("reason", ""))
        return "edited, collection failed" if COLLECTION_FAILED in reason else "edited, tests fail"
    if any(refused_as_invalid_python(call) for call in edits):
        return "edit refused"
    malformed = [turn for turn in episode["turns"] if any(c["error"] == "malformed" for c in turn["calls"])]
    if any(NAMES_AN_EDIT.search(turn["text"]) for turn in malformed):
        return "edit call malformed"
    return "edit failed otherwise" if edits else "no edit call"


def after_a_refusal(episode: dict[str, Any]) -> dict[str, bool] | None:
    """What an episode with a refused edit did after its first refusal (None: it had none)."""
    edits = edit_calls(episode)
    first = next((i for i, call in enumerate(edits) if refused_as_invalid_python(call)), None)
    if first is None:
        return None
    later = edits[first + 1 :]
    return {
        "edited_again": bool(later),
        "applied_later": any(not call["error"] for call in later),
        "resolved": resolved(episode),
    }


def summarize(path: Path) -> dict[str, Any]:
    episodes = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    outcomes = Counter(outcome(episode) for episode in episodes)
    refusals = [each for each in map(after_a_refusal, episodes) if each is not None]
    turns = {"resolved": Counter(), "failed": Counter()}
    for episode in episodes:
        turns["resolved" if resolved(episode) else "failed"][len(episode["turns"])] += 1
    return {
        "episodes": len(episodes),
        "outcomes": {name: outcomes[name] for name in OUTCOMES},
        "with_a_refused_edit": {
            "episodes": len(refusals),
            **{key: sum(each[key] for each in refusals) for key in REFUSAL_FOLLOW_UPS},
        },
        "turns": {kind: dict(sorted(counts.items())) for kind, counts in turns.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="the run directory, RUN/NAME")
    args = parser.parse_args()
    result: dict[str, Any] = {"benchmark": "episode_outcomes", "run": str(args.run)}
    for label in ("before", "after"):
        path = args.run / "trajectories" / f"eval-{label}.jsonl"
        if path.is_file():
            result[label] = summarize(path)
    if len(result) == 2:
        raise SystemExit(f"{args.run}/trajectories holds no eval-before.jsonl or eval-after.jsonl")
    labels = [label for label in ("before", "after") if label in result]
    print(f"{'held-out episodes':<32}" + "".join(f"{label:>10}" for label in labels))
    for name in OUTCOMES:
        print(f"{name:<32}" + "".join(f"{result[label]['outcomes'][name]:>10}" for label in labels))
    for key in ("episodes", *REFUSAL_FOLLOW_UPS):
        row = f"refused an edit: {key}"
        print(f"{row:<32}" + "".join(f"{result[label]['with_a_refused_edit'][key]:>10}" for label in labels))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
