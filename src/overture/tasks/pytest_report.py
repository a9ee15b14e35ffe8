"""Running pytest in a sandbox and reading its report: per-test outcomes and failure details.

Tests run as `<test_cmd> --junitxml=REPORT -o junit_family=xunit1 --tb=short -p no:cacheprovider
<files...>` in the sandbox's Python, which says whether pytest loads the plugins installed in it
(`overture.sandbox.python_env`: those of a repository's environment, not those beside overture's
own Python; a package the workspace adds is never one of them); the files of the wanted test ids go through
`"$@"` of `sh -c`, never through the shell's parser. Outcomes come from the JUnit XML report,
written to a file named afresh for each run and removed after it is read — never from what the
code under test prints, which can imitate pytest's output, nor from capped output. Each
`<testcase>` maps back to its pytest id through its `file`, `classname` and `name`; its status is
FAILED (`<failure>`), ERROR (`<error>`), XFAIL (`<skipped type="pytest.xfail">`), SKIPPED (any
other `<skipped>`) or PASSED. A test missing from the report (not collected, the run died) has no
outcome, which graders treat as not passing. Failure details (the `--tb=short` frames and `E`
lines) come from each failure's text. Grading does not use this report: code under test could
rewrite it, so graded runs are read through a witness plugin instead (`overture.tasks.witness`).
"""

from __future__ import annotations

import contextlib
import re
import secrets
import xml.etree.ElementTree as ElementTree
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from overture.sandbox import ExecResult, Sandbox

REPORT_FLAGS = "-o junit_family=xunit1 --tb=short -p no:cacheprovider --color=no -q"
MAX_REPORT_BYTES = 64 << 20
TEST_DIRS = frozenset({"tests", "test", "testing"})
FRAME = re.compile(r"^(\S.*?):(\d+): in (\S+)$")


def is_test_file(path: str) -> bool:
    """Whether a repository path holds tests by pytest's conventions (or sits in a tests folder)."""
    parts = PurePosixPath(path).parts
    name = parts[-1] if parts else ""
    return (
        name == "conftest.py"
        or (name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py")))
        or any(part in TEST_DIRS for part in parts[:-1])
    )


def outcome_passes(test: str, status: str | None, xfail: Collection[str] | None = None) -> bool:
    """PASSED passes; XFAIL passes when `xfail` is None (SWE-bench) or lists the test; nothing else."""
    if status == "PASSED":
        return True
    return status == "XFAIL" and (xfail is None or test in xfail)


@dataclass
class Frame:
    path: str
    line: int
    function: str
    source: list[str] = field(default_factory=list)


@dataclass
class Failure:
    """One test's failure as `--tb=short` reported it."""

    frames: list[Frame] = field(default_factory=list)
    error: list[str] = field(default_factory=list)  # the E lines, without their "E   " prefix


@dataclass
class PytestRun:
    """The outcome of one pytest run."""

    outcomes: dict[str, str]
    failures: dict[str, Failure]
    result: ExecResult

    @property
    def passed(self) -> set[str]:
        """Tests that passed or failed as expected (XFAIL)."""
        return {test for test, status in self.outcomes.items() if outcome_passes(test, status)}

    @property
    def xfailed(self) -> list[str]:
        return [test for test, status in self.outcomes.items() if status == "XFAIL"]


def test_files(test_ids: list[str]) -> list[str]:
    """The files of pytest ids, each once, in first-seen order."""
    return list(dict.fromkeys(test_id.split("::", 1)[0] for test_id in test_ids))


def shell_command(pytest: str, targets: list[str], setup: str = "") -> list[str]:
    """The argv that runs the `pytest` command line on `targets` (files or ids, through `"$@"`);
    `setup`, shell statements of the caller's own, runs first."""
    script = f'{setup}{pytest} "$@"'
    return ["/bin/sh", "-c", script, "sh", *targets]


def pytest_command(test_cmd: str, report: str, targets: list[str], setup: str = "") -> list[str]:
    """The argv that runs `test_cmd` on `targets`, writing the JUnit `report` (`shell_command`)."""
    return shell_command(f"{test_cmd} {REPORT_FLAGS} --junitxml={report}", targets, setup)


async def run_pytest(
    sandbox: Sandbox,
    test_cmd: str,
    test_ids: list[str],
    timeout: float,
    setup: str = "",
    cpu_seconds: int | None = None,
) -> PytestRun:
    """Run the files of `test_ids` (the whole suite when empty) in the sandbox; read the report.

    Whole files rather than ids: pytest refuses the whole run when one given id does not exist,
    while a test missing from a file's report is simply a test without an outcome. `setup`: shell
    statements to run before pytest (`pytest_command`); `cpu_seconds`: the run's CPU-time limit,
    when not the sandbox's own."""
    report = f".pytest-report-{secrets.token_hex(8)}.xml"
    command = pytest_command(test_cmd, report, test_files(test_ids), setup)
    result = await sandbox.exec(command, timeout=timeout, cpu_seconds=cpu_seconds)
    files = sandbox.files
    data = b""
    with contextlib.suppress(OSError):
        data = files.read_bytes(report)
    with contextlib.suppress(OSError):
        files.delete(report)
    outcomes, failures = parse_junit(data) if 0 < len(data) <= MAX_REPORT_BYTES else ({}, {})
    return PytestRun(outcomes, failures, result)


def parse_junit(data: bytes) -> tuple[dict[str, str], dict[str, Failure]]:
    """Test id → status, and test id → Failure, from a JUnit XML report (xunit1 family)."""
    try:
        root = ElementTree.fromstring(data)
    except ElementTree.ParseError:
        return {}, {}
    outcomes: dict[str, str] = {}
    failures: dict[str, Failure] = {}
    for case in root.iter("testcase"):
        test_id = _test_id(case.get("file", ""), case.get("classname", ""), case.get("name", ""))
        if test_id is None:
            continue
        status, text = _status(case)
        outcomes[test_id] = status
        if status in ("FAILED", "ERROR"):
            failures[test_id] = parse_failure(text)
    return outcomes, failures


def _test_id(file: str, classname: str, name: str) -> str | None:
    """The pytest id of a report entry: `file::Class::name` from its file and dotted classname."""
    if not file.endswith(".py") or not name:
        return None
    module = file[: -len(".py")].replace("/", ".")
    if classname != module and not classname.startswith(module + "."):
        return None
    classes = classname[len(module) + 1 :].split(".") if classname != module else []
    return "::".join([file, *classes, name])


def _status(case: ElementTree.Element) -> tuple[str, str]:
    tags = {child.tag: child for child in case}
    if "error" in tags:
        return "ERROR", _text(tags["error"])
    if "failure" in tags:
        return "FAILED", _text(tags["failure"])
    if "skipped" in tags:
        xfail = tags["skipped"].get("type") == "pytest.xfail"
        return ("XFAIL" if xfail else "SKIPPED"), ""
    return "PASSED", ""


def _text(element: ElementTree.Element) -> str:
    return element.text or element.get("message", "")


def parse_failure(text: str) -> Failure:
    """Frames (`path:line: in function` and their source lines) and `E` lines of a `--tb=short` text."""
    failure = Failure()
    for line in text.splitlines():
        frame = FRAME.match(line)
        if frame:
            failure.frames.append(Frame(frame.group(1), int(frame.group(2)), frame.group(3)))
        elif line.startswith("E ") or line == "E":
            failure.error.append(line[4:] if line.startswith("E   ") else line[1:].strip())
        elif line.startswith("    ") and failure.frames:
            failure.frames[-1].source.append(line[4:])
    return failure
