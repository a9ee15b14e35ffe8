"""The oracle solves synthesized tasks through the real tools, its episodes are usable SFT
demonstrations, and `check` accepts valid tasks and names what is wrong with broken ones."""

from __future__ import annotations

import asyncio
import dataclasses
import re

from tasks_helpers import config

from overture.agent import ScriptedPolicy
from overture.config import RunConfig
from overture.sandbox import SandboxPool
from overture.supervised.demonstrations import demonstration_problem, render_demonstration
from overture.tasks import oracle
from overture.tasks.check import check_tasks
from overture.tasks.oracle import file_edits, oracle_turns, plan_edits, solve_all, works_in_parallel
from overture.tasks.snapshots import starting_base
from overture.tasks.source_functions import enclosing_function
from overture.text import train_default_tokenizer
from overture.text.tool_calls import ToolCall


def _solve(tasks, run_config: RunConfig | None = None):
    async def main():
        run = run_config or config()
        async with SandboxPool(run.sandbox) as pool:
            return await solve_all(tasks, pool, train_default_tokenizer(), run.agent, run.tasks, jobs=2)

    return asyncio.run(main())


def _check(tasks):
    async def main():
        async with SandboxPool(RunConfig().sandbox) as pool:
            return await check_tasks(tasks, pool, RunConfig().tasks, jobs=2)

    return asyncio.run(main())


def test_oracle_solves_every_task_through_the_tools(numbers_task_set):
    _, tasks = numbers_task_set
    results = _solve(tasks)
    assert [r.why for r in results if not r.solved] == []
    for result in results:
        trajectory = result.trajectory
        assert trajectory.reward == 1.0 and trajectory.status == "finished"
        names = [[call["name"] for call in turn["calls"]] for turn in trajectory.turns]
        assert names[0] == ["grep", "codebase_search"]  # searches in parallel, then reads
        assert names[1][0] == "read_file"
        # It reads the function from its `def` line, a number the grep of the first turn printed.
        printed = re.findall(r": (\d+): def ", trajectory.turns[0]["calls"][0]["response"])
        assert trajectory.turns[1]["calls"][0]["arguments"]["offset"] in {int(n) for n in printed}
        assert "edit_lines" in names[2]
        assert names[-1] == ["finish"]
        assert trajectory.metrics["reads_before_first_edit"] >= 4
        assert trajectory.metrics["invalid_calls"] == 0


def test_oracle_demonstrations_render_to_the_episode_tokens(numbers_task_set):
    _, tasks = numbers_task_set
    (result,) = _solve(tasks[:1])
    record = result.demonstration
    assert demonstration_problem(record) is None
    conversation = render_demonstration(train_default_tokenizer(), record)
    assert conversation.token_ids == result.trajectory.token_ids
    assert conversation.loss_mask == result.trajectory.loss_mask


def test_edits_name_the_changed_lines_and_apply_bottom_up():
    before = "x = 1\ny = 2\nx = 1\nz = 3\nw = 4\n"
    after = "a = 0\nx = 1\ny = 2\nx = 5\nz = 3\nz2 = 3\n"  # insert at 1, change 3 and 5
    edits = file_edits("a.py", before, after)
    assert [(edit.line, edit.end) for edit in edits] == [(1, 0), (3, 3), (5, 5)]
    assert edits[1].old == "x = 1\n" and edits[1].new == "x = 5\n"  # the changed line alone
    lines = before.splitlines(keepends=True)
    for edit in sorted(edits, key=lambda edit: -edit.line):  # the oracle's call order
        lines[edit.line - 1 : edit.end] = [edit.new]
        assert edit.old == "".join(before.splitlines(keepends=True)[edit.line - 1 : edit.end])
    assert "".join(lines) == after
    (appended,) = file_edits("a.py", "a\nb\n", "a\nb\nc\n")  # an insertion takes the line before
    assert (appended.line, appended.end, appended.old, appended.new) == (2, 2, "b\n", "b\nc\n")


