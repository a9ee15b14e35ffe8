"""Resource limits of sandboxed commands: rlimits for every process, and a cgroup per sandbox
where the machine lets us create one.

rlimits (CPU seconds, address space, file size, open files, processes) are set by `prlimit`
in front of the sandbox's command line. `RLIMIT_NPROC` counts every process of a host user, and
sandboxes run as one user (or as root, which it does not bind at all), so a per-sandbox process
limit needs the `pids` cgroup controller: on a cgroup v1 hierarchy each sandbox gets its own `pids`
(and `memory`, when writable) group; on cgroup v2, one group with `pids.max` and `memory.max`
in this process's subtree (a delegated one, in a container or a systemd unit). On a machine
where neither is possible the rlimits are all there is: the pool warns, and
`CgroupLimits.available` says so.
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
    user_processes: int  # RLIMIT_NPROC: every process of the host user counts against it

    @classmethod
    def from_config(cls, config: SandboxConfig, shared_user: bool = False) -> Limits:
        """`shared_user`: every sandbox of the pool runs as one dedicated host user (overture runs
        as root), so RLIMIT_NPROC must leave room for `max_live` sandboxes' processes; the pids
        cgroup bounds each sandbox's own."""
        processes = config.max_processes
        return cls(
            cpu_seconds=config.cpu_seconds,
            memory_bytes=config.memory_mb * 1024 * 1024,
            file_bytes=config.max_file_mb * 1024 * 1024,
            open_files=config.max_open_files,
            processes=processes,
            user_processes=processes * config.max_live if shared_user else processes,
        )

    def prlimit_args(self, prlimit: str) -> list[str]:
        """`prlimit` options that set these limits on the command it runs (and its descendants)."""
        return [
            prlimit,
            f"--cpu={self.cpu_seconds}",
            f"--as={self.memory_bytes}",
            f"--fsize={self.file_bytes}",
            f"--nofile={self.open_files}",
            f"--nproc={self.user_processes}",
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


def _own_cgroup_lines() -> list[tuple[str, str]]:
    """(controllers, path) of each hierarchy this process belongs to, from /proc/self/cgroup."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return []
    return [(parts[1], parts[2]) for line in lines if len(parts := line.split(":", 2)) == 3]


def _own_v1_path(root: Path, controller: str) -> Path | None:
    """This process's cgroup directory in the v1 hierarchy of `controller`, if mounted."""
    for controllers, path in _own_cgroup_lines():
        if controller in controllers.split(","):
            directory = root / controller / path.lstrip("/")
            return directory if directory.is_dir() else None
    return None


def _own_v2_path(root: Path) -> Path | None:
    """This process's cgroup directory in the v2 hierarchy: mounted at `root` itself (a v2-only
    host) or at `root/unified` (a hybrid one)."""
    for controllers, path in _own_cgroup_lines():
        if controllers == "":
            for mount in (root, root / "unified"):
                directory = mount / path.lstrip("/")
                if (mount / "cgroup.controllers").is_file() and directory.is_dir():
                    return directory
    return None


def _enable_v2_controllers(parent: Path) -> bool:
    """Whether `pids` and `memory` are (or could be made) available to children of `parent`. A
    cgroup with processes cannot give its children controllers (cgroup v2's no-internal-process
    rule), so when this process is in `parent` itself, it first moves into a leaf of its own —
    as in a delegated subtree, whose processes are the delegate's to place."""
    wanted = {"pids", "memory"}
    try:
        if wanted <= set((parent / "cgroup.subtree_control").read_text().split()):
            return True
        if not wanted <= set((parent / "cgroup.controllers").read_text().split()):
            return False
        if (parent / "cgroup.procs").read_text().split():
            leaf = parent / f"{PREFIX}{os.getpid()}-self"
            leaf.mkdir(exist_ok=True)
            (leaf / "cgroup.procs").write_text(str(os.getpid()))
        (parent / "cgroup.subtree_control").write_text("+pids +memory")
        return True
    except OSError as exc:
        log.info("cgroup v2 at %s: controllers not available to children: %s", parent, exc)
        return False


class CgroupLimits:
    """Creates one cgroup per sandbox that bounds its processes (and memory): on a cgroup v1
    hierarchy a `pids` (and `memory`) group, else on cgroup v2 one group with both controllers;
    where neither can be made, warns once and leaves the rlimits alone to bound commands."""

    warned = False  # the fallback is said once a process, not once a pool

    def __init__(self, root: Path | None = None) -> None:
        root = root or CGROUP_ROOT
        self.hierarchies = self._v1(root) or self._v2(root)
        self.available = bool(self.hierarchies)
        if not self.available and not CgroupLimits.warned:
            CgroupLimits.warned = True
            log.warning(
                "no cgroup can be made under %s (neither a writable cgroup v1 pids hierarchy nor a "
                "cgroup v2 subtree with pids and memory): sandboxed processes are bounded by "
                "RLIMIT_NPROC and memory by RLIMIT_AS alone, and RLIMIT_NPROC does not bind root",
                root,
            )
        for parent, _ in self.hierarchies:
            remove_cgroups([group for group in parent.glob(f"{PREFIX}*") if orphaned(group.name, PREFIX)])

    @staticmethod
    def _v1(root: Path) -> list[tuple[Path, dict[str, str]]]:
        """[(parent, {limit file: "processes" | "memory"})] of writable v1 `pids` and `memory`."""
        files = {"pids": "pids.max", "memory": "memory.limit_in_bytes"}
        found = []
        for controller, limit in files.items():
            parent = _own_v1_path(root, controller)
            if parent is not None and os.access(parent, os.W_OK) and _can_make_child(parent):
                found.append((parent, {limit: "processes" if controller == "pids" else "memory"}))
        return found if any("pids.max" in limits for _, limits in found) else []

    @staticmethod
    def _v2(root: Path) -> list[tuple[Path, dict[str, str]]]:
        parent = _own_v2_path(root)
        if parent is None or not os.access(parent, os.W_OK) or not _enable_v2_controllers(parent):
            return []
        if not _can_make_child(parent):
            return []
        return [(parent, {"pids.max": "processes", "memory.max": "memory", "memory.swap.max": "none"})]

    def create(self, name: str, limits: Limits) -> list[Path]:
        """The cgroup directories of one sandbox, limits set; empty when unavailable."""
        values = {"processes": str(limits.processes), "memory": str(limits.memory_bytes), "none": "0"}
        groups = []
        for parent, files in self.hierarchies:
            group = parent / f"{PREFIX}{os.getpid()}-{name}"
            if " " in str(group):
                log.info("cgroup path %s has a space; not used", group)
                continue
            try:
                group.mkdir(exist_ok=True)
                for file, kind in files.items():
                    if (group / file).exists():  # memory.swap.max is absent without swap accounting
                        (group / file).write_text(values[kind])
                groups.append(group)
            except OSError as exc:
                log.info("cgroup %s not used: %s", group, exc)
        return groups


def _can_make_child(parent: Path) -> bool:
    probe = parent / f"{PREFIX}probe-{uuid.uuid4().hex[:8]}"
    try:
        probe.mkdir()
        probe.rmdir()
        return True
    except OSError:
        return False


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
