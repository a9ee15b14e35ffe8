"""`overture sandbox run`: one command in a fresh sandbox, the result as JSON, the directory untouched."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from sandbox_helpers import make_base


def overture() -> str:
    script = Path(sys.executable).with_name("overture")
    return str(script) if script.exists() else shutil.which("overture")


def test_sandbox_run_prints_json_and_leaves_the_directory_alone(tmp_path):
    base = make_base(tmp_path)
    before = sorted(p.relative_to(base).as_posix() for p in base.rglob("*"))
    script = "echo changed > README.md; rm pkg/core.py; echo out; echo err >&2; exit 3"
    command = [overture(), "sandbox", "run", "--workspace", str(base), "--timeout", "5", "--diff", "--",
               "sh", "-c", script]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["exit_code"] == 3
    assert result["stdout"] == "out\n" and result["stderr"] == "err\n"
    assert not result["timed_out"] and not result["truncated"]
    assert "+changed" in result["diff"] and "+++ /dev/null" in result["diff"]
    assert sorted(p.relative_to(base).as_posix() for p in base.rglob("*")) == before
    assert (base / "README.md").read_text() == "# demo\n"


def test_sandbox_run_times_out(tmp_path):
    base = make_base(tmp_path)
    done = subprocess.run(
        [overture(), "sandbox", "run", "--workspace", str(base), "--timeout", "0.5", "--", "sleep", "30"],
        capture_output=True, text=True,
    )  # fmt: skip
    result = json.loads(done.stdout)
    assert result["timed_out"] and result["duration_s"] < 5


def test_sandbox_run_bad_workspace_is_a_clear_error(tmp_path):
    done = subprocess.run(
        [overture(), "sandbox", "run", "--workspace", str(tmp_path / "absent"), "--", "true"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 2
    assert "absent: workspace base is not a directory" in done.stderr
    assert "Traceback" not in done.stderr
