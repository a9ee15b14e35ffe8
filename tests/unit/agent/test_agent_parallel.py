"""Parallel tool calls: one turn's calls run at once, answer in call order, and writes to one file
apply in call order."""

from __future__ import annotations

from agent_helpers import call_text, in_sandbox, make_repo, run_calls

from overture.agent import ToolSet


def test_independent_calls_overlap_and_answer_in_call_order(tmp_path):
    repo = make_repo(tmp_path)
    # Each call announces itself, then waits (bounded) until all eight have: run one after the
    # other, the first would give up alone; run together, every call sees all eight.
    wait_for_all = (
        "touch .started-{i}; n=0; while [ $(ls .started-* | wc -l) -lt 8 ] && [ $n -lt 200 ]; "
        "do sleep 0.05; n=$((n+1)); done; echo call-{i} saw $(ls .started-* | wc -l)"
    )
    calls = [("run_terminal_cmd", {"command": wait_for_all.format(i=i)}) for i in range(8)]
    records = run_calls(repo, call_text(*calls))
    assert [r.index for r in records] == list(range(8))
    assert [r.response.splitlines()[-1] for r in records] == [f"call-{i} saw 8" for i in range(8)]
    assert max(r.started_s for r in records) < min(r.ended_s for r in records)


def test_mixed_tools_run_together(tmp_path):
    repo = make_repo(tmp_path)
    turn = call_text(
        ("run_terminal_cmd", {"command": "sleep 1"}),
        ("read_file", {"path": "calc/core.py", "limit": 1}),
        ("grep", {"pattern": "mean", "output_mode": "count"}),
    )
    sleeper, read, grep = run_calls(repo, turn)
    # The read and the grep finished while the command was still sleeping.
    assert read.ended_s < sleeper.ended_s and grep.ended_s < sleeper.ended_s
    assert read.response.startswith(" 1|") and "calc/core.py:" in grep.response


def test_calls_on_one_file_apply_in_call_order(tmp_path):
    repo = make_repo(tmp_path)

    async def body(box, context):
        tools = ToolSet()
        turn = call_text(
            ("write_file", {"file_path": "order.txt", "contents": "one\n"}),
            ("run_terminal_cmd", {"command": "sleep 1"}),  # an unrelated slow call in between
            ("search_replace", {"file_path": "order.txt", "old_string": "one", "new_string": "one two"}),
            ("read_file", {"path": "./order.txt"}),  # same file, other spelling
            (
                "search_replace",
                {"file_path": "/workspace/order.txt", "old_string": "two", "new_string": "two three"},
            ),
        )
        records = await tools.execute(tools.parse(turn), context)
        return records, box.files.read_text("order.txt")

    records, text = in_sandbox(repo, body)
    assert all(r.ok for r in records), [r.response for r in records]
    assert text == "one two three\n"
    assert records[3].response.startswith(" 1|one two\n")  # read after the edit before it, not after the next
    write, sleeper, first_edit, read, second_edit = records
    assert write.ended_s <= first_edit.started_s <= first_edit.ended_s <= read.started_s
    assert read.ended_s <= second_edit.started_s
    assert first_edit.ended_s < sleeper.ended_s  # the file's chain did not wait for the unrelated call
