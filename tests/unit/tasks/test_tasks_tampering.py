"""Code under test that tries to fool grading: each attack, written into the package's
`__init__.py` of a synthesized task (so it runs inside the graded pytest process) without fixing
the bug, scores 0 — `tampering` where the witness or its tripwires catch it, `none` where it has
no effect. The attacks are graded as users grade patches: SWE-bench predictions through
`overture tasks grade`, one run of the command for all of them, in parallel sandboxes."""

from __future__ import annotations

import dataclasses
import difflib
import json

import pytest
from tasks_helpers import in_sandbox
from typer.testing import CliRunner

from overture.cli.main import app
from overture.config import TasksConfig
from overture.tasks.grading import grade
from overture.tasks.snapshots import starting_base
from overture.tasks.spec import Task, write_tasks

PACKAGE_INIT = "numbers_kit/__init__.py"

FORGE_EVERY_REPORT = '''
import gc
import pytest
from _pytest.config import Config


class _Forger:
    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item, call):
        report = yield
        if WANTED is None or item.name in WANTED:
            report.outcome, report.longrepr = "passed", None
        return report


for _found in gc.get_objects():
    if isinstance(_found, Config):
        _found.pluginmanager.register(_Forger())
'''

# The tests' names read from the test file: forging only those leaves canaries with new names
# alone, so the canaries carry the names of the run's own tests.
FORGE_BY_NAME = (
    "import pathlib, re\n"
    "WANTED = set(re.findall(r'def (test_\\w+)', pathlib.Path('tests/test_core.py').read_text()))\n"
    "WANTED |= {n + s for n in WANTED for s in ('[values0-expected0]',)}\n" + FORGE_EVERY_REPORT
)

WRITE_EVERY_DESCRIPTOR = '''
import os

for _name in os.listdir("/proc/self/fd"):
    if int(_name) > 2:
        try:
            os.write(int(_name), b'1 {"event":"end","exitstatus":0} ' + b"0" * 64 + b"\\n")
        except OSError:
            pass
'''

# Threads racing the grader for every record written to any pipe the process holds (had they
# stolen one, the gap in the records' numbers would be tampering).
READ_EVERY_PIPE = '''
import os
import threading


def _steal(fd):
    while os.read(fd, 1 << 16):
        pass


for _name in os.listdir("/proc/self/fd"):
    try:
        if int(_name) > 2 and os.readlink(f"/proc/self/fd/{_name}").startswith("pipe:"):
            _fd = os.open(f"/proc/self/fd/{_name}", os.O_RDONLY)
            threading.Thread(target=_steal, args=(_fd,), daemon=True).start()
    except OSError:
        pass
'''

ATTACKS = {
    "_NodeReporter.append_failure patched": (
        "from _pytest import junitxml\n"
        "junitxml._NodeReporter.append_failure = junitxml._NodeReporter.append_pass\n"
        "junitxml._NodeReporter.append_error = junitxml._NodeReporter.append_pass\n"
    ),
    "atexit rewriting the JUnit file in argv": (
        "import atexit, sys\n\n\n"
        "def _rewrite():\n"
        "    for arg in sys.argv:\n"
        "        if arg.startswith('--junitxml='):\n"
        "            with open(arg.split('=', 1)[1], 'w') as out:\n"
        "                out.write('<testsuites><testsuite/></testsuites>')\n\n\n"
        "atexit.register(_rewrite)\n"
    ),
    "patching pluggy's hook calls": (
        "import pluggy._callers\n"
        "_call = pluggy._callers._multicall\n\n\n"
        "def _multicall(hook_name, *args, **kwargs):\n"
        "    return _call(hook_name, *args, **kwargs)\n\n\n"
        "pluggy._callers._multicall = _multicall\n"
    ),
    "Function.runtest patched": (
        "import _pytest.python\n_pytest.python.Function.runtest = lambda self: None\n"
    ),
    "TestReport.from_item_and_call patched": (
        "from _pytest.reports import TestReport\n"
        "_made = TestReport.from_item_and_call.__func__\n\n\n"
        "def _forged(cls, item, call):\n"
        "    report = _made(cls, item, call)\n"
        "    report.outcome, report.longrepr = 'passed', None\n"
        "    return report\n\n\n"
        "TestReport.from_item_and_call = classmethod(_forged)\n"
    ),
    "hook wrapper through the Config found with gc": "WANTED = None\n" + FORGE_EVERY_REPORT,
    "hook wrapper forging the tests' own names": FORGE_BY_NAME,
    "pytest_plugins slipped into the importing test module": (
        "import sys\n"
        "_frame = sys._getframe(1)\n"
        "while _frame is not None and not _frame.f_globals.get('__file__', '').endswith('test_core.py'):\n"
        "    _frame = _frame.f_back\n"
        "_frame.f_globals['pytest_plugins'] = ['numbers_kit.forger']\n"
    ),
    "os._exit at import": "import os\nos._exit(0)\n",
    "killing the parent": "import os, signal, time\nos.kill(os.getppid(), signal.SIGKILL)\ntime.sleep(5)\n",
    "writing to every descriptor": WRITE_EVERY_DESCRIPTOR,
    "faulthandler dumping into every descriptor": (
        "import faulthandler, os\n"
        "for _name in os.listdir('/proc/self/fd'):\n"
        "    if int(_name) > 2:\n"
        "        try:\n"
        "            faulthandler.dump_traceback(file=int(_name))\n"
        "        except (OSError, ValueError):\n"
        "            pass\n"
    ),
}

