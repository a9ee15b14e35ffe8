"""Malformed calls never crash a turn and are never dropped: each gets an error the model can read,
in its place among the turn's responses, and is counted as invalid."""

from __future__ import annotations

import pytest
from agent_helpers import call_text, make_repo, raw_call, run_calls

from overture.agent import behaviour_metrics

GOOD = call_text(("list_dir", {"path": "calc"}))

CASES = [
    ("bad JSON", raw_call('{"name": "read_file", "arguments": {"path": "a.py"'), "malformed", "invalid JSON"),
    ("not an object", raw_call('["read_file"]'), "malformed", "expected a JSON object"),
    ("empty block", raw_call(""), "malformed", "empty tool call"),
    ("unknown tool", raw_call('{"name": "rm_rf", "arguments": {}}'), "malformed", "unknown tool 'rm_rf'"),
    ("no name", raw_call('{"arguments": {}}'), "malformed", 'missing "name"'),
    (
        "arguments not an object",
        raw_call('{"name": "list_dir", "arguments": 3}'),
        "malformed",
        "must be a JSON object",
    ),
    ("missing argument", call_text(("read_file", {})), "arguments", "missing required argument 'path'"),
    (
        "unknown argument",
        call_text(("read_file", {"path": "README.md", "lines": 3})),
        "arguments",
        "unknown argument 'lines'",
    ),
    (
        "wrong type",
        call_text(("read_file", {"path": "README.md", "offset": "10"})),
        "arguments",
        "argument 'offset' must be an integer >= 1, got a string",
    ),
    (
        "boolean for integer",
        call_text(("read_file", {"path": "README.md", "limit": True})),
        "arguments",
        "argument 'limit' must be an integer",
    ),
    (
        "bad enum",
        call_text(("grep", {"pattern": "x", "output_mode": "lines"})),
        "arguments",
        "one of 'content'",
    ),
    (
        "below minimum",
        call_text(("read_file", {"path": "README.md", "offset": 0})),
        "arguments",
        "must be an integer >= 1, got the number 0",
    ),
    (
        "number for string",
        call_text(("read_file", {"path": 2.5})),
        "arguments",
        "argument 'path' must be a string, got the number 2.5",
    ),
    ("array items", call_text(("list_dir", {"ignore_globs": [1]})), "arguments", "an array of strings"),
    ("stray close", "</tool_call>", "malformed", "stray </tool_call>"),
    (
        "unclosed at end",
        '<tool_call>\n{"name": "list_dir", "arguments": {}}',
        "malformed",
        "unclosed <tool_call>",
    ),
]


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    return make_repo(tmp_path_factory.mktemp("malformed"))


@pytest.mark.parametrize(("label", "block", "kind", "words"), CASES, ids=[case[0] for case in CASES])
def test_each_malformed_call_gets_a_readable_error_in_its_place(repo, label, block, kind, words):
    # The bad block sits between two good calls: both still run, and the answers keep their places.
    records = run_calls(repo, f"{GOOD}\n{block}\n{GOOD}")
    assert len(records) == 3
    first, bad, last = records
    assert first.ok and last.ok and first.response == last.response
    assert bad.error == kind and bad.invalid
    assert bad.response.startswith("Error:") and words in bad.response


def test_an_unclosed_block_before_the_next_is_reported_and_the_next_still_runs(repo):
    text = '<tool_call>\n{"name": "list_dir", "arguments": {}}\n' + GOOD
    bad, good = run_calls(repo, text)
    assert bad.error == "malformed" and "a new <tool_call> began" in bad.response
    assert good.ok and good.response.startswith("__init__.py")


def test_invalid_calls_are_counted_in_the_metrics(repo):
    text = "\n".join(block for _, block, _, _ in CASES[:5]) + "\n" + GOOD
    records = run_calls(repo, text)
    turn = {"calls": [r.to_dict() for r in records], "tool_wall_s": 0.0, "generation_s": 0.0}
    metrics = behaviour_metrics([turn], token_count=10, policy_tokens=5)
    assert metrics["tool_calls"] == 6 and metrics["invalid_calls"] == 5
    assert metrics["invalid_call_rate"] == pytest.approx(5 / 6)
