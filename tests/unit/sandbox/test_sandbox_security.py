"""Hostile commands against real bubblewrap: each one must be contained."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import pytest
from sandbox_helpers import in_sandbox, make_base, survivors, wait_until_running

from overture.sandbox import PathEscape
from overture.sandbox.errors import NotRegularFile
from overture.sandbox.limits import CgroupLimits

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def base(tmp_path):
    return make_base(tmp_path)


def test_no_connection_to_a_port_listening_on_host_loopback(base):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        probe = (
            f"python -c \"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2); "
            "print('CONNECTED')\"; cat /proc/net/dev"
        )
        result = in_sandbox(base, lambda sb: sb.exec(probe))
        server.setblocking(False)
        with pytest.raises(BlockingIOError):
            server.accept()  # nothing ever reached the host's listener
    assert "CONNECTED" not in result.stdout
    assert "Connection refused" in result.stderr
    interfaces = [line.split(":")[0].strip() for line in result.stdout.splitlines()[2:] if ":" in line]
    assert interfaces == ["lo"], interfaces  # a network namespace of its own: loopback only


def test_host_secrets_and_project_files_are_not_visible(base, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOPSECRET")
    commands = f"cat /etc/shadow; ls -A /root; cat {secret}; cat {REPO / 'README.md'}; ls {REPO / 'src'}"
    result = in_sandbox(base, lambda sb: sb.exec(commands))
    assert "TOPSECRET" not in result.stdout
    assert "root:" not in result.stdout
    assert "make train" not in result.stdout
    assert result.stderr.count("No such file or directory") >= 4


def test_writes_outside_the_workspace_fail_or_vanish(base, tmp_path):
    target = tmp_path / "planted"
    result = in_sandbox(
        base,
        lambda sb: sb.exec(
            f"echo x > /usr/planted; echo x > /etc/planted; echo x > {target}; "
            "echo ok > /tmp/private; cat /tmp/private"
        ),
    )
    assert not Path("/usr/planted").exists() and not Path("/etc/planted").exists() and not target.exists()
    assert result.stdout == "ok\n"  # /tmp is writable, but private to the sandbox
    assert not Path("/tmp/private").exists() or Path("/tmp/private").read_text() != "ok\n"
    assert sorted(p.name for p in base.iterdir()) == ["README.md", "pkg"]


def test_file_helpers_refuse_dotdot_and_symlink_escapes(base):
    async def body(sb):
        await sb.exec(
            "ln -s /etc/passwd out; ln -s ../../.. up; ln -s /workspace/pkg inside; "
            "mkdir d; ln -s .. d/parent"
        )
        errors = []
        for path in ("../x", "pkg/../../x", "/etc/passwd", "out", "up/etc/passwd", "d/parent/../escape"):
            try:
                sb.files.read_text(path)
                errors.append(None)
            except PathEscape as exc:
                errors.append(str(exc))
        for path in ("out", "../evil"):
            try:
                sb.files.write_text(path, "x")
                errors.append(None)
            except PathEscape as exc:
                errors.append(str(exc))
        # Links that stay inside the workspace are followed inside it.
        return errors, sb.files.read_text("inside/core.py"), sb.files.read_text("d/parent/README.md")

    errors, via_link, via_parent = in_sandbox(base, body)
    assert all(errors), errors
    assert "points outside the workspace" in errors[3]
    assert "'..' leaves the workspace" in errors[0]
    assert via_link.startswith("def add") and via_parent == "# demo\n"


def test_fork_bomb_is_contained(base):
    result = in_sandbox(
        base, lambda sb: sb.exec("bomb() { bomb | bomb & }; bomb; sleep 100", timeout=3), max_processes=64
    )
    assert result.timed_out or result.exit_code != 0
    assert result.duration_s < 10
    assert os.system("true") == 0  # the host can still fork


@pytest.mark.skipif(
    os.geteuid() == 0 and not CgroupLimits().available,
    reason="as root only a pids cgroup bounds processes, and none can be created here",
)
def test_process_count_is_limited(base):
    spawn = (
        "import subprocess\nstarted = 0\nfor _ in range(200):\n    try:\n"
        "        subprocess.Popen(['sleep', '5'])\n        started += 1\n    except OSError:\n        break\n"
        "print(started)\n"
    )
    result = in_sandbox(base, lambda sb: sb.exec(["python", "-c", spawn], timeout=20), max_processes=40)
    assert 10 < int(result.stdout.split()[-1]) < 40


def test_file_size_is_limited(base):
    result = in_sandbox(base, lambda sb: sb.exec("head -c 5000000 /dev/zero > big; ls -l big"), max_file_mb=1)
    assert result.exit_code != 0 or "1048576" in result.stdout


def test_memory_bomb_is_contained(base):
    result = in_sandbox(
        base,
        lambda sb: sb.exec("python -c 'x = bytearray(4 * 1024**3); print(len(x))'", timeout=20),
        memory_mb=512,
    )
    assert result.exit_code != 0
    assert "MemoryError" in result.stderr


def test_infinite_loop_times_out_and_is_killed(base):
    marker = f"spin-{time.time_ns()}"
    result = in_sandbox(
        base, lambda sb: sb.exec(["bash", "-c", f"exec -a {marker} sh -c 'while :; do :; done'"], timeout=1)
    )
    assert result.timed_out
    assert 0.9 < result.duration_s < 5
    assert survivors([marker]) == []


def test_huge_output_is_capped_keeping_head_and_tail(base):
    command = "echo FIRST; head -c 100000000 /dev/zero | tr '\\0' x; echo; echo LAST"
    result = in_sandbox(base, lambda sb: sb.exec(command), max_output_bytes=10_000)
    assert result.truncated
    assert result.stdout.startswith("FIRST\n") and result.stdout.endswith("LAST\n")
    assert "bytes cut ...]" in result.stdout
    assert len(result.stdout) < 10_200


def test_background_processes_do_not_outlive_their_command(base):
    marker = f"orphan-{time.time_ns()}"
    result = in_sandbox(
        base, lambda sb: sb.exec(["bash", "-c", f"(exec -a {marker} sleep 300) & echo started"], timeout=10)
    )
    assert result.stdout == "started\n" and not result.timed_out
    assert survivors([marker]) == []


def test_one_sandbox_cannot_read_another(base):
    import asyncio

    from overture.config import SandboxConfig
    from overture.sandbox import SandboxPool

    async def main():
        async with (
            SandboxPool(SandboxConfig()) as pool,
            pool.sandbox(base) as first,
            pool.sandbox(base) as second,
        ):
            await first.exec("echo FIRST-SECRET > secret.txt")
            holder = first.workspace.holder_pid
            upper = first.workspace.upper
            snoop = await second.exec(
                f"cat secret.txt; cat /proc/{holder}/root{first.workspace.mount_path}/secret.txt; "
                f"cat {upper}/secret.txt; ls /proc | grep -c '^[0-9]'"
            )
            return snoop, first.files.read_text("secret.txt")

    snoop, own = asyncio.run(main())
    assert own == "FIRST-SECRET\n"
    assert "FIRST-SECRET" not in snoop.stdout
    assert int(snoop.stdout.split()[-1]) <= 4  # only the sandbox's own few processes are visible


def test_cannot_signal_a_host_process(base):
    sleeper = os.spawnlp(os.P_NOWAIT, "sleep", "sleep", "30")
    try:
        result = in_sandbox(base, lambda sb: sb.exec(f"kill -9 {sleeper}; echo $?"))
        assert result.stdout.strip() != "0"
        assert os.waitpid(sleeper, os.WNOHANG) == (0, 0)  # still running
    finally:
        os.kill(sleeper, 9)
        os.waitpid(sleeper, 0)


def test_environment_is_scrubbed(base, monkeypatch):
    monkeypatch.setenv("OVERTURE_HOST_TOKEN", "leak")
    result = in_sandbox(base, lambda sb: sb.exec("env"))
    assert "leak" not in result.stdout
    assert "PATH=" in result.stdout and "HOME=/tmp" in result.stdout


def test_diff_never_follows_a_symlinked_directory_out_of_the_workspace(base, tmp_path):
    outside = tmp_path / "host"
    outside.mkdir()
    (outside / "core.py").write_text("HOST-SECRET\n")
    diff = in_sandbox(base, lambda sb: _replace_with_link(sb, outside))
    assert "HOST-SECRET" not in diff
    assert "Symlink pkg changed" in diff and "--- a/pkg/core.py" in diff


async def _replace_with_link(sb, target):
    await sb.exec(f"rm -rf pkg && ln -s {target} pkg")
    return sb.diff()


def test_a_fifo_is_refused_not_waited_on(base):
    async def body(sb):
        await sb.exec("mkfifo pipe.py")
        errors = []
        for call in (lambda: sb.files.read_text("pipe.py"), lambda: sb.files.write_text("pipe.py", "x")):
            try:
                call()
            except NotRegularFile as exc:
                errors.append(str(exc))
        return errors

    errors = in_sandbox(base, body)
    assert len(errors) == 2 and all("a FIFO, not a regular file" in e for e in errors)


def test_a_cancelled_command_is_killed(base):
    import asyncio

    marker = f"cancelled-{time.time_ns()}"

    async def body(sb):
        task = asyncio.create_task(sb.exec(["bash", "-c", f"exec -a {marker} sleep 60"], timeout=60))
        assert await asyncio.to_thread(wait_until_running, marker), "the command never started"
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return await asyncio.to_thread(survivors, [marker])

    assert in_sandbox(base, body) == []
