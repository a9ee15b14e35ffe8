"""The oracle solver: a scripted agent that fixes a task through the real tools.

It works as a model would have to — search, read, edit, run the tests, finish — and uses the
task's reference fix only to decide what to type: which file to open, which lines to read, and
its edits: `edit_lines` calls that give the changed lines by the numbers `read_file` printed and
their new text. A line-anchored edit spares the model copying the buggy text exactly, which a
small model does badly because it writes code as it should be rather than as it is (see
docs/experiments/old-string-tokens.md); the edits of one file go bottom-up, so that each call's
line numbers are those of the file as read. The turns are:

1. `grep` for the definition of the function involved and `codebase_search` for the failing
   test's behaviour, in parallel;
2. `read_file` of the whole function to change, from its `def` line (the line number the grep
   printed, which a model can copy; a few lines around the change outside any function), and
   `grep` the failing test with context, in parallel;

   (on a share of tasks, `1 - tasks.oracle_parallel_share` drawn per task from the seed, steps 1
   and 2 make their two calls in two turns each, one call a turn: demonstrations that leave a
   policy room to discover parallel calls by itself;)
3. one `edit_lines` per change (`write_file`/`delete_file` for whole files); with
   `tasks.oracle_edits = "functions"`, one `edit_lines` over all the lines of the function it
   read (the read's offset and its listing's last line: numbers on the screen) that writes the
   function out as fixed, so that a model need not single out the changed line among those it
   read (where that turn fits in the turn's token budget; the changed lines otherwise);
4. `run_terminal_cmd` on the files of the failing tests the statement lists;
5. `finish`.

Every call goes through `ToolSet` in a sandbox and the result is graded like any episode, so a
solved task proves the environment end to end; a run counts as solved only if no call failed (a
demonstration must not teach a call that errs). The trajectory doubles as a demonstration for
supervised fine-tuning (`demonstration()` gives it in the `messages` format `overture sft` reads).
"""

from __future__ import annotations

import asyncio
import difflib
import itertools
import keyword
import re
import shlex
import shutil
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from overture.agent import ScriptedPolicy, ToolSet, Trajectory
from overture.config import AgentConfig, TasksConfig
from overture.sandbox import SandboxPool
from overture.tasks.episodes import run_task_episode
from overture.tasks.fixed_draw import fixed_draw
from overture.tasks.parallel import map_bounded
from overture.tasks.snapshots import apply_patch, patched_files, starting_base
from overture.tasks.source_functions import enclosing_function
from overture.tasks.spec import Task
from overture.tasks.statement import MAX_TESTS_LISTED
from overture.text import Tokenizer, ToolCall
from overture.text.chat import assistant_body_pieces, render

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
READ_MARGIN = 8


@dataclass
class Edit:
    """One change the oracle types: lines `line`..`end` of `path` (their text `old`) become `new`;
    the whole file when `old` is None (`new` its contents, None to delete it)."""

    path: str
    old: str | None
    new: str | None
    line: int = 1
    end: int = 0
    function: tuple[int, int] | None = None  # first and last line of the function the change is in


@dataclass
class OracleTurn:
    content: str
    calls: list[ToolCall]

    def text(self) -> str:
        """The turn body as the policy writes it (without the closing `<|im_end|>`)."""
        return render(assistant_body_pieces(self.content, self.calls)[:-1])


