"""Edit drills: cut from an oracle demonstration's reads, one synthesized bug each, line numbers
kept, the edit naming the listing's lines, the task's own bug never shown as correct code."""

from __future__ import annotations

import asyncio
import copy
import re

import pytest
from tasks_helpers import config

from overture.recipes.main_job.drills import edit_drills
from overture.sandbox import SandboxPool
from overture.supervised.demonstrations import render_demonstration
from overture.tasks.oracle import solve_all
from overture.text import train_default_tokenizer

ROW = re.compile(r"^\s*(\d+)\|(.*)$")


def _demonstrations(tasks, oracle_edits: str = "lines"):
    async def main():
        run = config(oracle_edits=oracle_edits)
        async with SandboxPool(run.sandbox) as pool:
            return await solve_all(tasks, pool, train_default_tokenizer(), run.agent, run.tasks, jobs=2)

    return [result.demonstration for result in asyncio.run(main())]


def _rows(listing: str) -> list[tuple[int, str]]:
    return [(int(m.group(1)), m.group(2)) for m in map(ROW.match, listing.split("\n")) if m]


def _read_and_fix(record):
    messages = record["messages"]
    (read_at,) = [
        i for i, m in enumerate(messages) if any(c["name"] == "read_file" for c in m.get("tool_calls", []))
    ]
    listing = messages[read_at + 1]["content"]  # the read is the turn's first call
    (fix,) = [c["arguments"] for m in messages for c in m.get("tool_calls", []) if c["name"] == "edit_lines"]
    return messages[read_at]["tool_calls"][0]["arguments"], listing, fix


@pytest.mark.parametrize("oracle_edits", ["lines", "functions"])
def test_drills_fix_one_synthesized_bug_in_the_demonstrations_listing(numbers_tasks, oracle_edits):
    tokenizer = train_default_tokenizer()
    records = _demonstrations(numbers_tasks[:4], oracle_edits)
    total = 0
    for record in records:
        arguments, listing, fix = _read_and_fix(record)
        rows = dict(_rows(listing))
        fixed_lines = range(fix["start_line"], fix["end_line"] + 1)
        whole = (fix["start_line"], fix["end_line"]) == (min(rows), max(rows))
        assert whole == (oracle_edits == "functions")  # these tasks' functions fit in a turn
        assert all(n in rows for n in fixed_lines)  # the read shows the task's bug...
        if len(fix["new_string"].splitlines()) != len(fixed_lines):
            assert edit_drills(record) == []  # a fix that moves line numbers leaves no true listing
            continue
        clean = {**{n: text for n, text in rows.items() if n not in fixed_lines},
                 **dict(zip(fixed_lines, fix["new_string"].splitlines(), strict=True))}  # fmt: skip
        drills = edit_drills(record)
        total += len(drills)
        for drill in drills:
            read, shown, edit = drill["messages"]
            assert read["tool_calls"][0]["arguments"] == arguments  # the demonstration's own call
            shown_rows = dict(_rows(shown["content"]))
            assert list(shown_rows) == list(rows)  # line numbers stay true
            assert shown["content"].splitlines()[-1] == listing.splitlines()[-1]  # and the footer
            call = edit["tool_calls"][0]
            assert call["name"] == "edit_lines" and call["arguments"]["file_path"] == arguments["path"]
            start, end = call["arguments"]["start_line"], call["arguments"]["end_line"]
            new = call["arguments"]["new_string"].splitlines()
            assert len(new) == end - start + 1 and new != [shown_rows[n] for n in range(start, end + 1)]
            if whole:  # a demonstration that rewrote its listing gives drills that do too
                assert (start, end) == (min(rows), max(rows))
            else:
                assert new[0] != shown_rows[start] and new[-1] != shown_rows[end]  # the changed lines
            restored = {**shown_rows, **dict(zip(range(start, end + 1), new, strict=True))}
            assert restored == clean  # ...a drill restores it
            conversation = render_demonstration(tokenizer, drill)
            assert conversation.assistant_turn_count == 2 and len(conversation) < 1024
    assert total >= 8  # a whole function gives several drills


def test_listings_that_are_not_whole_give_no_drills(numbers_tasks):
    (record,) = _demonstrations(numbers_tasks[:1])
    assert edit_drills(record, per_read=2) and len(edit_drills(record, per_read=2)) <= 2
    assert edit_drills({"messages": [m for m in record["messages"] if m["role"] != "tool"]}) == []

    _, listing, _ = _read_and_fix(record)
    rows = listing.split("\n")
    cut_in_the_middle = "\n".join(
        [*rows[:2], "[... 40 of 300 tokens cut from the middle of this response ...]", *rows[3:]]
    )
    shortened = "\n".join([rows[0] + "… [120 more characters]", *rows[1:]])
    for broken in (cut_in_the_middle, shortened, "Error: read_file: no such file"):
        damaged = copy.deepcopy(record)
        for message in damaged["messages"]:
            if message["role"] == "tool" and message["content"] == listing:
                message["content"] = broken
        assert edit_drills(damaged) == [], broken

    no_edit = {
        "messages": [
            m
            for m in record["messages"]
            if not any(c["name"] == "edit_lines" for c in m.get("tool_calls", []))
        ]
    }
    assert edit_drills(no_edit) == []


def test_an_edit_shown_only_to_be_refused_is_no_fix_to_drill(numbers_tasks):
    (record,) = _demonstrations(numbers_tasks[:1], "functions")
    messages = record["messages"]
    (edit_at,) = [
        i for i, m in enumerate(messages) if any(c["name"] == "edit_lines" for c in m.get("tool_calls", []))
    ]
    refused = copy.deepcopy(messages[edit_at])
    refused["tool_calls"][0]["arguments"]["new_string"] = "def broken(:\n"
    refused["train"] = False
    reply = {"role": "tool", "content": "Error: edit_lines: edit not applied, the file is unchanged"}
    shown = {**record, "messages": [*messages[:edit_at], refused, reply, *messages[edit_at:]]}
    assert edit_drills(shown) == edit_drills(record) != []
