"""A graded pytest run whose outcomes come from a witness the code under test cannot silence or fool.

`run_witnessed` runs the files of a task's tests with `overture.tasks.witness_plugin` loaded (its
docstring says how it reports, how its canaries imitate the run's tests, and what its tripwires
watch). The grader makes a 32-byte key per run and hands it, with the test ids the canaries should
imitate (the task's FAIL_TO_PASS first: those are what a forger must forge), to the plugin through
a pipe it fills and closes before the command starts; the plugin's records come back through a
second pipe the grader reads while the command runs. Outcomes are never read from disk: the JUnit
report the command asks for, in its private folder, is only a tripwire.

`read_report` trusts the records only when every line carries the key's MAC and its number in
sequence, the first is `start`, `end` comes once and the last is `exit`, neither tripwire was
touched (no code of pytest or pluggy changed during the session, the JUnit report not rewritten
after it), and — when any test has an outcome — the three canaries were placed and came back as
they must: `pass` PASSED, `fail` FAILED, `error` ERROR. Anything else is tampering: a line that is
not the witness's (someone wrote to the pipe), a record missing (someone read it away), a report
that stops short (the process died or was made to exit), a tripwire, or a canary turned. A run
that produced no record at all (the plugin could not start: a test command that is not pytest, say)
and canaries the plugin could not place are failures without a verdict, not tampering. Each test's
status is made from its phases as the JUnit report would: ERROR when setup or teardown failed,
FAILED when the call failed, XFAIL or SKIPPED when skipped (as an expected failure or not), PASSED
when the call passed (a non-strict XPASS too).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import os
import secrets
from dataclasses import dataclass, field
from importlib.resources import files

from overture.sandbox import ExecResult, Sandbox
from overture.tasks.pytest_report import MAX_REPORT_BYTES, shell_command, test_files
from overture.tasks.run_failure import output_tail

EXPECTED = {"pass": "PASSED", "fail": "FAILED", "error": "ERROR"}
WITNESS_FLAGS = "--tb=short -p no:cacheprovider --color=no -q"
FDS_VARIABLE = "OVERTURE_WITNESS_FDS"  # the plugin's own name for it
DRAIN_S = 5.0
IMITATED_PER_GROUP = 100  # keeps the orders well inside a pipe's buffer
PHASES = frozenset({"setup", "call", "teardown"})
OUTCOMES = frozenset({"passed", "failed", "skipped"})


@dataclass
class WitnessedRun:
    """Outcomes of a witnessed run; `tampering` or `failure` says why there is no verdict."""

    outcomes: dict[str, str]
    result: ExecResult
    canaries: dict[str, str] = field(default_factory=dict)  # role → status it came back with
    tampering: str = ""
    failure: str = ""


class ReportError(ValueError):
    """The report is not the witness's own, whole and in order."""


def witness_command(
    test_cmd: str, module: str, orders_fd: int, report_fd: int, targets: list[str]
) -> list[str]:
    """The argv that saves the plugin (read from stdin) as `module` in a private folder of /tmp and
    runs `test_cmd` on `targets` with it loaded."""
    setup = (
        'folder=$(mktemp -d) && cat > "$folder/' + module + '.py" || exit 125; '
        "trap 'rm -rf \"$folder\"' EXIT; "
        f'export PYTHONPATH="$folder${{PYTHONPATH:+:$PYTHONPATH}}" {FDS_VARIABLE}={orders_fd},{report_fd}; '
    )
    decoy = '--junitxml="$folder/report.xml"'  # the plugin's DECOY_REPORT
    return shell_command(f"{test_cmd} -p {module} {WITNESS_FLAGS} {decoy}", targets, setup)


class _Collector(asyncio.Protocol):
    """Keeps what comes through the report pipe, up to `limit` bytes."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.data = bytearray()
        self.overflow = False
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def data_received(self, data: bytes) -> None:
        if len(self.data) + len(data) > self.limit:
            self.overflow = True
        else:
            self.data += data

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)


async def run_witnessed(
    sandbox: Sandbox,
    test_cmd: str,
    test_ids: list[str],
    timeout: float,
    imitate: list[list[str]] | None = None,
    cpu_seconds: int | None = None,
) -> WitnessedRun:
    """Run the files of `test_ids` under the witness in the sandbox; its outcomes, judged. The
    canaries take the node ids of tests in `imitate` (groups, best first; `[test_ids]` when None;
    the first `IMITATED_PER_GROUP` of each). `cpu_seconds`: the run's CPU-time limit, when not the
    sandbox's own."""
    key = secrets.token_bytes(32)
    targets = [group[:IMITATED_PER_GROUP] for group in (imitate if imitate is not None else [test_ids])]
    orders = json.dumps({"key": key.hex(), "targets": targets})
    module = f"_{secrets.token_hex(8)}"
    plugin = files("overture.tasks").joinpath("witness_plugin.py").read_bytes()
    collector = _Collector(MAX_REPORT_BYTES)
    orders_r, orders_w = os.pipe()
    report_r, report_w = os.pipe()
    open_fds = {orders_r, orders_w, report_r, report_w}

    def close(fd: int) -> None:
        if fd in open_fds:
            open_fds.discard(fd)
            os.close(fd)

    transport = None
    try:
        _write_all(orders_w, orders.encode())
        close(orders_w)
        reader = os.fdopen(report_r, "rb", buffering=0)
        open_fds.discard(report_r)  # the transport owns it now
        transport, _ = await asyncio.get_running_loop().connect_read_pipe(lambda: collector, reader)
        command = witness_command(test_cmd, module, orders_r, report_w, test_files(test_ids))
        try:
            result = await sandbox.exec(
                command, timeout=timeout, stdin=plugin, pass_fds=(orders_r, report_w), cpu_seconds=cpu_seconds
            )
        finally:
            close(report_w)  # the command's copies are gone with it: the reader sees the end
            close(orders_r)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(collector.closed), DRAIN_S)
    finally:
        for fd in list(open_fds):
            close(fd)
        if transport is not None:
            transport.close()
    return read_report(bytes(collector.data), collector.overflow, key, result)


