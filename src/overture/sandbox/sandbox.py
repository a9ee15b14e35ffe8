"""One sandbox: commands run isolated over a copy-on-write workspace, plus confined file access.

`Sandbox.exec` starts one bubblewrap per command inside the workspace's namespace, with rlimits
and the sandbox's cgroup, captures capped output, and on timeout kills the whole process tree
(SIGKILL to the command's process group; `--die-with-parent` and the pid namespace take every
descendant with it). Nothing a command starts outlives it. Several commands may run in one
sandbox at once (an agent's parallel tool calls); they share its workspace and its cgroup.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import signal
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from overture.config import SandboxConfig
from overture.sandbox.errors import PathEscape, SandboxDead, SandboxError
from overture.sandbox.files import WORKSPACE_MOUNT, ConfinedFiles, inside_workspace
from overture.sandbox.isolation import bwrap_args, drop_privileges, owner_death_guard, sandbox_env
from overture.sandbox.limits import Limits, confining_argv, remove_cgroups
from overture.sandbox.output import CappedOutput
from overture.sandbox.python_env import PythonEnvironment
from overture.sandbox.workspace import CopyWorkspace, OverlayWorkspace

log = logging.getLogger(__name__)
DRAIN_AFTER_KILL_S = 2.0


@dataclass
class ExecResult:
    """What one command did."""

    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool
    truncated: bool
    duration_s: float

    def to_dict(self) -> dict:
        return asdict(self)


class Sandbox:
    """An isolated, writable view of one base directory. Create through `SandboxPool`."""

    def __init__(
        self,
        workspace: OverlayWorkspace | CopyWorkspace,
        config: SandboxConfig,
        tools: dict[str, str],
        etc: Path,
        cgroups: list[Path],
        ids: tuple[int, int] | None = None,
        python: PythonEnvironment | None = None,
    ) -> None:
        self.workspace = workspace
        self.config = config
        self.limits = Limits.from_config(config, shared_user=ids is not None)
        self._tools = tools
        self._etc = etc
        self._cgroups = cgroups
        self._ids = ids
        self._env = sandbox_env(python)
        self.closed = False

    @property
    def base(self) -> Path:
        return self.workspace.base

    @property
    def alive(self) -> bool:
        return not self.closed and self.workspace.alive

    @property
    def files(self) -> ConfinedFiles:
        """Read/write/list/glob inside the workspace; `..` and symlinks out are refused. What it
        creates belongs to the sandbox's user, so that commands can change it afterwards."""
        return ConfinedFiles(str(self.workspace.root), owner=self._ids)

    def _argv(
        self, argv: list[str], workdir: str, cpu_seconds: int | None = None
    ) -> tuple[list[str], dict[str, str]]:
        """The host command line (and its environment) that runs `argv` in the sandbox."""
        limits = self.limits
        if cpu_seconds is not None:
            limits = dataclasses.replace(limits, cpu_seconds=cpu_seconds)
        confine, env = confining_argv(limits, self._cgroups, self._tools["prlimit"])
        if self.config.isolation == "none":
            return [*confine, *argv], {**self._env, **env}
        inside = f"{WORKSPACE_MOUNT}/{workdir}" if workdir != "." else WORKSPACE_MOUNT
        wrap = bwrap_args(
            self._tools["bwrap"],
            self.workspace.mount_path,
            self._etc,
            self._env,
            self.workspace.read_only_binds(),
            workdir=inside,
        )
        host_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **env}
        guard = owner_death_guard(self._tools["setpriv"], self._tools["unshare"], os.getpid())
        drop = drop_privileges(self._tools["setpriv"], self._ids)
        return [*confine, *self.workspace.command_prefix(), *guard, *drop, *wrap, *argv], host_env

    async def exec(
        self,
        command: str | list[str],
        timeout: float | None = None,
        workdir: str = ".",
        stdin: bytes | None = None,
        pass_fds: Sequence[int] = (),
        cpu_seconds: int | None = None,
    ) -> ExecResult:
        """Run `command` (a shell string, or an argv list) in the sandbox and wait for it.

        `pass_fds`: host file descriptors the command inherits under the same numbers (a pipe
        to or from the caller, e.g. grading's report); every other descriptor is closed.
        `cpu_seconds`: this command's CPU-time limit per process, instead of `sandbox.cpu_seconds`
        (a repository's test suite measured to need more)."""
        if self.closed:
            raise SandboxError(f"sandbox of {self.base}: already closed")
        if not self.workspace.alive:
            raise SandboxDead(f"sandbox of {self.base}: its workspace namespace has exited")
        argv = ["/bin/sh", "-c", command] if isinstance(command, str) else list(command)
        if not argv:
            raise SandboxError("empty command")
        try:
            workdir = inside_workspace(workdir)
        except PathEscape as exc:
            raise SandboxError(f"workdir {exc}") from None
        if not self.files.is_dir(workdir):
            raise SandboxError(f"workdir {workdir}: not a directory inside the workspace")
        limit = timeout if timeout is not None else self.config.timeout_s
        cwd = str(self.workspace.root / workdir) if self.config.isolation == "none" else "/"
        host_argv, env = self._argv(argv, workdir, cpu_seconds)
        started = time.monotonic()
        proc = await asyncio.create_subprocess_exec(
            *host_argv,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            start_new_session=True, cwd=cwd, env=env, pass_fds=tuple(pass_fds),
        )  # fmt: skip
        out, err = CappedOutput(self.config.max_output_bytes), CappedOutput(self.config.max_output_bytes)
        readers = asyncio.gather(out.drain(proc.stdout), err.drain(proc.stderr), self._feed(proc, stdin))
        timed_out = False
        try:
            try:
                await asyncio.wait_for(proc.wait(), limit)
            except TimeoutError:
                timed_out = True
                self._kill(proc)
            try:
                await asyncio.wait_for(readers, DRAIN_AFTER_KILL_S)
            except TimeoutError:
                log.warning("sandbox of %s: output pipes still open %.0fs after the command ended",
                            self.base, DRAIN_AFTER_KILL_S)  # fmt: skip
        except BaseException:
            # Cancelled (an aborted episode, a caller's own timeout): the command must not run on.
            self._kill(proc)
            readers.cancel()
            await asyncio.gather(readers, return_exceptions=True)
            await asyncio.shield(proc.wait())
            raise
        code = await proc.wait()
        return ExecResult(
            exit_code=code, stdout=out.text(), stderr=err.text(), timed_out=timed_out,
            truncated=out.cut > 0 or err.cut > 0, duration_s=round(time.monotonic() - started, 4),
        )  # fmt: skip

    @staticmethod
    def _kill(proc: asyncio.subprocess.Process) -> None:
        """SIGKILL the command's process group: killing bwrap's outer process takes the pid
        namespace, so every descendant, with it. (The cgroup is not swept: other commands of this
        sandbox may be running.)"""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)

    @staticmethod
    async def _feed(proc: asyncio.subprocess.Process, data: bytes | None) -> None:
        if data is None or proc.stdin is None:
            return
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            proc.stdin.write(data)
            await proc.stdin.drain()
        proc.stdin.close()

    def changed_paths(self) -> list[str]:
        """Workspace-relative paths that may differ from the base (written, created or deleted)."""
        return self.workspace.changed_paths()

    def diff(self) -> str:
        """Unified diff of the workspace against its base (`patch -p1` applies it)."""
        return self.workspace.diff()

    async def reset(self) -> None:
        """Return the workspace to its base."""
        await self.workspace.reset()

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        await self.workspace.destroy()
        await asyncio.to_thread(remove_cgroups, self._cgroups)
