"""The run viewer page: every trajectory and turn of a run, tokens by policy version, hostile text
kept as text, the run's charts, serving a run in progress, and `overture view`."""

from __future__ import annotations

import json
import re
import shutil
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner
from viewer_helpers import HOSTILE_PAYLOADS, HOSTILE_TASK_ID, all_trajectories, session_run_dir

from overture.cli.main import app
from overture.viewer import make_server, render_page
from overture.viewer.page import json_for_script
from overture.viewer.run_charts import rollout_means
from overture.viewer.run_data import load_run

DATA = re.compile(r'<script type="application/json" id="run-data">(.*?)</script>', re.DOTALL)


@pytest.fixture(scope="session")
def built_run_dir(tmp_path_factory) -> Path:
    """A run directory of real, graded episodes, one of them hostile (see viewer_helpers)."""
    return session_run_dir(tmp_path_factory)


@pytest.fixture(scope="session", params=["built", "smoke"])
def viewer_run_dir(request) -> Path:
    """The run directories the whole-run tests read: the built one, and the main job's smoke run."""
    if request.param == "smoke":
        return request.getfixturevalue("smoke_run")[0]
    return request.getfixturevalue("built_run_dir")


def page_data(html: str) -> dict[str, Any]:
    (found,) = DATA.findall(html)
    return json.loads(found)


def body_versions(record: dict[str, Any], turn: dict[str, Any]) -> list[int]:
    """The policy versions of a turn's tokens, one per run of equal versions."""
    runs: list[int] = []
    for version in record["versions"][turn["body_start"] : turn["body_end"]]:
        if not runs or runs[-1] != version:
            runs.append(version)
    return runs


def test_page_holds_every_trajectory_and_its_turns(viewer_run_dir):
    data = page_data(render_page(viewer_run_dir))
    shown = {t["id"]: t for t in data["trajectories"]}
    stored = all_trajectories(viewer_run_dir)
    assert len(shown) == sum(len(records) for records in stored.values()) > 0
    decoded = 0
    for source, records in stored.items():
        for position, record in enumerate(records):
            page = shown[f"{source}:{position}"]
            assert (page["task_id"], page["status"], page["reward"]) == (
                record["task_id"],
                record["status"],
                record["reward"],
            )
            assert page["statement"] == record["prompt"]
            assert data["systems"][page["system"]] == record["system"]
            assert len(page["turns"]) == len(record["turns"])
            for turn, recorded in zip(page["turns"], record["turns"], strict=True):
                assert [c["name"] for c in turn["calls"]] == [c["name"] for c in recorded["calls"]]
                assert [c["arguments"] for c in turn["calls"]] == [c["arguments"] for c in recorded["calls"]]
                assert [c["response"] for c in turn["calls"]] == [c["response"] for c in recorded["calls"]]
                # The turn's tokens, decoded by the run's tokenizer in runs of one policy version,
                # read as the text the episode recorded (an aborted turn has none recorded yet).
                if recorded["text"]:
                    assert "".join(text for _, text in turn["segments"]) == recorded["text"]
                    assert [v for v, _ in turn["segments"]] == body_versions(record, recorded)
                    decoded += 1
    assert decoded > 0


def test_a_resumed_rollout_shows_where_the_newer_policy_took_over(built_run_dir):
    data = page_data(render_page(built_run_dir))
    mixed = [
        (t, turn)
        for t in data["trajectories"]
        for turn in t["turns"]
        if len({v for v, _ in turn["segments"]}) > 1
    ]
    assert mixed, "the run holds a trajectory resumed under a newer policy"
    for trajectory, turn in mixed:
        versions = [v for v, _ in turn["segments"]]
        assert versions == sorted(versions)  # the older policy wrote first
        assert set(versions) <= {v for v, _ in trajectory["version_tokens"]}  # the legend lists them
        assert trajectory["lag"] is None or trajectory["lag"] >= 1


def test_hostile_text_is_escaped_everywhere(built_run_dir):
    html = render_page(built_run_dir)
    # Only the page's own two script elements, and no markup from the run at all.
    assert html.count("<script") == 2
    for payload in (*HOSTILE_PAYLOADS, "<img", "<b>bold", "</pre></details>", "<!--"):
        assert payload not in html
    data = page_data(html)
    (hostile,) = [t for t in data["trajectories"] if t["task_id"] == HOSTILE_TASK_ID]
    # Escaping loses nothing: the script receives the texts exactly as the run recorded them.
    texts = json.dumps(hostile)
    for payload in HOSTILE_PAYLOADS:
        assert json.dumps(payload)[1:-1] in texts
    responses = "".join(c["response"] for turn in hostile["turns"] for c in turn["calls"])
    assert HOSTILE_PAYLOADS[0] in responses  # the file the agent read back, as the tool returned it
    assert HOSTILE_PAYLOADS[1] in hostile["changes"]["diff"]
    assert hostile["changes"]["origin"] == "recorded"


