"""Running pytest in a sandbox and reading its report: per-test outcomes and failure details.

Tests run as `<test_cmd> -rA --tb=short -p no:cacheprovider --color=no <files...>` (the files
of the wanted test ids); the files go through `"$@"` of `sh -c`, never through the shell's
parser. Outcomes come from the "short
test summary info" section that `-rA` prints (the lines SWE-bench's log parsers read too):
`PASSED id`, `FAILED id - message`, `ERROR id - message`, `XFAIL id`, `XPASS id`. A test that
does not appear there (skipped, not collected, the run died) has no outcome, which graders
treat as not passing. Failure details come from the `--tb=short` FAILURES section: the frames
(`path:line: in function` and their source lines) and the `E` lines of the error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from overture.sandbox import ExecResult, Sandbox

REPORT_FLAGS = "-rA --tb=short -p no:cacheprovider --color=no"
PASSING = ("PASSED", "XFAIL")
STATUSES = ("PASSED", "FAILED", "ERROR", "XFAIL", "XPASS")
SUMMARY_HEADER = re.compile(r"^=+ short test summary info =+$")
SECTION_RULE = re.compile(r"^=+ (.*?) =+$")
FAILURE_HEADER = re.compile(r"^_+ (.+?) _+$")
FRAME = re.compile(r"^(\S.*?):(\d+): in (\S+)$")


@dataclass
class Frame:
    path: str
    line: int
    function: str
    source: list[str] = field(default_factory=list)


@dataclass
class Failure:
    """One test's failure as `--tb=short` reported it."""

    head: str
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
        return {test for test, status in self.outcomes.items() if status in PASSING}

    def failure(self, test_id: str) -> Failure | None:
        return self.failures.get(failure_head(test_id))


def pytest_command(test_cmd: str, targets: list[str]) -> list[str]:
    """The argv that runs `test_cmd` on `targets` (files or ids) with the flags this module reads."""
    return ["/bin/sh", "-c", f'{test_cmd} {REPORT_FLAGS} "$@"', "sh", *targets]


def test_files(test_ids: list[str]) -> list[str]:
    """The files of pytest ids, each once, in first-seen order."""
    return list(dict.fromkeys(test_id.split("::", 1)[0] for test_id in test_ids))


async def run_pytest(sandbox: Sandbox, test_cmd: str, test_ids: list[str], timeout: float) -> PytestRun:
    """Run the files of `test_ids` (the whole suite when empty) in the sandbox; parse the report.

    Whole files rather than ids: pytest refuses the whole run when one given id does not exist,
    while a test missing from a file's report is simply a test without an outcome."""
    result = await sandbox.exec(pytest_command(test_cmd, test_files(test_ids)), timeout=timeout)
    output = result.stdout + "\n" + result.stderr
    return PytestRun(parse_outcomes(output, test_ids), parse_failures(output), result)


def failure_head(test_id: str) -> str:
    """The title pytest gives a test's failure section: the id without its file, '::' as '.'."""
    return ".".join(test_id.split("::")[1:]) or test_id


def parse_outcomes(output: str, known_ids: list[str] | None = None) -> dict[str, str]:
    """Test id → status from the short test summary. With `known_ids`, a line is matched to the
    known id it starts with (ids may contain ' - '); otherwise the id ends at the first ' - '."""
    outcomes: dict[str, str] = {}
    known = sorted(known_ids or [], key=len, reverse=True)
    in_summary = False
    for line in output.splitlines():
        if SUMMARY_HEADER.match(line):
            in_summary = True
            continue
        if not in_summary:
            continue
        if SECTION_RULE.match(line):
            break  # the closing "=== N passed in ... ===" line
        status, _, rest = line.partition(" ")
        if status not in STATUSES or not rest:
            continue
        test_id = _match_known(rest, known) if known else rest.split(" - ", 1)[0]
        if test_id and "::" in test_id:
            outcomes[test_id] = status
    return outcomes


def _match_known(rest: str, known: list[str]) -> str | None:
    for test_id in known:
        if rest == test_id or rest.startswith(f"{test_id} - ") or rest.startswith(f"{test_id} "):
            return test_id
    return rest.split(" - ", 1)[0] if "::" in rest else None


def parse_failures(output: str) -> dict[str, Failure]:
    """Failure head → Failure, from the FAILURES (and ERRORS) sections of `--tb=short` output."""
    failures: dict[str, Failure] = {}
    current: Failure | None = None
    in_section = False
    for line in output.splitlines():
        rule = SECTION_RULE.match(line)
        if rule:
            in_section = rule.group(1) in ("FAILURES", "ERRORS")
            current = None
            continue
        if not in_section:
            continue
        header = FAILURE_HEADER.match(line)
        if header:
            current = Failure(head=header.group(1))
            failures.setdefault(current.head, current)
            continue
        if current is None:
            continue
        frame = FRAME.match(line)
        if frame:
            current.frames.append(Frame(frame.group(1), int(frame.group(2)), frame.group(3)))
        elif line.startswith("E ") or line == "E":
            current.error.append(line[4:] if line.startswith("E   ") else line[1:].strip())
        elif line.startswith("    ") and current.frames:
            current.frames[-1].source.append(line[4:])
    return failures
