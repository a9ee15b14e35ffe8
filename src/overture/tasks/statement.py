"""Problem statements written from a test failure, the way a user's bug report reads.

The statement names the failing tests, quotes the error pytest reported (assertion message or
exception) and gives the traceback tail as locations — `file:line in function` — with source
lines only from test files, as a user pasting a report would. It never holds the diff, the
changed line, or the fix: library source lines are never quoted, and any line that contains
the text of a changed line (before or after the change) is dropped as a last guard. Object
addresses in reprs (`<Graph object at 0x7f3a...>`) become `0x...`: they differ from one run of the
tests to the next, so a task set is a function of its code and seed alone, and a policy is not
shown a dozen digits of noise.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Iterable

from overture.tasks.pytest_report import Failure, is_test_file

MAX_TESTS_LISTED = 5
MAX_ERROR_LINES = 8
MAX_FRAMES = 6
MIN_CONTAINED = 8  # shorter changed lines (`pass`, `i += 1`) are only caught as a whole line
OBJECT_ADDRESS = re.compile(r"\bat 0x[0-9a-fA-F]+>")

OPENINGS = (
    "Something in {repo} returns wrong results.",
    "I think there is a bug in {repo}.",
    "After the latest changes, {repo} misbehaves.",
    "{repo} does not do what its tests say it should.",
    "I ran into a regression in {repo}.",
)
CLOSINGS = (
    "Could you find the cause and fix it? The tests should pass again.",
    "Please fix the library code so that these tests pass.",
    "Expected: the test suite passes.",
    "The tests themselves look right to me, so the problem should be in the library.",
)


def write_statement(
    repo: str,
    failing: list[str],
    failures: dict[str, Failure | None],
    hidden_lines: Iterable[str],
    seed: str,
) -> str:
    """A bug report for `repo` from its failing tests (`failures[test]` as pytest reported it).

    `hidden_lines` are the changed lines (original and mutated); no statement line contains one.
    """
    rng = random.Random(hashlib.sha256(seed.encode()).digest())
    hidden = [line.strip() for line in hidden_lines if line.strip()]
    listed = failing[:MAX_TESTS_LISTED]
    more = len(failing) - len(listed)
    lines = [rng.choice(OPENINGS).format(repo=repo), ""]
    if len(failing) == 1:
        lines.append(f"This test fails: `{failing[0]}`")
    else:
        lines.append(f"{len(failing)} tests fail:")
        lines += [f"- `{test}`" for test in listed]
        if more:
            lines.append(f"- and {more} more")
    first = next((test for test in failing if failures.get(test)), None)
    if first is not None:
        failure = failures[first]
        assert failure is not None
        lines += ["", f"Output of `{first}`:", "", *_report(failure)]
    lines += ["", rng.choice(CLOSINGS)]
    return "\n".join(line for line in lines if not _reveals(line, hidden)).strip() + "\n"


def _report(failure: Failure) -> list[str]:
    block = ["```", "Traceback (most recent call last):"]
    for frame in failure.frames[-MAX_FRAMES:]:
        block.append(f'  File "{frame.path}", line {frame.line}, in {frame.function}')
        if is_test_file(frame.path):
            block += [f"    {source.strip()}" for source in frame.source[:2] if source.strip()]
    error = [OBJECT_ADDRESS.sub("at 0x...>", line) for line in failure.error if line.strip()]
    error = error[:MAX_ERROR_LINES]
    block += error or ["(no error message)"]
    block.append("```")
    return block


def _reveals(line: str, hidden: list[str]) -> bool:
    """Whether `line` holds a changed line: anywhere in it, or (short ones, like `pass`) as all of it."""
    text = line.strip()
    return any(secret in text if len(secret) >= MIN_CONTAINED else secret == text for secret in hidden)
