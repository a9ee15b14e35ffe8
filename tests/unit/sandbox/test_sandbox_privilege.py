"""No host privilege, whoever runs overture: the sandbox's host uid, kernel settings, capabilities.

Each check runs in this process (root here, as in most containers) and again in a child process
run as a normal user, through `as_normal_user` (a mount namespace of its own makes this Python
reachable to that user when it lives under a directory only root may enter).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from sandbox_helpers import make_base, processes_named

from overture.config import SandboxConfig
from overture.sandbox import SandboxPool

NORMAL_UID = 4321
# Harmless kernel settings: rate limits of kernel log messages and of VM statistics updates.
SYSCTLS = ("kernel/printk_ratelimit_burst", "kernel/printk_ratelimit", "vm/stat_interval")

# Runs in the sandbox: tries each sysctl and core_pattern, says what happened, as JSON.
PROBE = textwrap.dedent(
    """
    import json, os, sys
    found = {}
    for name in sys.argv[1:]:
        try:
            with open("/proc/sys/" + name, "w") as handle:
                handle.write("7\\n")
            found[name] = "written"
        except OSError as exc:
            found[name] = exc.strerror
    try:
        os.open("/proc/sys/kernel/core_pattern", os.O_WRONLY)
        found["core_pattern"] = "opened"
    except OSError as exc:
        found["core_pattern"] = exc.strerror
    for name in ("/proc/sysrq-trigger", "/sys/kernel/uevent_helper"):
        try:
            os.open(name, os.O_WRONLY)
            found[name] = "opened"
        except OSError as exc:
            found[name] = exc.strerror
    status = open("/proc/self/status").read()
    found["CapEff"] = [line.split()[1] for line in status.splitlines() if line.startswith("CapEff")][0]
    print(json.dumps(found))
    """
)

# The whole check, as one script: run here and as a normal user. It prints one JSON object.
CHECK = textwrap.dedent(
    """
    import asyncio, json, os, sys, tempfile, time
    from pathlib import Path
    from overture.config import SandboxConfig
    from overture.sandbox import SandboxPool

    SYSCTLS, PROBE, MARKER = json.loads(sys.argv[1])

    def read_sysctls():
        return {name: Path("/proc/sys/" + name).read_text() for name in SYSCTLS}

    def host_uids(marker):
        for pid in os.listdir("/proc"):
            try:
                if Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\\0", 1)[0] == marker.encode():
                    status = Path(f"/proc/{pid}/status").read_text().splitlines()
                    return [int(u) for u in next(l for l in status if l.startswith("Uid:")).split()[1:]]
            except (OSError, ValueError):
                pass
        return None

    async def main(base):
        async with SandboxPool(SandboxConfig()) as pool, pool.sandbox(base) as box:
            before = read_sysctls()
            probe = await box.exec(["python", "-c", PROBE, *SYSCTLS])
            after = read_sysctls()
            sleep = ["bash", "-c", f"exec -a {MARKER} sleep 30"]
            sleeper = asyncio.ensure_future(box.exec(sleep, timeout=60))
            uids = None
            for _ in range(500):
                uids = host_uids(MARKER)
                if uids or sleeper.done():
                    break
                await asyncio.sleep(0.02)
            sleeper.cancel()
            await asyncio.gather(sleeper, return_exceptions=True)
            edit = await box.exec("sed -i s/a/b/ pkg/core.py && echo new > pkg/new.py && cat pkg/core.py")
            return {
                "probe": probe.stdout, "probe_err": probe.stderr[-500:], "changed": before != after,
                "before": before, "sandbox_uids": uids, "my_uid": os.geteuid(), "edit": edit.stdout,
            }

    with tempfile.TemporaryDirectory() as root:
        base = Path(root) / "repo"
        (base / "pkg").mkdir(parents=True)
        (base / "pkg" / "core.py").write_text("a\\n")
        print(json.dumps(asyncio.run(main(base))))
    """
)


def restore_sysctls(values: dict[str, str]) -> None:
    for name, value in values.items():
        if Path(f"/proc/sys/{name}").read_text() != value:
            Path(f"/proc/sys/{name}").write_text(value)


def blocked_ancestors(path: str) -> list[tuple[str, str]]:
    """(directory a normal user may not enter, its child on the way to `path`), outermost first."""
    parts = Path(path).parts
    blocked = []
    for depth in range(1, len(parts) - 1):
        directory = Path(*parts[:depth])
        if not os.stat(directory).st_mode & 0o001:
            blocked.append((str(directory), str(Path(*parts[: depth + 1]))))
    return blocked


def as_normal_user(uid: int, argv: list[str]) -> subprocess.CompletedProcess:
    """Run `argv` as host user `uid` in a mount namespace where every directory on the way to this
    Python that only root may enter is replaced by a tmpfs holding just the way through."""
    steps = []
    prefixes = {os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix)}
    for i, (directory, child) in enumerate(
        dict.fromkeys(pair for prefix in sorted(prefixes) for pair in blocked_ancestors(prefix))
    ):
        stash = f"/tmp/.overture-user-test-{os.getpid()}-{i}"
        steps.append(
            f"mkdir -p {stash} && mount --bind {child} {stash} "
            f"&& mount -t tmpfs -o mode=0755 tmpfs {directory} && mkdir -p {child} "
            f"&& mount --bind {stash} {child} && umount {stash} && rmdir {stash}"
        )
    become = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all", "--"]
    script = " && ".join([*steps, 'exec "$@"'])
    env = {"PATH": os.environ["PATH"], "HOME": "/tmp", "LANG": "C.UTF-8"}
    return subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", script, "sh", *become, *argv],
        capture_output=True, text=True, timeout=240, env=env, cwd="/",
    )  # fmt: skip


def run_check(as_user: int | None) -> dict:
    marker = f"overture-uid-probe-{os.getpid()}-{as_user}"
    argv = [sys.executable, "-c", CHECK, json.dumps([SYSCTLS, PROBE, marker])]
    before = {name: Path(f"/proc/sys/{name}").read_text() for name in SYSCTLS}
    try:
        if as_user is None:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=240)
        else:
            done = as_normal_user(as_user, argv)
    finally:
        restore_sysctls(before)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def check_contained(found: dict, expected_uid: int) -> None:
    probe = json.loads(found["probe"].strip().splitlines()[-1])
    assert not found["changed"], f"a sysctl changed on the host: {found}"
    for name in SYSCTLS:
        assert probe[name] != "written", probe
    assert probe["core_pattern"] != "opened", probe
    assert probe["/proc/sysrq-trigger"] != "opened" and probe["/sys/kernel/uevent_helper"] != "opened", probe
    assert int(probe["CapEff"], 16) == 0, probe
    assert found["sandbox_uids"] is not None, "the sandboxed sleep was never seen from the host"
    assert 0 not in found["sandbox_uids"], found["sandbox_uids"]
    assert set(found["sandbox_uids"]) == {expected_uid}, found["sandbox_uids"]
    # Still a working workspace: the sandbox's user edits the base's files and creates new ones.
    assert found["edit"] == "b\n", found


@pytest.mark.skipif(os.geteuid() != 0, reason="the root case needs root")
def test_run_as_root_a_sandboxed_process_is_the_dedicated_unprivileged_uid():
    found = run_check(as_user=None)
    assert found["my_uid"] == 0
    check_contained(found, expected_uid=SandboxConfig().host_uid)


@pytest.mark.skipif(os.geteuid() != 0, reason="becoming a normal user needs root")
def test_run_as_a_normal_user_a_sandboxed_process_stays_that_user():
    found = run_check(as_user=NORMAL_UID)
    assert found["my_uid"] == NORMAL_UID
    check_contained(found, expected_uid=NORMAL_UID)


@pytest.mark.skipif(os.geteuid() != 0, reason="host_uid applies when overture runs as root")
def test_the_configured_host_uid_is_the_one_commands_run_as(tmp_path):
    base = make_base(tmp_path)
    marker = f"overture-configured-uid-{os.getpid()}"

    async def main():
        config = SandboxConfig(host_uid=54321, host_gid=54322)
        async with SandboxPool(config) as pool, pool.sandbox(base) as box:
            sleeper = asyncio.ensure_future(
                box.exec(["bash", "-c", f"exec -a {marker} sleep 30"], timeout=60)
            )
            for _ in range(500):
                if pids := processes_named(marker):
                    break
                await asyncio.sleep(0.02)
            status = Path(f"/proc/{pids[0]}/status").read_text().splitlines()
            sleeper.cancel()
            await asyncio.gather(sleeper, return_exceptions=True)
            inside = await box.exec("id -u; id -g; stat -c %u pkg/core.py")
            return status, inside.stdout

    status, inside = asyncio.run(main())
    uid_line = next(line for line in status if line.startswith("Uid:")).split()[1:]
    gid_line = next(line for line in status if line.startswith("Gid:")).split()[1:]
    assert set(uid_line) == {"54321"} and set(gid_line) == {"54322"}
    assert inside.split() == ["1000", "1000", "1000"]  # the base's files are the sandbox user's


def test_a_root_host_uid_is_refused():
    with pytest.raises(ValueError, match="host_uid"):
        SandboxConfig(host_uid=0)
