"""Localization metrics: the lines a reference patch changes, and whether an episode's reads showed
them and its edits changed their files."""

from __future__ import annotations

import difflib

from overture.tasks.localization import fix_lines, localization
from overture.text import numbered_lines

BEFORE = [f"line {n}" for n in range(1, 21)]


def _diff(path: str, before: list[str], after: list[str]) -> str:
    return "".join(
        difflib.unified_diff(
            [f"{line}\n" for line in before], [f"{line}\n" for line in after], f"a/{path}", f"b/{path}"
        )
    )


def test_fix_lines_are_the_removed_replaced_and_inserted_before_lines():
    replaced = [*BEFORE[:4], "line 5 fixed", *BEFORE[5:]]
    removed = BEFORE[:11] + BEFORE[13:]
    inserted = [*BEFORE[:16], "a new line", *BEFORE[16:]]
    patch = _diff("pkg/a.py", BEFORE, replaced) + _diff("pkg/b.py", BEFORE, removed)
    patch += _diff("pkg/c.py", BEFORE, inserted)
    assert fix_lines(patch) == {"pkg/a.py": {5}, "pkg/b.py": {12, 13}, "pkg/c.py": {17}}


def test_fix_lines_read_hunk_bodies_by_their_counts():
    # A removed line that reads like a file header, a created file, a deleted one, no final newline.
    patch = (
        "--- a/pkg/a.py\n+++ b/pkg/a.py\n@@ -2,2 +2,2 @@\n line 2\n--- a/x\n+++ b/x\n"
        "--- /dev/null\n+++ b/pkg/new.py\n@@ -0,0 +1 @@\n+print('hi')\n"
        "--- a/pkg/old.py\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-one\n-two\n\\ No newline at end of file\n"
    )
    assert fix_lines(patch) == {"pkg/a.py": {3}, "pkg/new.py": set(), "pkg/old.py": {1, 2}}


def _call(name: str, arguments: dict, response: str = "", error: str | None = None) -> dict:
    return {"name": name, "arguments": arguments, "response": response, "error": error}


def _listing(first: int, last: int) -> str:
    return numbered_lines(BEFORE[first - 1 : last], first) + f"\n[lines {first}-{last} of 20]"


def test_an_episode_localizes_when_a_listing_showed_a_fix_line_and_an_edit_hit_its_file():
    patch = _diff("pkg/a.py", BEFORE, [*BEFORE[:11], "line 12 fixed", *BEFORE[12:]])
    misses = [
        _call("read_file", {"path": "pkg/a.py", "offset": 1, "limit": 11}, _listing(1, 11)),
        _call("read_file", {"path": "pkg/b.py", "offset": 10}, _listing(10, 14)),  # another file
        _call("read_file", {"path": "pkg/a.py", "offset": 12}, _listing(12, 14), error="tool"),
        _call("grep", {"pattern": "line 12"}, "pkg/a.py: 12: line 12"),  # a grep hit is no read
        _call("edit_lines", {"file_path": "pkg/a.py", "start_line": 1}, "", error="arguments"),
        _call("edit_lines", {"file_path": "pkg/b.py", "start_line": 12}, "replaced"),
        _call("write_file", {"file_path": "/etc/passwd"}, "", error="tool"),
    ]
    assert localization(patch, [{"calls": misses}]) == {"read_fix_lines": False, "edited_fix_file": False}
    hits = [
        _call("read_file", {"path": "./pkg/a.py", "offset": 8}, _listing(8, 13)),
        _call("edit_lines", {"file_path": "/workspace/pkg/a.py", "start_line": 12}, "replaced"),
    ]
    located = localization(patch, [{"calls": misses}, {"calls": hits}])
    assert located == {"read_fix_lines": True, "edited_fix_file": True}
    assert localization(patch, [{"calls": hits[1:]}]) == {"read_fix_lines": False, "edited_fix_file": True}
