"""The bubblewrap command line of a sandboxed command: namespaces, read-only system, scrubbed env.

Every command runs in new user, pid, network, ipc, uts and cgroup namespaces (`--unshare-all`,
so no network at all: only a loopback device with nothing listening), as an unprivileged
user inside, with the system directories bound read-only, a private `/tmp`, `/proc` and `/dev`
of its own, the workspace read-write at `/workspace`, and an environment reduced to a known
set. `--die-with-parent` and a pid namespace mean that killing the command's outer process
kills everything it started.

`--die-with-parent` alone leaves two windows open: bwrap arms the parent-death signal only once
it has started (after the shell, `prlimit` and `nsenter` in front of it), and its pid-1 process
arms its own only after the sandbox's mounts are set up. An owner killed in either window
(milliseconds, more under load) would leave the command running with nobody to stop it. So the
command line closes both (`owner_death_guard`): right after the last namespace change it arms the
signal itself (`setpriv --pdeathsig KILL`, kept across the execs that follow), then starts a pid
namespace of its own (`unshare --pid --fork --kill-child`) whose first process checks that the
owner is still there and becomes bwrap; when bwrap's outer process dies, the kernel kills every
process below it, set up or not.

Whoever runs overture, no sandboxed process holds host privilege. Run as a normal user, commands
run as that user. Run as root (as in most containers and cluster pods), they run as a dedicated
unprivileged host uid and gid (`sandbox.host_uid`/`host_gid`, 65534 by default): the last step
before bubblewrap drops to them (`drop_privileges`: no groups, no capabilities, no new
privileges), so the sandbox's user namespace maps its user to that uid, never to 0. Inside,
`/proc` is remounted read-only (so `/proc/sys` and `/proc/sysrq-trigger` are), `/sys` is not
mounted at all, and no further user namespace can be made (`--disable-userns`, where bubblewrap
has it): the kernel's user-namespace code is the largest surface an unprivileged process reaches.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path

from overture.sandbox.errors import SandboxUnavailable
from overture.sandbox.files import WORKSPACE_MOUNT
from overture.sandbox.python_env import PythonEnvironment

SANDBOX_UID = 1000
SANDBOX_GID = 1000
SYSTEM_DIRS = ("/usr", "/etc/alternatives", "/etc/ssl", "/etc/ld.so.cache", "/etc/localtime")
USR_MERGED_LINKS = ("bin", "sbin", "lib", "lib64", "lib32")
INSTALL_HINT = "install it with: apt-get install bubblewrap (Debian/Ubuntu) or your distribution's package"


def require_tools(isolation: str = "bwrap") -> dict[str, str]:
    """Paths of the programs the sandbox needs; a clear error naming what is missing."""
    names = ("bwrap", "unshare", "nsenter", "setpriv", "prlimit") if isolation == "bwrap" else ("prlimit",)
    found = {name: shutil.which(name) for name in names}
    missing = [name for name, path in found.items() if path is None]
    if missing:
        hint = INSTALL_HINT if "bwrap" in missing else "install util-linux"
        raise SandboxUnavailable(f"{', '.join(missing)} not found on PATH; {hint}")
    return found  # type: ignore[return-value]


# The pid namespace's first process goes on only if its parent (`unshare`) is still a child of
# the owner ($1). The host's /proc shows host pids, so PPid there is the real parent even though
# getppid() is 0 inside the new namespace. It is checked after `unshare --kill-child` has armed
# the signal: an owner that died before the check is seen dead, one that dies after kills it.
OWNER_ALIVE_SCRIPT = (
    'parent_of() { parent=; while read -r key value; do [ "$key" = PPid: ] && parent=$value; done < "$1"; }; '
    'parent_of /proc/self/status; parent_of "/proc/$parent/status"; '
    '[ "$parent" = "$1" ] && shift && exec "$@"'
)


def host_ids(uid: int, gid: int) -> tuple[int, int] | None:
    """The host uid and gid sandboxed commands run as: `(uid, gid)` when this process is root,
    None when it is a normal user (commands then stay that user's)."""
    if os.geteuid() != 0:
        return None
    if uid == 0 or gid == 0:
        raise SandboxUnavailable("sandbox.host_uid and sandbox.host_gid must not be 0 (root)")
    return uid, gid


def drop_privileges(setpriv: str, ids: tuple[int, int] | None) -> list[str]:
    """Command prefix that runs what follows as `ids` with no groups, no capabilities and no
    way to gain any (setuid binaries included); the parent-death signal is armed again after
    the switch, since the kernel clears it when credentials change. Empty when `ids` is None."""
    if ids is None:
        return []
    uid, gid = ids
    return [
        setpriv, f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--inh-caps=-all",
        "--no-new-privs", "--pdeathsig=KILL", "--",
    ]  # fmt: skip


@functools.cache
def bwrap_can_disable_userns(bwrap: str) -> bool:
    """Whether this bubblewrap has `--disable-userns` (0.8 and later)."""
    try:
        shown = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return False
    return "--disable-userns" in shown.stdout + shown.stderr


def owner_death_guard(setpriv: str, unshare: str, owner_pid: int) -> list[str]:
    """Command prefix after which nothing outlives `owner_pid`: what follows runs as pid 1 of a
    pid namespace that dies with the owner, and does not run at all if the owner has died."""
    return [
        setpriv, "--pdeathsig", "KILL", "--",
        unshare, "--pid", "--fork", "--kill-child", "--",
        "/bin/sh", "-c", OWNER_ALIVE_SCRIPT, "owner-alive", str(owner_pid),
    ]  # fmt: skip


def sandbox_env(python: PythonEnvironment | None, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The whole environment of a sandboxed command (nothing is inherited from the host);
    `python`, when given, is the Python its commands find first (`PythonEnvironment`)."""
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": "/tmp",
        "TMPDIR": "/tmp",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TERM": "dumb",
        "USER": "agent",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
    }
    if python is not None:
        variables = python.variables()
        env.update(variables, PATH=f"{variables['PATH']}:{env['PATH']}")
    else:  # a Python of the host's own choosing (`extra_ro_paths`): no plugin loads unasked
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    env.update(extra or {})
    return env


def etc_files(state_dir: Path) -> Path:
    """A minimal /etc/passwd, /etc/group and /etc/hosts for the sandbox user, written once."""
    etc = state_dir / "etc"
    etc.mkdir(parents=True, exist_ok=True)
    files = {
        "passwd": f"root:x:0:0:root:/root:/bin/sh\nagent:x:{SANDBOX_UID}:{SANDBOX_GID}:agent:/tmp:/bin/sh\n"
        "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
        "group": f"root:x:0:\nagent:x:{SANDBOX_GID}:\nnogroup:x:65534:\n",
        "hosts": "127.0.0.1 localhost\n::1 localhost\n",
        "hostname": "sandbox\n",
    }
    for name, text in files.items():
        if not (etc / name).exists():
            (etc / name).write_text(text)
    return etc


def bwrap_args(
    bwrap: str,
    workspace: str,
    etc: Path,
    env: dict[str, str],
    read_only: dict[str, str],
    workdir: str = WORKSPACE_MOUNT,
) -> list[str]:
    """The bwrap invocation (up to and including `--`) for one command over `workspace`.

    `read_only` maps each path the sandbox sees read-only to where the workspace's namespace has
    it bound (`OverlayWorkspace` binds them there: a sandbox user may not be able to reach the
    host path itself, such as a Python under root's 0700 home)."""
    userns = ["--unshare-user", "--disable-userns"] if bwrap_can_disable_userns(bwrap) else []
    args = [
        bwrap,
        "--unshare-all",
        *userns,
        "--die-with-parent",
        "--new-session",
        "--clearenv",
        "--uid",
        str(SANDBOX_UID),
        "--gid",
        str(SANDBOX_GID),
        "--hostname",
        "sandbox",
    ]
    for path in SYSTEM_DIRS:
        if os.path.exists(path):
            args += ["--ro-bind", path, path]
    for name in USR_MERGED_LINKS:
        host = Path("/") / name
        if host.is_symlink():
            args += ["--symlink", os.readlink(host), f"/{name}"]
        elif host.is_dir():
            args += ["--ro-bind", str(host), f"/{name}"]
    for name in ("passwd", "group", "hosts", "hostname"):
        args += ["--ro-bind", str(etc / name), f"/etc/{name}"]
    # /proc, /dev and the private /tmp first: binds below may land inside them (a Python
    # environment under /tmp must not be hidden by the tmpfs mounted over it afterwards).
    args += ["--proc", "/proc", "--remount-ro", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    for path, bound_at in read_only.items():
        args += ["--ro-bind", bound_at, path]
    args += [
        "--bind",
        workspace,
        WORKSPACE_MOUNT,
        "--chdir",
        workdir,
    ]
    for key, value in env.items():
        args += ["--setenv", key, value]
    return [*args, "--"]