def test_whole_function_edits_write_out_the_function_as_fixed():
    before = (
        "import os\n"  # 1
        "LIMIT = 3\n"  # 2
        "\n"  # 3
        "def f(x):\n"  # 4
        "    y = x + 1\n"  # 5
        "    z = y * 2\n"  # 6
        "    return z\n"  # 7
        "\n"  # 8
        "def g():\n"  # 9
        "    return 1\n"  # 10
    )
    after = (
        "import os\n"
        "LIMIT = 4\n"  # outside any function: stays an edit of its line
        "\n"
        "def f(x):\n"
        "    y = x - 1\n"  # two changes in f, one adding a line: one edit of all of f
        "    z = y * 2\n"
        "    z += 1\n"
        "    return z\n"
        "\n"
        "def g():\n"
        "    return 1\n"
    )
    narrow = file_edits("a.py", before, after)
    assert [(edit.line, edit.end) for edit in narrow] == [(2, 2), (5, 5), (6, 6)]
    edits = file_edits("a.py", before, after, whole_functions=True)
    assert [(edit.line, edit.end) for edit in edits] == [(2, 2), (4, 7)]
    whole = edits[1]
    assert whole.old == "".join(before.splitlines(keepends=True)[3:7])
    assert whole.new == "".join(after.splitlines(keepends=True)[3:8])
    lines = before.splitlines(keepends=True)
    for edit in sorted(edits, key=lambda edit: -edit.line):
        lines[edit.line - 1 : edit.end] = [edit.new]
    assert "".join(lines) == after


def test_the_oracle_rewrites_the_function_it_read_when_asked(numbers_task_set):
    _, tasks = numbers_task_set
    results = _solve(tasks, config(oracle_edits="functions"))
    assert [r.why for r in results if not r.solved] == []
    for result in results:
        turns = result.trajectory.turns
        (read,) = [call["arguments"] for call in turns[1]["calls"] if call["name"] == "read_file"]
        (edit,) = [call["arguments"] for call in turns[2]["calls"]]
        # The lines the read listed, all of them: numbers the read call and its footer hold.
        assert (edit["start_line"], edit["end_line"]) == (read["offset"], read["offset"] + read["limit"] - 1)
        assert edit["new_string"].startswith("def ")


def test_a_function_too_long_for_a_turn_is_edited_on_its_changed_lines(numbers_task_set):
    _, tasks = numbers_task_set
    task = tasks[0]
    tokenizer = train_default_tokenizer()

    def longest_turn(whole_functions: bool) -> int:
        turns = oracle_turns(task, plan_edits(task, starting_base(task), whole_functions))
        policy = ScriptedPolicy(tokenizer, [turn.text() for turn in turns])  # as the episode writes them
        return max(len(policy.turn_tokens(k)) for k in range(len(turns)))

    budget = longest_turn(False)  # the changed lines fit; the rewrite is cut before its call closes
    assert longest_turn(True) > budget + 2
    run = config(oracle_edits="functions")
    run.agent = run.agent.model_copy(update={"max_new_tokens": budget})
    (result,) = _solve([task], run)
    assert result.solved
    (edit,) = [call["arguments"] for call in result.trajectory.turns[2]["calls"]]
    (narrow,) = plan_edits(task, starting_base(task))
    assert (edit["start_line"], edit["end_line"]) == (narrow.line, narrow.end)


def test_an_edit_knows_the_function_it_is_in():
    source = (
        "import os\n"  # 1
        "\n"  # 2
        "class A:\n"  # 3
        "    def f(self):\n"  # 4
        "        def g():\n"  # 5
        "            return 1\n"  # 6
        "        return g()\n"  # 7
        "\n"  # 8
        "async def h():\n"  # 9
        "    await x\n"  # 10
    )
    assert enclosing_function(source, 6) == (5, 6)  # the innermost
    assert enclosing_function(source, 7) == (4, 7)
    assert enclosing_function(source, 10) == (9, 10)
    assert enclosing_function(source, 1) is None and enclosing_function(source, 3) is None
    assert enclosing_function("def broken(:\n", 1) is None
    (edit,) = file_edits("a.py", source, source.replace("return 1", "return 2"))
    assert edit.function == (5, 6)


def test_oracle_is_not_handed_the_answer_by_the_workspace(numbers_task_set):
    _, tasks = numbers_task_set
    task = tasks[0]
    edits = plan_edits(task, starting_base(task))
    assert len(oracle_turns(task, edits)) == 5  # search, read, edit, test, finish
    # The edit's old text is what the starting workspace holds; the fix exists only in the patch.
    buggy = (starting_base(task) / edits[0].path).read_text()
    assert edits[0].old in buggy and edits[0].new not in buggy


