"""`overture tools run` and `overture agent`: real sandboxes, a real repository, a scripted policy,
and a trained checkpoint served by vLLM as it is (needs `make vllm-env`)."""

from __future__ import annotations

import json
import subprocess

import pytest
from agent_helpers import call_text, make_repo
from conftest import SMOKE_CONFIG
from typer.testing import CliRunner

from overture.cli.main import app
from overture.engine.vllm_client import VllmClient
from overture.engine.vllm_server import VllmServer, default_python
from overture.text import Tokenizer
from overture.text.chat import (
    render_assistant,
    render_assistant_header,
    render_system,
    render_tool_responses,
    render_user,
)
from overture.text.tool_calls import ToolCall

runner = CliRunner()

FIX_SCRIPT = [
    call_text(
        ("grep", {"pattern": "def mean", "output_mode": "files_with_matches"}),
        ("codebase_search", {"query": "mean of values"}),
        prose="Looking for mean().",
    ),
    call_text(("read_file", {"path": "calc/core.py", "offset": 9, "limit": 3})),
    call_text(
        (
            "search_replace",
            {"file_path": "calc/core.py", "old_string": "(len(values) + 1)", "new_string": "len(values)"},
        )
    ),
    call_text(("run_terminal_cmd", {"command": "python -m pytest -q tests 2>&1 | tail -1"})),
    call_text(("finish", {"summary": "mean() divided by n + 1; now by n"})),
]
BM25 = ["--set", "agent.search_backend=bm25"]


def test_tools_run_prints_responses_and_timings_as_json(tmp_path):
    repo = make_repo(tmp_path)
    calls = tmp_path / "turn.txt"
    calls.write_text(
        call_text(
            ("read_file", {"path": "README.md"}), ("write_file", {"file_path": "x.txt", "contents": "x\n"})
        )
        + "\n<tool_call>\n{bad json\n</tool_call>"
    )
    result = runner.invoke(
        app, ["tools", "run", "--workspace", str(repo), "--calls", str(calls), "--diff", *BM25]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout.strip().splitlines()[-1])
    assert [c["name"] for c in data["calls"]] == ["read_file", "write_file", ""]
    assert data["responses"][0].startswith(" 1|# calc") and data["invalid_calls"] == 1
    assert data["responses"][2].startswith("Error: malformed tool call: invalid JSON")
    assert all(c["duration_s"] >= 0 for c in data["calls"]) and "+x" in data["diff"]
    assert not (repo / "x.txt").exists()  # the workspace is never modified
    from_stdin = runner.invoke(
        app,
        ["tools", "run", "--workspace", str(repo), "--calls", "-", *BM25],
        input=call_text(("list_dir", {"path": "tests"})),
    )
    assert json.loads(from_stdin.stdout)["responses"] == ["test_calc.py  (73 bytes)"]


def test_agent_fixes_a_bug_with_a_scripted_policy_and_apply_writes_exactly_that_diff(tmp_path):
    repo = make_repo(tmp_path)
    script, out = tmp_path / "script.json", tmp_path / "trajectory.json"
    script.write_text(json.dumps(FIX_SCRIPT))
    args = ["agent", "--repo", str(repo), "--script", str(script), "--out", str(out), *BM25, "Fix mean()."]

    dry = runner.invoke(app, args)
    assert dry.exit_code == 0, dry.output
    diff = dry.stdout
    assert "-    return sum(values) / (len(values) + 1)\n+    return sum(values) / len(values)\n" in diff
    assert "── turn 0 · assistant" in dry.stderr and "── [0] grep · ok" in dry.stderr
    assert "1 passed" in dry.stderr and "── episode finished (finish)" in dry.stderr
    trajectory = json.loads(out.read_text())
    assert trajectory["status"] == "finished" and trajectory["metrics"]["reads_before_first_edit"] == 3
    assert "(len(values) + 1)" in (repo / "calc" / "core.py").read_text()  # untouched without --apply

    pristine = tmp_path / "pristine"
    subprocess.run(["cp", "-a", str(repo), str(pristine)], check=True)
    applied = runner.invoke(app, [*args, "--apply"])
    assert applied.exit_code == 0, applied.output
    assert applied.stdout == diff
    # The repository now differs from its original copy by exactly the printed diff.
    after = subprocess.run(["diff", "-ruN", "pristine", "repo"], cwd=tmp_path, capture_output=True, text=True)
    changed = [
        line for line in after.stdout.splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---")
    ]
    assert changed == [
        line for line in diff.splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---")
    ]
    tests = subprocess.run(
        ["python", "-m", "pytest", "-q", "tests"], cwd=repo, capture_output=True, text=True
    )
    assert tests.returncode == 0, tests.stdout