def _write_all(fd: int, data: bytes) -> None:
    """Write `data` to a pipe nobody reads yet: past its buffer (64 KiB) it would block, so a
    larger order is refused."""
    if len(data) > 60_000:
        raise ValueError(f"the witness's orders are too large ({len(data)} bytes: too many test ids)")
    while data:
        data = data[os.write(fd, data) :]


def parse_records(data: bytes, key: bytes) -> list[dict]:
    """The witness's records from the report pipe's bytes; `ReportError` naming the first fault."""
    if data and not data.endswith(b"\n"):
        raise ReportError("the report ends in the middle of a line")
    records = []
    for seq, line in enumerate(data.split(b"\n")[:-1]):
        signed, _, mac = line.rpartition(b" ")
        expected = hmac.new(key, signed, hashlib.sha256).hexdigest().encode()
        if not hmac.compare_digest(mac, expected):
            raise ReportError(f"line {seq} of the report is not the witness's: {_quote(line)}")
        number, _, body = signed.partition(b" ")
        if number != str(seq).encode():
            raise ReportError(f"record {number.decode(errors='replace')} came where record {seq} belongs")
        record = json.loads(body)  # signed by the witness: well-formed
        records.append(record)
    return records


def _quote(data: bytes, limit: int = 80) -> str:
    text = repr(data[:limit])
    return text + ("..." if len(data) > limit else "")


def statuses(records: list[dict], canary: str = "") -> dict[str, str]:
    """Test id → status from the per-phase records (as the module docstring says): the run's own
    tests, or with `canary` (a role) that canary's."""
    phases: dict[str, list[dict]] = {}
    for record in records:
        if "event" in record or record.get("canary", "") != canary:
            continue
        if not (isinstance(record.get("id"), str) and record.get("when") in PHASES
                and record.get("outcome") in OUTCOMES):  # fmt: skip
            shown = _quote(json.dumps(record).encode())
            raise ReportError(f"a test record without id, phase or outcome: {shown}")
        phases.setdefault(record["id"], []).append(record)
    found = {}
    for test, reports in phases.items():
        status = _status(reports)
        if status:
            found[test] = status
    return found


def _status(reports: list[dict]) -> str:
    if any(r["outcome"] == "failed" and r["when"] != "call" for r in reports):
        return "ERROR"
    if any(r["outcome"] == "failed" for r in reports):
        return "FAILED"
    skipped = [r for r in reports if r["outcome"] == "skipped"]
    if skipped:
        return "XFAIL" if any(r.get("xfail") for r in skipped) else "SKIPPED"
    return "PASSED" if any(r["when"] == "call" for r in reports) else ""


def read_report(data: bytes, overflow: bool, key: bytes, result: ExecResult) -> WitnessedRun:
    """Judge a witnessed run's report (see the module docstring)."""
    run = WitnessedRun({}, result)
    exit_note = f"pytest exit code {result.exit_code}"
    if overflow:
        run.tampering = f"the report grew past {MAX_REPORT_BYTES} bytes"
        return run
    if not data:
        tail = output_tail(result.stderr.strip() or result.stdout, 300)
        run.failure = f"the test run never reported through grading's witness ({exit_note}): {tail}"
        return run
    try:
        records = parse_records(data, key)
        found = statuses(records)
        if any(r.get("canary", "") not in ("", *EXPECTED) for r in records):
            raise ReportError("a record names a canary role that does not exist")
    except (ReportError, ValueError) as exc:
        run.tampering = str(exc)
        return run
    events = [record.get("event") for record in records]
    if events[0] != "start" or events.count("start") != 1:
        run.tampering = "the report does not begin with the witness's start"
        return run
    if "end" not in events or events[-1] != "exit" or events.count("end") != 1 or events.count("exit") != 1:
        ended = "the session's end" if "end" not in events else "the process's exit"
        run.tampering = f"the report stops before {ended} ({exit_note})"
        return run
    end, exit_record = records[events.index("end")], records[-1]
    if end.get("changed"):
        run.tampering = f"pytest's own code was changed during the run: {', '.join(map(str, end['changed']))}"
        return run
    if exit_record.get("report_rewritten"):
        run.tampering = "the JUnit report was rewritten after the session ended"
        return run
    placed_by: dict[str, str] = {}
    problem = ""
    for record in records:
        if record.get("event") == "canaries":
            placed_by, problem = record.get("placed", {}), record.get("problem", "")
    run.outcomes = found
    for role, test_id in placed_by.items():
        run.canaries[role] = statuses(records, role).get(test_id, "")
    if not run.outcomes:
        return run
    if problem:
        run.failure = f"grading's canaries could not be placed: {problem}"
    elif events.count("canaries") != 1 or set(placed_by) != set(EXPECTED):
        run.tampering = f"the canaries were not all run (placed: {sorted(placed_by)})"
    else:
        wrong = [
            f"the canary that must {role} came back {run.canaries[role] or 'without an outcome'}"
            for role in EXPECTED
            if run.canaries[role] != EXPECTED[role]
        ]
        run.tampering = "; ".join(wrong)
    return run
