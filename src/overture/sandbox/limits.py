"""Resource limits of sandboxed commands: rlimits for every process, and a cgroup per sandbox
where the machine lets us create one.

rlimits (CPU seconds, address space, file size, open files, processes) are set by `prlimit`
in front of the sandbox's command line. `RLIMIT_NPROC` does not bind processes whose host user is root,
so a process-count limit that holds for root needs the `pids` cgroup controller: on a cgroup v1
hierarchy each sandbox gets its own `pids` (and `memory`, when writable) group. On a machine
where neither is possible the rlimits are all there is, and `CgroupLimits.available` says so.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from overture.config import SandboxConfig

log = logging.getLogger(__name__)
CGROUP_ROOT = Path("/sys/fs/cgroup")
PREFIX = "overture-"  # + the owner's pid + "-" + the sandbox's name


def orphaned(name: str, prefix: str) -> bool:
    """Whether a `<prefix><pid>-...` name belongs to a process that no longer exists."""
    owner = name.removeprefix(prefix).split("-", 1)[0]
    if not owner.isdigit():
        return False
    try:
        os.kill(int(owner), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


@dataclass(frozen=True)
class Limits:
    """Per-command limits (from `SandboxConfig`)."""

    cpu_seconds: int
    memory_bytes: int
    file_bytes: int
    open_files: int
    processes: int

    @classmethod
    def from_config(cls, config: SandboxConfig) -> Limits:
        return cls(
            cpu_seconds=config.cpu_seconds,
            memory_bytes=config.memory_mb * 1024 * 1024,
            file_bytes=config.max_file_mb * 1024 * 1024,
            open_files=config.max_open_files,
            processes=config.max_processes,
        )

    def prlimit_args(self, prlimit: str) -> list[str]:
        """`prlimit` options that set these limits on the command it runs (and its descendants)."""
        return [
            prlimit,
            f"--cpu={self.cpu_seconds}",
            f"--as={self.memory_bytes}",
            f"--fsize={self.file_bytes}",
            f"--nofile={self.open_files}",
            f"--nproc={self.processes}",
            "--core=0",
            "--",
        ]


# Joins the cgroups named in $OVERTURE_CGROUP_PROCS, then becomes the rest of the command line.
# A shell in front costs an exec; the alternative, a preexec function, forks the whole Python
# process (slow when it is large) and is unsafe when it runs threads.
JOIN_SCRIPT = 'for f in $OVERTURE_CGROUP_PROCS; do echo 0 > "$f" || exit 125; done; exec "$@"'


def confining_argv(limits: Limits, groups: list[Path], prlimit: str) -> tuple[list[str], dict[str, str]]:
    """Command prefix (and environment) that puts a command in `groups` under `limits`."""
    argv = limits.prlimit_args(prlimit)
    if not groups:
        return argv, {}
    procs = " ".join(str(group / "cgroup.procs") for group in groups)
    return ["/bin/sh", "-c", JOIN_SCRIPT, "join-cgroups", *argv], {"OVERTURE_CGROUP_PROCS": procs}


def _own_v1_path(controller: str) -> Path | None:
    """This process's cgroup directory in the v1 hierarchy of `controller`, if mounted."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            directory = CGROUP_ROOT / controller / path.lstrip("/")
            return directory if directory.is_dir() else None
    return None


class CgroupLimits:
    """Creates one `pids` (+ `memory`) cgroup per sandbox on a cgroup v1 hierarchy."""

    def __init__(self) -> None:
        self.parents = {c: p for c in ("pids", "memory") if (p := _own_v1_path(c)) and os.access(p, os.W_OK)}
        self.available = "pids" in self.parents and self._probe()
        if not self.available:
            log.info("no writable pids cgroup: process counts rely on RLIMIT_NPROC alone")
        for parent in self.parents.values():
            remove_cgroups([group for group in parent.glob(f"{PREFIX}*") if orphaned(group.name, PREFIX)])

    def _probe(self) -> bool:
        probe = self.parents["pids"] / f"overture-probe-{uuid.uuid4().hex[:8]}"
        try:
            probe.mkdir()
            probe.rmdir()
            return True
        except OSError:
            return False

    def create(self, name: str, limits: Limits) -> list[Path]:
        """The cgroup directories of one sandbox, limits set; empty when unavailable."""
        if not self.available:
            return []
        groups = []
        for controller, parent in self.parents.items():
            group = parent / f"{PREFIX}{os.getpid()}-{name}"
            if " " in str(group):
                log.info("cgroup path %s has a space; not used", group)
                continue
            try:
                group.mkdir(exist_ok=True)
                if controller == "pids":
                    (group / "pids.max").write_text(str(limits.processes))
                else:
                    (group / "memory.limit_in_bytes").write_text(str(limits.memory_bytes))
                groups.append(group)
            except OSError as exc:
                log.info("cgroup %s not used: %s", group, exc)
        return groups


def kill_cgroups(groups: list[Path], rounds: int = 20) -> None:
    """SIGKILL every process in `groups`, again while any is left (a fork bomb adds processes
    between reading the list and the kills)."""
    for _ in range(rounds):
        found = False
        for group in groups:
            with contextlib.suppress(OSError):
                for pid in (group / "cgroup.procs").read_text().split():
                    found = True
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(int(pid), signal.SIGKILL)
        if not found:
            return
        time.sleep(0.005)


def remove_cgroups(groups: list[Path]) -> None:
    """Kill what is left in `groups` and remove them."""
    kill_cgroups(groups)
    for group in groups:
        for _ in range(50):
            try:
                group.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:  # busy: a killed process is still being reaped
                time.sleep(0.01)
        else:
            log.warning("cgroup %s could not be removed: processes are still in it", group)