def test_embedded_json_cannot_end_its_script_element():
    text = json_for_script(
        {"a": "</script><script>alert(1)</script>", "b": "&amp; \u2028", "n": float("nan")}
    )
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text) == {"a": "</script><script>alert(1)</script>", "b": "&amp; \u2028", "n": "nan"}


def test_page_is_self_contained_and_locks_down_scripts(viewer_run_dir):
    html = render_page(viewer_run_dir)
    assert "http://" not in html.replace("http://www.w3.org/2000/svg", "")
    assert "https://" not in html and "src=" not in html.split("<script type=")[0]
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', html).group(1)
    assert "default-src &#x27;none&#x27;" in policy and "script-src &#x27;sha256-" in policy


def test_charts_show_the_run_metrics(viewer_run_dir):
    html = render_page(viewer_run_dir)
    records = [json.loads(line) for line in (viewer_run_dir / "metrics.jsonl").read_text().splitlines()]
    rl = [r for r in records if r.get("phase") == "rl"]
    for record in rl:
        assert f"mean reward · step {record['step']}: {record['reward_mean']:.3g}" in html
    lags: dict[str, int] = {}
    for record in rl:
        for lag, count in record["staleness"].items():
            lags[lag] = lags.get(lag, 0) + count
    for lag, count in lags.items():
        assert f"<title>{lag}: {count}</title>" in html
    titles = ("Held-out pass@1", "Off-policy tokens", "Tool calls per turn", "Invalid call rate")
    for title in (*titles, "Turns per episode", "Generated tokens per episode", "Turns per resolved episode"):
        assert title in html


def test_a_run_in_progress_is_served_afresh_on_each_request(built_run_dir, tmp_path):
    run = shutil.copytree(built_run_dir, tmp_path / "run")
    server = make_server(run, port=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    try:
        first = page_data(urllib.request.urlopen(url, timeout=30).read().decode())
        step = run / "trajectories" / "rl-step-000002.jsonl"
        (run / "trajectories" / "rl-step-000003.jsonl").write_text(step.read_text() + '{"half a li')
        second_html = urllib.request.urlopen(url, timeout=30).read().decode()
        second = page_data(second_html)
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(url + "etc/passwd", timeout=30)
    finally:
        server.shutdown()
        server.server_close()
    assert len(second["trajectories"]) == len(first["trajectories"]) + 2
    assert "rl-step-000003.jsonl: 1 line(s) skipped" in second_html  # a line still being written
    assert missing.value.code == 404


def test_view_command_writes_the_page_and_names_a_bad_run_dir(viewer_run_dir, tmp_path):
    out = tmp_path / "page.html"
    result = CliRunner().invoke(app, ["view", str(viewer_run_dir), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == {"out": str(out)}
    assert len(page_data(out.read_text())["trajectories"]) > 0
    missing = CliRunner().invoke(app, ["view", str(tmp_path / "nowhere")])
    assert missing.exit_code == 2
    assert "nowhere: no such run directory" in missing.output


def test_edit_calls_become_diffs_when_no_workspace_diff_was_recorded():
    from overture.viewer.edits import call_diff

    by_text = {"name": "search_replace", "arguments": {"file_path": "a.py", "old_string": "x = 1",
                                                       "new_string": "x = 2"}}  # fmt: skip
    by_lines = {"name": "edit_lines", "arguments": {"file_path": "a.py", "start_line": 3, "end_line": 4,
                                                    "new_string": "y = 1\n"}}  # fmt: skip
    assert call_diff(by_text).splitlines()[-2:] == ["-x = 1", "+x = 2"]
    assert call_diff(by_lines) == "--- a/a.py\n+++ b/a.py\n@@ -3,2 +3,1 @@\n+y = 1\n"
    assert call_diff({**by_lines, "error": "tool"}) == ""  # a refused call changed nothing


def test_turns_per_resolved_episode_average_only_the_episodes_that_resolved(built_run_dir):
    run = load_run(built_run_dir)
    for step, mean in rollout_means(run, "turns", resolved_only=True):
        (source,) = [s for s in run.sources if s.kind == "rl" and s.step == step]
        episodes = source.trajectories
        won = [t.metrics["turns"] for t in episodes if t.reward_info.get("resolution") == "resolved"]
        assert won and mean == pytest.approx(sum(won) / len(won))
    everything = dict(rollout_means(run, "turns"))
    assert everything and set(dict(rollout_means(run, "turns", resolved_only=True))) <= set(everything)