def plan_edits(task: Task, base: Path, whole_functions: bool = False) -> list[Edit]:
    """The edits that turn the starting workspace into the fixed one, from the reference patch;
    with `whole_functions`, the changes inside one function as one edit of the whole function."""
    files = patched_files(task.patch)
    with tempfile.TemporaryDirectory(prefix="overture-oracle-") as scratch:
        fixed_root = Path(scratch)
        for rel in files:
            if (base / rel).is_file():
                (fixed_root / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(base / rel, fixed_root / rel)
        apply_patch(fixed_root, task.patch, f"task {task.instance_id}: patch")
        edits = []
        for rel in sorted(files):
            before = (base / rel).read_text() if (base / rel).is_file() else None
            after = (fixed_root / rel).read_text() if (fixed_root / rel).is_file() else None
            edits += file_edits(rel, before, after)
    return whole_function_edits(edits, base) if whole_functions else edits


def whole_function_edits(edits: list[Edit], base: Path) -> list[Edit]:
    """`plan_edits`' edits of the workspace at `base` with the changes inside one function merged
    into one edit of the whole function (`file_edits` with `whole_functions`), file by file."""
    merged: list[Edit] = []
    for rel, group in itertools.groupby(edits, key=lambda edit: edit.path):
        in_file = list(group)
        if in_file[0].old is None:  # the whole file is written or deleted
            merged += in_file
        else:
            merged += _whole_functions(in_file, (base / rel).read_text().splitlines(keepends=True))
    return merged


def file_edits(rel: str, before: str | None, after: str | None, whole_functions: bool = False) -> list[Edit]:
    """Edits for one file, top to bottom: each changed stretch of lines, by its line numbers in
    `before`. Pure insertions take the line before them along (after line 0: an insertion at 1).
    With `whole_functions`, the stretches inside one function become one edit of all its lines."""
    if before is None or after is None:
        return [Edit(rel, None, after)]
    old_lines, new_lines = before.splitlines(keepends=True), after.splitlines(keepends=True)
    edits = []
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        start = i1 - 1 if tag == "insert" and i1 > 0 else i1
        old = "".join(old_lines[start:i2])
        new = "".join([*old_lines[start:i1], *new_lines[j1:j2]])
        changed = i1 + 1 if i2 > i1 else max(1, i1)  # an insertion: the line before it
        edits.append(Edit(rel, old, new, start + 1, i2, enclosing_function(before, changed)))
    return _whole_functions(edits, old_lines) if whole_functions else edits


def _whole_functions(edits: list[Edit], old_lines: list[str]) -> list[Edit]:
    """`edits` (of one file, top to bottom) with those that lie inside one function merged into
    an edit of the function's lines `def`..last, their new text the function as fixed."""
    merged: list[Edit] = []
    for span, group in itertools.groupby(edits, key=_span_inside):
        if span is None:
            merged += group
            continue
        lines = old_lines[span[0] - 1 : span[1]]
        for edit in reversed(list(group)):  # bottom-up: the lines above keep their numbers
            lines[edit.line - span[0] : edit.end - span[0] + 1] = (edit.new or "").splitlines(keepends=True)
        old = "".join(old_lines[span[0] - 1 : span[1]])
        merged.append(Edit(edit.path, old, "".join(lines), span[0], span[1], span))
    return merged


def _span_inside(edit: Edit) -> tuple[int, int] | None:
    """The function `edit` lies wholly inside, if any."""
    span = edit.function
    return span if span is not None and span[0] <= edit.line <= edit.end <= span[1] else None


def _function_name(task: Task, edits: list[Edit]) -> str:
    function = str(task.metadata.get("function") or "")
    if function:
        return function.split(".")[-1]
    for edit in edits:
        for word in IDENTIFIER.findall(edit.old or edit.new or ""):
            if not keyword.iskeyword(word):
                return word
    return Path(edits[0].path).stem if edits else "main"


def _test_parts(test_id: str) -> tuple[str, str]:
    """(file, function name) of a pytest id such as `tests/test_x.py::TestA::test_b[1]`."""
    path, _, rest = test_id.partition("::")
    return path, rest.split("::")[-1].split("[")[0]


def oracle_turns(task: Task, edits: list[Edit], parallel: bool = True) -> list[OracleTurn]:
    """The oracle's assistant turns for `task` (see the module docstring); with `parallel` False,
    the search and the read take one call a turn."""
    name = _function_name(task, edits)
    test_file, test_function = _test_parts(task.FAIL_TO_PASS[0])
    behaviour = test_function.removeprefix("test_").replace("_", " ")
    first = edits[0]
    look_for = ToolCall("grep", {"pattern": rf"def {name}\b", "glob": "*.py", "output_mode": "content"})
    search = ToolCall("codebase_search", {"query": behaviour})
    if parallel:
        intro = f"The report points at a failing test. I'll look for `{name}` and for code about {behaviour}."
        turns = [OracleTurn(intro, [look_for, search])]
    else:
        turns = [
            OracleTurn(f"The report points at a failing test. I'll look for `{name}`.", [look_for]),
            OracleTurn(f"Now code about {behaviour}.", [search]),
        ]
    reads = []
    if first.old is not None:
        last = max(first.end, first.line)  # the edit's last line (its line for an insertion at 1)
        if first.function is not None:
            # The whole function from its `def` line, the number the grep of turn 1 printed.
            offset = min(first.function[0], first.line)
            limit = max(first.function[1], last) - offset + 1
        else:
            offset = max(1, first.line - READ_MARGIN)
            limit = last + READ_MARGIN - offset + 1
        reads.append(ToolCall("read_file", {"path": first.path, "offset": offset, "limit": limit}))
    if test_function:
        reads.append(
            ToolCall("grep", {"pattern": rf"def {test_function}\b", "path": test_file, "context": 6})
        )
    if parallel or len(reads) < 2:
        turns.append(OracleTurn(f"Let me read `{first.path}` and the failing test.", reads))
    else:
        turns.append(OracleTurn(f"Let me read `{first.path}`.", reads[:1]))
        turns.append(OracleTurn("And the failing test.", reads[1:]))
    fixing = f"The code in `{first.path}` does not do what the test expects. Fixing it."
    turns.append(OracleTurn(
        fixing, [_edit_call(edit) for edit in sorted(edits, key=lambda edit: (edit.path, -edit.line))]
    ))  # fmt: skip
    # The files of the tests the statement lists: what a model can read off the report, and a
    # command short enough for any turn budget (twenty test ids did not fit in 512 tokens).
    listed = task.FAIL_TO_PASS[:MAX_TESTS_LISTED]
    test_files = " ".join(shlex.quote(path) for path in dict.fromkeys(_test_parts(t)[0] for t in listed))
    turns.append(OracleTurn(
        "Now the failing tests should pass.",
        [ToolCall("run_terminal_cmd", {"command": f"{task.test_cmd} -q -p no:cacheprovider {test_files}"})],
    ))  # fmt: skip
    summary = f"Fixed `{name}` in `{first.path}`; the failing tests pass now."
    turns.append(OracleTurn("", [ToolCall("finish", {"summary": summary})]))
    return turns


def _edit_call(edit: Edit) -> ToolCall:
    if edit.old is None and edit.new is None:
        return ToolCall("delete_file", {"file_path": edit.path})
    if edit.old is None:
        return ToolCall("write_file", {"file_path": edit.path, "contents": edit.new})
    return ToolCall(
        "edit_lines",
        {"file_path": edit.path, "start_line": edit.line, "end_line": edit.end, "new_string": edit.new},
    )


def demonstration(trajectory: Trajectory, turns: list[OracleTurn], tools: ToolSet) -> dict[str, Any]:
    """The episode as an SFT demonstration (`{"messages": [...]}`, the format `overture sft` reads)."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": trajectory.system, "tools": tools.schemas()},
        {"role": "user", "content": trajectory.prompt},
    ]
    for planned, record in zip(turns, trajectory.turns, strict=False):
        messages.append({
            "role": "assistant", "content": planned.content,
            "tool_calls": [{"name": c.name, "arguments": c.arguments} for c in planned.calls],
        })  # fmt: skip
        if record["responses_appended"]:
            messages += [{"role": "tool", "content": call["response"]} for call in record["calls"]]
    return {"messages": messages, "task_id": trajectory.task_id}


@dataclass
class OracleResult:
    instance_id: str
    solved: bool
    why: str
    trajectory: Trajectory | None = None
    demonstration: dict[str, Any] | None = None
    parallel: bool = True  # the search and the read each in one turn (`tasks.oracle_parallel_share`)


def works_in_parallel(instance_id: str, seed: int, share: float) -> bool:
    """Whether the oracle makes a step's independent calls in one turn on this task: true for a
    `share` of tasks, drawn from the seed and the task, the same on every run."""
    return share >= 1 or fixed_draw(f"{seed}:oracle:{instance_id}") < share


async def solve_with_oracle(
    task: Task,
    pool: SandboxPool,
    tokenizer: Tokenizer,
    agent: AgentConfig,
    config: TasksConfig,
    tools: ToolSet | None = None,
    seed: int = 0,
) -> OracleResult:
    """Run the oracle on one task; whether the graded result is resolved, and why not. With
    `tasks.oracle_edits = "functions"`, a run whose rewrite of the function did not solve the
    task (a turn cut off by `agent.max_new_tokens` or the context) is run again on the changed
    lines. Whether it makes independent calls in one turn is drawn from `seed` and the task
    (`tasks.oracle_parallel_share`)."""
    tools = tools or ToolSet.for_agent(agent)
    whole = config.oracle_edits == "functions"
    parallel = works_in_parallel(task.instance_id, seed, config.oracle_parallel_share)
    try:
        base = await asyncio.to_thread(starting_base, task)
        edits = await asyncio.to_thread(plan_edits, task, base)
        rewrites = await asyncio.to_thread(whole_function_edits, edits, base) if whole else edits
    except (ValueError, OSError) as exc:
        return OracleResult(task.instance_id, False, f"cannot plan the fix: {exc}")
    if not edits:
        return OracleResult(task.instance_id, False, "the reference patch changes nothing")
    result = await _run_oracle(task, rewrites, pool, tokenizer, agent, config, tools, parallel)
    if not result.solved and rewrites != edits:
        result = await _run_oracle(task, edits, pool, tokenizer, agent, config, tools, parallel)
    return result


async def _run_oracle(
    task: Task,
    edits: list[Edit],
    pool: SandboxPool,
    tokenizer: Tokenizer,
    agent: AgentConfig,
    config: TasksConfig,
    tools: ToolSet,
    parallel: bool,
) -> OracleResult:
    """One episode of the oracle's turns for `edits`, graded."""
    turns = oracle_turns(task, edits, parallel)
    missing = sorted({call.name for turn in turns for call in turn.calls} - set(tools.names))
    if missing:
        why = f"the fix calls {', '.join(missing)}, not in agent.tools"
        return OracleResult(task.instance_id, False, why)
    policy = ScriptedPolicy(tokenizer, [turn.text() for turn in turns])
    trajectory = await run_task_episode(task, policy, pool, tokenizer, agent, config, tools)
    resolved = trajectory.reward_info.get("resolution") == "resolved"
    failed = _failed_calls(trajectory)
    solved = resolved and not failed  # a demonstration must not teach a call that fails
    if solved:
        why = "resolved"
    elif resolved:
        why = "an oracle call failed: " + "; ".join(failed[:2])
    else:
        why = _why_not(trajectory)
    shown = demonstration(trajectory, turns, tools)
    return OracleResult(task.instance_id, solved, why, trajectory, shown, parallel)


def _failed_calls(trajectory: Trajectory) -> list[str]:
    """`name: response` of each call that came back as an error (malformed, arguments, tool)."""
    return [
        f"{call['name']}: {call['response'][:200]}"
        for turn in trajectory.turns
        for call in turn["calls"]
        if call["error"]
    ]


def _why_not(trajectory: Trajectory) -> str:
    info = trajectory.reward_info
    parts = [
        f"{info.get('resolution', 'none')}",
        info.get("reason", ""),
        trajectory.status_reason,
        *_failed_calls(trajectory)[:2],
    ]
    return "; ".join(part for part in parts if part)


async def solve_all(
    tasks: list[Task],
    pool: SandboxPool,
    tokenizer: Tokenizer,
    agent: AgentConfig,
    config: TasksConfig,
    jobs: int,
    progress: Callable[[OracleResult], None] | None = None,
    seed: int = 0,
) -> list[OracleResult]:
    """The oracle on every task, `jobs` at a time; results in task order."""
    tools = ToolSet.for_agent(agent)

    def solve(task: Task) -> Awaitable[OracleResult]:
        return solve_with_oracle(task, pool, tokenizer, agent, config, tools, seed)

    return await map_bounded(tasks, solve, jobs, progress)