def test_agent_rejects_bad_arguments(tmp_path):
    repo = make_repo(tmp_path)
    neither = runner.invoke(app, ["agent", "--repo", str(repo), "task"])
    assert neither.exit_code == 2 and "exactly one of --model DIR or --script FILE" in neither.output
    bad = tmp_path / "bad.json"
    bad.write_text('{"not": "a list"}')
    result = runner.invoke(app, ["agent", "--repo", str(repo), "--script", str(bad), "task"])
    assert result.exit_code == 2 and "JSON list of strings" in result.output
    url = ["--engine-url", "http://127.0.0.1:9"]
    result = runner.invoke(app, ["agent", "--repo", str(repo), "--script", str(bad), *url, "task"])
    assert result.exit_code == 2 and "--engine-url needs --model" in " ".join(result.output.split())
    url = ["--engine-url", "localhost:8000"]
    result = runner.invoke(app, ["agent", "--repo", str(repo), "--model", str(tmp_path), *url, "task"])
    assert result.exit_code != 0 and "expected http://HOST:PORT" in " ".join(result.output.split())
    empty = tmp_path / "empty"
    empty.mkdir()
    model, smoke = ["--model", str(empty)], str(SMOKE_CONFIG)
    for args in (["agent", "--repo", str(repo), *model, "task"], ["eval", smoke, "--checkpoint", str(empty)]):
        result = runner.invoke(app, args)
        flat = " ".join(result.output.split())
        assert result.exit_code != 0 and "not a Hugging Face checkpoint directory" in flat, result.output
        assert "tokenizer.json" not in flat


def test_apply_refuses_a_diff_with_changes_patch_cannot_write(tmp_path):
    from overture.cli.agent_run import apply_diff
    from overture.sandbox import SandboxError

    repo = make_repo(tmp_path)
    before = (repo / "calc" / "core.py").read_text()
    diff = (
        "--- a/calc/core.py\n+++ b/calc/core.py\n@@ -1 +1 @@\n-" + before.splitlines()[0] + "\n+# changed\n"
        "Binary files /dev/null and b/blob.bin differ\n"
    )
    with pytest.raises(SandboxError, match="patch cannot write"):
        apply_diff(repo, diff)
    assert (repo / "calc" / "core.py").read_text() == before


@pytest.mark.skipif(not default_python().exists(), reason="vLLM's environment is not built: `make vllm-env`")
def test_a_trained_checkpoint_served_by_vllm_as_it_is_runs_the_agent_and_speaks_its_chat_format(
    smoke_run, tmp_path
):
    checkpoint = smoke_run[0] / "checkpoints" / "final"  # as the job wrote it: weights and tokenizer
    repo, out = make_repo(tmp_path), tmp_path / "trajectory.json"
    # The server loads the checkpoint's tokenizer and chat template, as `vllm serve` does.
    with VllmServer(
        checkpoint, tmp_path / "server.log", tokenizer=True, env={"VLLM_CPU_KVCACHE_SPACE": "1"}
    ) as server:  # fmt: skip
        call = ToolCall("grep", {"pattern": "def mean </tool_call>"})
        messages = [
            {"role": "system", "content": "You fix bugs."},
            {"role": "user", "content": "Fix mean()."},
            {"role": "assistant", "content": "Looking.", "tool_calls": [{
                "id": "c0", "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
            }]},
            {"role": "tool", "tool_call_id": "c0", "content": "calc/core.py"},
        ]  # fmt: skip
        tools = [{"type": "function", "function": {"name": "grep", "parameters": {"type": "object"}}}]
        body = {"model": "overture", "messages": messages, "tools": tools, "add_generation_prompt": True}
        rendered = VllmClient(server.url)._request("POST", "/tokenize", body)["tokens"]
        assert Tokenizer.from_dir(checkpoint).decode(rendered) == (
            render_system("You fix bugs.", tools) + render_user("Fix mean().")
            + render_assistant("Looking.", [call]) + render_tool_responses(["calc/core.py"])
            + render_assistant_header()
        )  # fmt: skip

        result = runner.invoke(app, [
            "agent", "--repo", str(repo), "--model", str(checkpoint), "--engine-url", server.url,
            "--out", str(out), *BM25, "--set", "agent.max_turns=2", "--set", "agent.max_new_tokens=24",
            "Fix mean().",
        ])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "── episode " in result.stderr
    trajectory = json.loads(out.read_text())
    generated = [v for v, m in zip(trajectory["versions"], trajectory["loss_mask"], strict=True) if m]
    assert generated and set(generated) == {0}
    logprobs, mask = trajectory["behavior_logprobs"], trajectory["loss_mask"]
    sampled = [lp for lp, m in zip(logprobs, mask, strict=True) if m]
    assert all(lp <= 0 for lp in sampled) and any(lp < 0 for lp in sampled)
    assert "POST /v1/completions HTTP/1.1\" 200" in server.log_path.read_text()
