"""Search drills: a demonstration's opening with its function renamed everywhere to a made-up name
and its line number moved, so that a model must copy both from the screen."""

from __future__ import annotations

import json

from overture.rl.demonstrations import render_demonstration
from overture.tasks.search_drills import _renamer, search_drills
from overture.text import train_default_tokenizer


def _demonstration(name: str, path: str, line: int) -> dict:
    statement = (
        "2 tests fail:\n"
        f"- `tests/test_core.py::test_{name}_rounds_down`\n"
        f"- `tests/test_core.py::test_{name}2_keeps_sign`\n\n"
        f'  File "tests/test_core.py", line 4, in test_{name}_rounds_down\n'
        f"    assert {name}(7, 2) == 3\n"
        f'  File "{path}", line {line + 2}, in {name}\n'
    )
    return {
        "task_id": f"task-{name}",
        "messages": [
            {"role": "system", "content": "You fix bugs."},
            {"role": "user", "content": statement},
            {
                "role": "assistant",
                "content": f"I'll look for `{name}` and for code about {name.replace('_', ' ')} rounds down.",
                "tool_calls": [
                    {"name": "grep", "arguments": {"pattern": f"def {name}\\b", "glob": "*.py"}},
                    {
                        "name": "codebase_search",
                        "arguments": {"query": f"{name.replace('_', ' ')} rounds down"},
                    },
                ],
            },
            {
                "role": "tool",
                "content": f"{path}: {line}: def {name}(a, b):\nother.py: {line}: def {name}(x):",
            },
            {
                "role": "tool",
                "content": f"1. tests/test_core.py:3-4 (test_{name}_rounds_down)\n"
                f"   4|    assert {name}(7, 2) == 3",
            },
            {
                "role": "assistant",
                "content": f"Let me read `{path}`.",
                "tool_calls": [
                    {"name": "read_file", "arguments": {"path": path, "offset": line, "limit": 5}}
                ],
            },
            {"role": "tool", "content": f" {line}|def {name}(a, b):"},
            {
                "role": "assistant",
                "content": "Fixing it.",
                "tool_calls": [{"name": "finish", "arguments": {}}],
            },
        ],
    }


def test_a_search_drill_renames_the_function_and_moves_its_line():
    records = [
        _demonstration("floor_div", "pkg/arith.py", 12),
        _demonstration("mean_value", "pkg/stats.py", 40),
        _demonstration("clamp_range", "pkg/arith.py", 20),
        _demonstration("slugify", "pkg/slugify.py", 3),  # the file is named after it: no drills
        _demonstration("__init__", "pkg/model.py", 7),  # a special method: no drills
    ]
    drills = search_drills(records, per_record=3, seed=1)
    assert search_drills(records, per_record=3, seed=1) == drills  # deterministic
    assert search_drills(records, per_record=3, seed=2) != drills
    by_task = {}
    for drill in drills:
        by_task.setdefault(drill["task_id"].split("#")[0], []).append(drill)
    assert sorted(by_task) == ["task-clamp_range", "task-floor_div", "task-mean_value"]
    assert len(by_task["task-floor_div"]) == 3
    words = {"floor", "div", "mean", "value", "clamp", "range", "slugify"}
    made_up = set()

    for drill in by_task["task-floor_div"]:
        messages = drill["messages"]
        assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool", "assistant"]
        text = json.dumps(messages).replace("test_floor_div2_keeps_sign", "")
        assert "floor_div" not in text and "floor div" not in text
        (grep, search) = messages[1]["tool_calls"]
        other = grep["arguments"]["pattern"].removeprefix("def ").removesuffix("\\b")
        assert other not in {"floor_div", "mean_value", "clamp_range", "slugify"}  # no known name
        assert 2 <= len(other.split("_")) <= 3 and set(other.split("_")) <= words
        made_up.add(other)
        assert f"test_{other}_rounds_down" in messages[0]["content"]  # test names renamed
        assert "test_floor_div2_keeps_sign" in messages[0]["content"]  # `NAME2` is another name
        assert f"in {other}\n" in messages[0]["content"] and f"assert {other}(7, 2)" in messages[0]["content"]
        assert search["arguments"]["query"] == f"{other.replace('_', ' ')} rounds down"
        (read,) = messages[4]["tool_calls"]
        line = read["arguments"]["offset"]
        assert read["arguments"] == {"path": "pkg/arith.py", "offset": line, "limit": 5}
        grep_output = messages[2]["content"].splitlines()
        assert grep_output[0] == f"pkg/arith.py: {line}: def {other}(a, b):"  # the number the read copies
        assert grep_output[1] == f"other.py: 12: def {other}(x):"  # another file's line stays
    assert len(made_up) == 3  # a record's drills use different names
    renumbered = {drill["messages"][4]["tool_calls"][0]["arguments"]["offset"] for drill in drills}
    assert renumbered - {12, 20, 40}  # lines are moved (a drawn number may equal the old one)
    tokenizer = train_default_tokenizer()
    conversation = render_demonstration(tokenizer, drills[0])
    assert conversation.assistant_turn_count == 2
    assert records[0]["messages"][5]["tool_calls"][0]["arguments"]["offset"] == 12  # records untouched


def test_records_without_a_definition_grep_and_a_read_give_no_drills():
    record = _demonstration("floor_div", "pkg/arith.py", 12)
    other = _demonstration("mean_value", "pkg/stats.py", 40)
    no_read = {
        "messages": [
            m
            for m in record["messages"]
            if not m.get("tool_calls") or m["tool_calls"][0]["name"] != "read_file"
        ]
    }
    # words of the names with an opening only: `value_mean` is the one name left to make up
    assert [drill["task_id"] for drill in search_drills([no_read, other], per_record=2)] == [
        "task-mean_value#search-0"
    ]
    assert search_drills([record, other], per_record=0) == []


def test_a_made_up_name_is_no_name_of_the_opening():
    record = _demonstration("floor_div", "pkg/arith.py", 12)
    drills = search_drills([record], per_record=1)
    assert drills[0]["messages"][1]["tool_calls"][0]["arguments"]["pattern"] == "def div_floor\\b"
    record["messages"][1]["content"] += "\nAlso failing: `tests/test_core.py::test_div_floor_keeps_sign`."
    assert search_drills([record], per_record=1) == []  # `div_floor` is a name there already


def test_a_name_renamed_to_one_that_contains_it_is_renamed_once():
    rename = _renamer("render", "render_month")
    assert rename("test_render_rounds_down: render(x); render month") == (
        "test_render_month_rounds_down: render_month(x); render_month month"
    )
