"""A pytest plugin that reports every test outcome to the grader over a pipe, and runs its canaries.

This file is not imported by overture. Grading (`overture.tasks.witness`) hands its source to the
graded command on stdin; the command saves it under a random module name in the sandbox's private
`/tmp` and loads it with `-p`, which imports it before pytest imports any code of the workspace.
It imports only the standard library and pytest (wrapper hooks: pytest 8 or later).

At import it reads its orders — a key, and the test ids its canaries should imitate, best first —
from the descriptor named first in `OVERTURE_WITNESS_FDS` (a pipe the grader filled and closed),
closes it and drops the variable. The second descriptor there is the report pipe, whose other end
only the grader reads. Each record is one line `SEQ JSON MAC` (SEQ counts from 0, MAC is the
HMAC-SHA256 of `SEQ JSON` under the key) written in one `write`: what was written cannot be taken
back or reordered, and a line from anyone without the key is told apart. The records: `start` at
import; `canaries` once collection is done (role → node id, or the problem that stopped them);
one per test phase as pytest logs it (`id`, `when`, `outcome`, `xfail`, and `canary`: the role,
"" for the run's own tests); `end` when the session finishes.

The three canaries are clones of tests of the run (of the ids ordered, when collected, that no
mark skips): the same node id, function, parameters, fixtures and marks, each placed just before
a test of the same class or module. Only this plugin tells them apart (by object identity):
`pass` runs its fixtures and then not its function, `fail` raises instead of calling it, `error`
raises in setup; what their fixtures raise is swallowed. So whatever makes tests pass that did not
— patched pytest internals, hook wrappers, rewritten reports, by blanket or by the tests' names —
turns the `fail` and `error` canaries too. `maxfail` is set to 0: a graded run must run every
test, and the `fail` canary must not stop it.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import random

import pytest

FDS_VARIABLE = "OVERTURE_WITNESS_FDS"
ROLES = ("pass", "fail", "error")
SKIPPING_MARKS = frozenset({"skip", "skipif", "xfail"})
# A canary's setup and teardown run (its target's fixtures, as they would), but what they raise —
# the code under grading may break a fixture — is not the canary's outcome.
SWALLOWED = (Exception, pytest.skip.Exception, pytest.fail.Exception, pytest.xfail.Exception)


class CanaryError(Exception):
    """What the `error` canary's setup raises."""


class CanaryFailure(AssertionError):
    """What the `fail` canary's call raises."""


class Witness:
    def __init__(self, orders_fd: int, report_fd: int) -> None:
        chunks = []
        while chunk := os.read(orders_fd, 65536):
            chunks.append(chunk)
        os.close(orders_fd)
        orders = json.loads(b"".join(chunks))
        self._key = bytes.fromhex(orders["key"])
        self._targets = [set(ids) for ids in orders["targets"]]  # test ids to imitate, best first
        self._roles: list = []  # (canary item, role)
        self.running = ""  # the role of the canary running now, "" for a test of the run's own
        self._fd = report_fd
        os.set_inheritable(report_fd, False)  # the tests' own subprocesses get no copy
        self._seq = 0
        self._random = random.SystemRandom()

    def send(self, record: dict) -> None:
        if self._fd < 0:
            return
        line = f"{self._seq} {json.dumps(record, separators=(',', ':'))}"
        mac = hmac.new(self._key, line.encode(), hashlib.sha256).hexdigest()
        data = f"{line} {mac}\n".encode()
        self._seq += 1
        try:
            while data:
                data = data[os.write(self._fd, data) :]
        except OSError:
            self._fd = -1  # the grader sees the report stop short

    def finish(self, exitstatus: int) -> None:
        self.send({"event": "end", "exitstatus": int(exitstatus)})
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def place_canaries(self, items: list) -> None:
        placed, problem = {}, ""
        try:
            for role in ROLES if items else ():
                target = self._target(items)
                item = pytest.Function.from_parent(
                    target.parent, name=target.name, callspec=getattr(target, "callspec", None),
                    fixtureinfo=target._fixtureinfo, originalname=target.originalname,
                )  # fmt: skip
                # Before one of its siblings: never the last of its class or module, so no
                # fixture of theirs is torn down on a canary's account.
                spots = [i for i, other in enumerate(items) if other.parent is target.parent]
                items.insert(self._random.choice(spots), item)
                self._roles.append((item, role))
                placed[role] = item.nodeid
        except Exception as exc:  # the grader names it rather than trusting a run without canaries
            problem = f"{type(exc).__name__}: {exc}"[:300]
        self.send({"event": "canaries", "placed": placed, "problem": problem})

    def _target(self, items: list):
        """A test to imitate: one the grader named (its own order of preference) that no mark
        skips or expects to fail; else any such test of the run; else any test."""
        usable = [
            item for item in items
            if isinstance(item, pytest.Function) and hasattr(item, "_fixtureinfo")
            and not any(mark.name in SKIPPING_MARKS for mark in item.iter_markers())
        ]  # fmt: skip
        for wanted in self._targets:
            named = [item for item in usable if item.nodeid in wanted]
            if named:
                return self._random.choice(named)
        return self._random.choice(usable or [i for i in items if isinstance(i, pytest.Function)])

    def canary_role(self, item) -> str:
        return next((role for canary, role in self._roles if canary is item), "")


def _start() -> Witness | None:
    fds = os.environ.pop(FDS_VARIABLE, "")
    if not fds:
        return None
    orders_fd, report_fd = (int(fd) for fd in fds.split(","))
    witness = Witness(orders_fd, report_fd)
    witness.send({"event": "start"})
    return witness


_WITNESS = _start()


def pytest_configure(config) -> None:
    config.option.maxfail = 0


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config, items) -> None:
    if _WITNESS is not None:
        _WITNESS.place_canaries(items)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem) -> None:
    if _WITNESS is not None:
        _WITNESS.running = _WITNESS.canary_role(item)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_setup(item):
    role = _WITNESS.canary_role(item) if _WITNESS is not None else ""
    if not role:
        return (yield)
    with contextlib.suppress(SWALLOWED):
        yield
    if role == "error":
        raise CanaryError("setup failed")
    return None


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_teardown(item, nextitem):
    if _WITNESS is None or not _WITNESS.canary_role(item):
        return (yield)
    with contextlib.suppress(SWALLOWED):
        yield
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    role = _WITNESS.canary_role(pyfuncitem) if _WITNESS is not None else ""
    if role == "fail":
        raise CanaryFailure("assert False")
    return True if role else None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_logreport(report) -> None:
    if _WITNESS is not None:
        _WITNESS.send({
            "id": report.nodeid, "when": report.when, "outcome": report.outcome,
            "xfail": hasattr(report, "wasxfail"), "canary": _WITNESS.running,
        })  # fmt: skip


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus) -> None:
    if _WITNESS is not None:
        _WITNESS.finish(exitstatus)