HARMLESS = {
    "reading the report pipe away": READ_EVERY_PIPE,  # reopening a pipe through /proc is refused
    "sys.exit at import": "import sys\nsys.exit(0)\n",
    "printing the witness's line format": (
        "import sys\nsys.stdout.write('0 {\"event\":\"end\",\"exitstatus\":0} ' + '0' * 64 + '\\n')\n"
    ),
}

# A plugin module whose own makereport wrapper passes every test, named by the attack above.
FORGER_MODULE = """import pytest


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    report.outcome, report.longrepr = "passed", None
    return report
"""
EXTRA_FILES = {
    "pytest_plugins slipped into the importing test module": {"numbers_kit/forger.py": FORGER_MODULE}
}


FIX_WITH_FORGER = "the reference fix with the forger beside it"


def _file_diff(path: str, old: str | None, new: str) -> str:
    """A `patch -p1` diff that turns `old` (None: no such file) into `new`."""
    before = old.splitlines(keepends=True) if old is not None else []
    return "".join(difflib.unified_diff(
        before, new.splitlines(keepends=True), f"a/{path}" if old is not None else "/dev/null", f"b/{path}"
    ))  # fmt: skip


def _attack_patch(task: Task, init: str, extra: dict[str, str]) -> str:
    base = starting_base(task)
    return _file_diff(PACKAGE_INIT, (base / PACKAGE_INIT).read_text(), init) + "".join(
        _file_diff(path, None, text) for path, text in extra.items()
    )


@pytest.fixture(scope="module")
def graded_through_the_cli(numbers_task_set, tmp_path_factory) -> dict[str, dict]:
    """Every attack (and the harmless ones) graded by one `overture tasks grade` run: name → report."""
    task = numbers_task_set[1][0]
    patches = {name: _attack_patch(task, init, EXTRA_FILES.get(name, {})) for name, init in
               {**ATTACKS, **HARMLESS}.items()}  # fmt: skip
    patches[FIX_WITH_FORGER] = task.patch + _attack_patch(
        task, ATTACKS["hook wrapper through the Config found with gc"], {}
    )
    ids = {name: f"{task.instance_id}--{number}" for number, name in enumerate(patches)}
    folder = tmp_path_factory.mktemp("tampering")
    copies = [dataclasses.replace(task, instance_id=instance_id) for instance_id in ids.values()]
    task_file = write_tasks(folder / "tasks.jsonl", copies)
    predictions = folder / "predictions.jsonl"
    predictions.write_text("".join(
        json.dumps({"instance_id": ids[name], "model_patch": patch, "model_name_or_path": name}) + "\n"
        for name, patch in patches.items()
    ))  # fmt: skip
    result = CliRunner().invoke(
        app, ["tasks", "grade", str(task_file), "--predictions", str(predictions), "--jobs", "2",
              "--set", "tasks.test_timeout_s=60"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    *reports, summary = (json.loads(line) for line in result.stdout.strip().splitlines())
    assert summary["graded"] == len(patches) and summary["malformed"] == []
    return {report["model_name_or_path"]: report for report in reports}


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_tampering_scores_zero_with_reason_tampering(graded_through_the_cli, name):
    report = graded_through_the_cli[name]
    assert (report["resolution"], report["score"]) == ("tampering", 0.0), report["reason"]
    assert report["reason"].startswith("tampering: ")


def test_each_tripwire_names_what_it_saw(graded_through_the_cli):
    patched = graded_through_the_cli["_NodeReporter.append_failure patched"]["reason"]
    assert "pytest's own code was changed during the run: " in patched
    assert "_pytest.junitxml._NodeReporter.append_error" in patched
    assert "_pytest.junitxml._NodeReporter.append_failure" in patched
    rewritten = graded_through_the_cli["atexit rewriting the JUnit file in argv"]["reason"]
    assert rewritten == "tampering: the JUnit report was rewritten after the session ended"
    pluggy = graded_through_the_cli["patching pluggy's hook calls"]["reason"]
    assert "pluggy._callers._multicall" in pluggy


@pytest.mark.parametrize("name", sorted(HARMLESS))
def test_attacks_on_what_grading_does_not_read_change_nothing(graded_through_the_cli, name):
    report = graded_through_the_cli[name]
    assert (report["resolution"], report["score"]) == ("none", 0.0), report["reason"]
    assert not any(outcome == "PASSED" for outcome in report["FAIL_TO_PASS"].values())


def test_a_fix_with_the_forger_beside_it_still_earns_nothing(graded_through_the_cli):
    report = graded_through_the_cli[FIX_WITH_FORGER]
    assert (report["resolution"], report["score"]) == ("tampering", 0.0)
    assert "the canary that must fail came back PASSED" in report["reason"]


def _fix(task: Task):
    async def body(box):
        assert (await box.exec("patch -p1 -s", stdin=task.patch.encode())).exit_code == 0
        return await grade(task, box, TasksConfig(test_timeout_s=60))

    return body


def test_the_canaries_come_back_as_they_must_and_are_not_outcomes(numbers_task_set):
    task = numbers_task_set[1][0]
    graded = in_sandbox(starting_base(task), _fix(task))
    assert (graded.resolution, graded.score, graded.reason) == ("resolved", 1.0, "")
    assert graded.canaries == {"pass": "PASSED", "fail": "FAILED", "error": "ERROR"}
    # Clones of the run's tests, not tests of their own: no id beyond the test file's.
    assert all(outcome == "PASSED" or test.endswith("test_mean_of_strings") for test, outcome
               in graded.outcomes.items()), graded.outcomes  # fmt: skip
    assert graded.outcomes["tests/test_core.py::test_mean_of_strings"] == "XFAIL"
