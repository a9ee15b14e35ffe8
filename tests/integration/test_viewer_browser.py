"""The viewer page in headless Chromium (Debian `chromium`): the script draws the trajectory list and
one trajectory, filters follow the URL, hostile text runs nothing, and a screenshot is kept.

Screenshots go to $OVERTURE_TEST_ARTIFACTS (default `.cache/test-artifacts/`).
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
from viewer_helpers import (
    HOSTILE_PAYLOADS,
    HOSTILE_TASK_ID,
    all_trajectories,
    artifacts_dir,
    chromium,
    chromium_run,
    dump_dom,
    session_run_dir,
)

from overture.viewer import write_page

pytestmark = pytest.mark.skipif(
    chromium() is None, reason="needs Debian's chromium (apt-get install chromium; `make test` installs it)"
)


@pytest.fixture(scope="session")
def built_run_dir(tmp_path_factory) -> Path:
    """A run directory of real, graded episodes, one of them hostile (see viewer_helpers)."""
    return session_run_dir(tmp_path_factory)


@pytest.fixture(scope="session")
def viewer_run_dir(smoke_run) -> Path:
    """The run directory the whole-run tests read: the main job's smoke run."""
    return smoke_run[0]


def page_url(run_dir: Path, folder: Path, fragment: str) -> str:
    page = write_page(run_dir, folder / "page.html")
    return page.resolve().as_uri() + "#" + fragment


def list_items(dom: str) -> list[str]:
    return re.findall(r'<li class="list-item[^"]*" data-id="([^"]+)"', dom)


def test_browser_draws_the_list_and_a_trajectory_and_keeps_a_screenshot(viewer_run_dir, tmp_path):
    stored = all_trajectories(viewer_run_dir)
    ids = [f"{source}:{n}" for source, records in stored.items() for n in range(len(records))]
    # The trajectory with the most calls makes the most telling render.
    source, position = max(
        ((s, n) for s, records in stored.items() for n in range(len(records))),
        key=lambda at: sum(len(turn["calls"]) for turn in stored[at[0]][at[1]]["turns"]),
    )
    chosen = stored[source][position]
    url = page_url(viewer_run_dir, tmp_path, f"trajectory={source}:{position}")
    dom = dump_dom(url)
    assert sorted(list_items(dom)) == sorted(ids)
    assert re.findall(r'class="trajectory-view" data-id="([^"]+)"', dom) == [f"{source}:{position}"]
    assert dom.count('class="turn"') == len(chosen["turns"])
    names = re.findall(r'<span class="call-name">([^<]*)</span>', dom)
    assert names == [call["name"] or "(unparsed call)" for turn in chosen["turns"] for call in turn["calls"]]
    assert f'class="list-item selected" data-id="{source}:{position}"' in dom
    screenshot = artifacts_dir() / "viewer-trajectory.png"
    screenshot.unlink(missing_ok=True)
    chromium_run(url, f"--screenshot={screenshot.resolve()}")
    assert screenshot.stat().st_size > 20_000
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_browser_filters_follow_the_url(viewer_run_dir, tmp_path):
    stored = all_trajectories(viewer_run_dir)
    # The rarest status of the run: which statuses a barely trained smoke model's episodes end
    # with varies from run to run, and the rarest one filters the most out.
    statuses = Counter(r["status"] for records in stored.values() for r in records)
    status = min(statuses, key=lambda name: (statuses[name], name))
    matching = [
        f"{s}:{n}"
        for s, records in stored.items()
        for n, r in enumerate(records)
        if r["status"] == status
    ]
    dom = dump_dom(page_url(viewer_run_dir, tmp_path, f"status={status}"))
    assert sorted(list_items(dom)) == sorted(matching)
    assert f"{len(matching)} of {sum(map(len, stored.values()))} trajectories" in dom
    # With nothing selected, the first match is shown.
    (shown,) = re.findall(r'class="trajectory-view" data-id="([^"]+)"', dom)
    assert shown == list_items(dom)[0]
    first_source = next(iter(stored))
    dom = dump_dom(page_url(viewer_run_dir, tmp_path, f"step={first_source}&view=charts"))
    assert sorted(list_items(dom)) == [f"{first_source}:{n}" for n in range(len(stored[first_source]))]
    assert re.search(r'<section id="view-charts" class="view view-charts">', dom)  # shown: not hidden


def test_browser_shows_hostile_text_as_text_and_runs_nothing(built_run_dir, tmp_path):
    stored = all_trajectories(built_run_dir)
    (target,) = [
        f"{s}:{n}"
        for s, records in stored.items()
        for n, r in enumerate(records)
        if r["task_id"] == HOSTILE_TASK_ID
    ]
    dom = dump_dom(page_url(built_run_dir, tmp_path, f"trajectory={target}"))
    assert "data-pwned" not in dom and 'data-rendered="' in dom  # the page's script ran; none other did
    assert "<img" not in dom and "<b>" not in dom
    pane = dom.split('id="trajectory"')[1]
    for payload in HOSTILE_PAYLOADS:  # visible, as text (the DOM serializer escapes text nodes)
        assert payload.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") in pane
    assert "calc-&lt;b&gt;bold&lt;/b&gt;" in dom
