"""Hostile tool-call JSON (deep nesting, huge numbers, runaway length, text that is no text) gets a
readable `Error:` naming what is wrong, through the parser, a turn in a real sandbox and
`overture tools run`; the call is counted invalid and the turn's other calls still run."""

from __future__ import annotations

import json

import pytest
from agent_helpers import call_text, make_repo, raw_call, run_calls
from typer.testing import CliRunner

from overture.cli.main import app
from overture.text import parse_assistant
from overture.text.tool_calls import MAX_CALL_CHARS, MAX_JSON_DEPTH, MAX_NUMBER_DIGITS

runner = CliRunner()
BM25 = ["--set", "agent.search_backend=bm25"]
GOOD = call_text(("list_dir", {"path": "calc"}))


def nested(depth: int, open_: str = "[", close: str = "]") -> str:
    return open_ * depth + close * depth


def deep_object(depth: int) -> str:
    return '{"a": ' * depth + "1" + "}" * depth


def call_with(argument_json: str) -> str:
    """A call of read_file whose `path` is the given JSON text."""
    return '{"name": "read_file", "arguments": {"path": ' + argument_json + "}}"


TOO_DEEP = f"nested more than {MAX_JSON_DEPTH} levels deep"
HOSTILE = [
    ("arrays 1,000 deep", nested(1000), TOO_DEEP),
    ("objects 1,000 deep", deep_object(1000), TOO_DEEP),
    ("arrays 100,000 deep, unclosed", "[" * 100_000, TOO_DEEP),
    ("an argument 1,000 deep", call_with(nested(1000)), TOO_DEEP),
    ("an argument one level too deep", call_with(nested(MAX_JSON_DEPTH - 1)), TOO_DEEP),
    (
        "arguments as a string 1,000 deep",
        json.dumps({"name": "read_file", "arguments": nested(1000)}),
        '"arguments" is a string that is not valid JSON: JSON ' + TOO_DEEP,
    ),
    ("an integer of 4,301 digits", call_with("9" * 4301), "a number of 4,301 characters"),
    ("a negative integer of 5,000 digits", call_with("-" + "1" * 4999), "a number of 5,000 characters"),
    ("a float of 2,000 digits", call_with("1." + "5" * 1998), "a number of 2,000 characters"),
    ("a huge name", '{"name": ' + "7" * 10_000 + ', "arguments": {}}', "a number of 10,000 characters"),
    ("a block over the size cap", call_with('"' + "a" * MAX_CALL_CHARS + '"'), "characters; at most"),
]


@pytest.mark.parametrize(("label", "body", "words"), HOSTILE, ids=[case[0] for case in HOSTILE])
def test_the_parser_answers_hostile_json_with_a_reason(label, body, words):
    turn = parse_assistant(f"{GOOD}\n{raw_call(body)}\n{GOOD}", ["read_file", "list_dir"])
    assert [type(block).__name__ for block in turn.blocks()] == ["ToolCall", "MalformedCall", "ToolCall"]
    (error,) = turn.errors
    assert error.index == 1 and words in error.reason
    assert len(error.reason) < 200  # the reason names the problem; it does not echo the input


def test_json_up_to_the_limits_is_a_call():
    # The call object, its arguments, then the path's arrays: the deepest sits at the limit.
    at_the_limit = call_with(nested(MAX_JSON_DEPTH - 2))
    longest = call_with("-" + "9" * (MAX_NUMBER_DIGITS - 1))
    turn = parse_assistant(raw_call(at_the_limit) + raw_call(longest))
    assert not turn.errors and [call.name for call in turn.calls] == ["read_file", "read_file"]
    assert turn.calls[1].arguments["path"] == -int("9" * (MAX_NUMBER_DIGITS - 1))


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    return make_repo(tmp_path_factory.mktemp("bounds"))


def test_a_turn_in_a_sandbox_answers_each_hostile_block_in_its_place(repo):
    blocks = [raw_call(body) for _, body, _ in HOSTILE[:8]]
    records = run_calls(repo, "\n".join([GOOD, *blocks, GOOD]))
    assert len(records) == len(blocks) + 2
    assert records[0].ok and records[-1].ok and records[0].response == records[-1].response
    for record, (label, _, words) in zip(records[1:-1], HOSTILE, strict=False):
        assert record.error == "malformed" and record.invalid, label
        assert record.response.startswith("Error: malformed tool call:") and words in record.response, label


def test_argument_checks_name_long_numbers_and_lone_surrogates(repo):
    path_number, surrogate, glob_surrogate = run_calls(
        repo,
        "\n".join(
            [
                raw_call(call_with("1" * 200)),
                raw_call(call_with('"calc/\\ud800.py"')),
                raw_call('{"name": "list_dir", "arguments": {"ignore_globs": ["*.pyc", "\\udcff"]}}'),
            ]
        ),
    )
    assert path_number.error == "arguments" and path_number.response == (
        "Error: read_file: argument 'path' must be a string, got a number of 200 digits"
    )
    assert surrogate.error == "arguments" and "'path' is not valid text" in surrogate.response
    assert "lone surrogate '\\ud800' at character 5" in surrogate.response
    assert glob_surrogate.error == "arguments" and "'\\udcff' at character 0" in glob_surrogate.response


def run_cli(repo, *args, **kwargs):
    return runner.invoke(app, ["tools", "run", "--workspace", str(repo), *args, *BM25], **kwargs)


def test_tools_run_answers_deep_nesting_and_huge_numbers(tmp_path, repo):
    calls = tmp_path / "turn.txt"
    calls.write_text("\n".join([GOOD, raw_call(nested(1000)), raw_call(call_with("9" * 4301)), GOOD]))
    for args, stdin in ((["--calls", str(calls)], None), (["--calls", "-"], calls.read_bytes())):
        result = run_cli(repo, *args, input=stdin)
        assert result.exit_code == 0, result.output
        data = json.loads(result.stdout)
        assert [call["error"] for call in data["calls"]] == ["", "malformed", "malformed", ""]
        assert data["invalid_calls"] == 2
        assert data["responses"][1] == f"Error: malformed tool call: JSON {TOO_DEEP}"
        assert data["responses"][2] == (
            "Error: malformed tool call: invalid JSON: a number of 4,301 characters; at most 1,000 are read"
        )
        assert data["responses"][0] == data["responses"][3] != ""


def test_tools_run_refuses_calls_that_are_not_utf8_by_name(tmp_path, repo, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a short name, so that the error box does not wrap it
    (tmp_path / "turn.bin").write_bytes(GOOD.encode() + b"\n\xff\xfe")
    result = run_cli(repo, "--calls", "turn.bin")
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert f"turn.bin: not UTF-8 text (byte {len(GOOD) + 1} is 0xff)" in result.output
    from_stdin = run_cli(repo, "--calls", "-", input=b"\xc3(")
    assert from_stdin.exit_code == 2
    assert "standard input: not UTF-8 text (byte 0 is 0xc3)" in from_stdin.output