def test_oracle_runs_the_files_of_the_listed_tests_only(numbers_task_set):
    _, tasks = numbers_task_set
    task = tasks[0]
    many = [f"tests/test_{i % 7}.py::test_case_{i}" for i in range(30)]  # 7 files, 30 ids
    turns = oracle_turns(dataclasses.replace(task, FAIL_TO_PASS=many), plan_edits(task, starting_base(task)))
    (run,) = turns[3].calls
    # The statement lists the first five failing tests; their files are what a model can run.
    assert run.arguments["command"].endswith(" ".join(f"tests/test_{i}.py" for i in range(5)))
    assert "::" not in run.arguments["command"]


def test_a_run_with_a_failed_call_is_no_demonstration(numbers_task_set, monkeypatch):
    _, tasks = numbers_task_set
    planned = oracle.oracle_turns

    def with_a_bad_read(task, edits, parallel=True):  # the fix still lands; one read asks for a missing file
        turns = planned(task, edits, parallel)
        turns[1].calls.append(ToolCall("read_file", {"path": "no/such/file.py"}))
        return turns

    monkeypatch.setattr(oracle, "oracle_turns", with_a_bad_read)
    (result,) = _solve(tasks[:1])
    assert result.trajectory.reward_info["resolution"] == "resolved"
    assert not result.solved
    assert result.why.startswith("an oracle call failed: read_file: ")


def test_the_oracle_writes_no_demonstration_that_calls_a_tool_the_agent_lacks(numbers_task_set):
    _, tasks = numbers_task_set
    without_terminal = config().model_copy(deep=True)
    without_terminal.agent.tools = ["read_file", "edit_lines", "grep", "codebase_search", "finish"]
    (result,) = _solve(tasks[:1], without_terminal)
    assert (result.solved, result.why) == (False, "the fix calls run_terminal_cmd, not in agent.tools")
    without_terminal.agent.tools.append("run_terminal_cmd")
    (result,) = _solve(tasks[:1], without_terminal)
    assert result.solved
    announced = [tool["name"] for tool in result.demonstration["messages"][0]["tools"]]
    assert announced == ["read_file", "edit_lines", "codebase_search", "grep", "run_terminal_cmd", "finish"]


def test_check_accepts_valid_tasks_and_names_broken_ones(numbers_task_set):
    _, tasks = numbers_task_set
    assert [r.problems for r in _check(tasks) if not r.ok] == []

    task = tasks[0]
    passing = task.PASS_TO_PASS[0]
    already_passing = dataclasses.replace(task, instance_id="bad-1", FAIL_TO_PASS=[passing])
    no_fix = dataclasses.replace(task, instance_id="bad-2", patch="")
    wrong_fix = dataclasses.replace(task, instance_id="bad-3", patch=task.setup_patch)
    results = {r.instance_id: r.problems for r in _check([already_passing, no_fix, wrong_fix])}
    assert any("already pass before the fix" in p for p in results["bad-1"])
    assert any("no reference fix" in p for p in results["bad-2"])
    assert any("does not apply" in p or "do not pass with the reference fix" in p for p in results["bad-3"])


def test_without_parallel_calls_the_oracle_searches_and_reads_one_call_a_turn(numbers_task_set):
    _, tasks = numbers_task_set
    results = _solve(tasks[:3], config(oracle_parallel_share=0.0))
    assert [r.why for r in results if not r.solved] == []
    for result in results:
        assert result.parallel is False
        names = [[call["name"] for call in turn["calls"]] for turn in result.trajectory.turns]
        assert names[:4] == [["grep"], ["codebase_search"], ["read_file"], ["grep"]]
        assert all(len(calls) == 1 for calls in names)
        shown = [m for m in result.demonstration["messages"] if m["role"] == "assistant"]
        assert [len(m["tool_calls"]) for m in shown] == [1] * len(names)


def test_the_parallel_share_is_drawn_per_task_and_fixed_by_the_seed():
    ids = [f"repo-{i:04d}" for i in range(2000)]
    drawn = [works_in_parallel(task, 0, 0.2) for task in ids]
    assert 0.17 < sum(drawn) / len(ids) < 0.23
    assert drawn == [works_in_parallel(task, 0, 0.2) for task in ids]  # the same on every run
    assert drawn != [works_in_parallel(task, 1, 0.2) for task in ids]  # another seed, other tasks
    assert all(works_in_parallel(task, 0, 1.0) for task in ids)
    assert not any(works_in_parallel(task, 0, 0.0) for task in ids)
