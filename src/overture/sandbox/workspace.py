"""Copy-on-write workspaces: one read-only base shared by every sandbox, a writable layer each.

`OverlayWorkspace` mounts an overlay filesystem (lower = the base, upper = this sandbox's
changes) inside a user + mount namespace of its own, kept alive by a small holder process
(`unshare … sh -c 'mount … && read'`; it exits when its stdin closes, so it dies with its
owner). Commands enter that namespace with `nsenter`, and the host reads and writes the merged
view through `/proc/HOLDER/root`. A thousand sandboxes of one repository cost one copy of it
plus their changes. `CopyWorkspace` (isolation = "none", for debugging only) copies the base.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import stat
from pathlib import Path

from overture.sandbox.diff import MAX_CHANGED_PATHS, changed_between, files_under, read_entry, render_diff
from overture.sandbox.errors import SandboxDead, SandboxError, TooManyPaths
from overture.sandbox.tree import is_directory, remove_tree, walk

OVERLAY_OPTION_CHARS = (",", ":", "\\")
HOLDER_START_TIMEOUT_S = 10.0
OPAQUE_XATTR = "user.overlay.opaque"


def check_base(base: Path) -> Path:
    """`base` resolved; it must be a directory whose path the overlay mount options can carry."""
    resolved = base.resolve()
    if not resolved.is_dir():
        raise SandboxError(f"{base}: workspace base is not a directory")
    bad = [c for c in OVERLAY_OPTION_CHARS if c in str(resolved)]
    if bad:
        raise SandboxError(f"{resolved}: a workspace base path may not contain {' '.join(bad)}")
    return resolved


class OverlayWorkspace:
    """A writable overlay of `base`, mounted in a namespace held by one process."""

    def __init__(self, base: Path, state: Path, unshare: str, nsenter: str) -> None:
        self.base = check_base(base)
        self.state = state
        self.upper, self.work, self.mountpoint = state / "upper", state / "work", state / "merged"
        self._unshare, self._nsenter = unshare, nsenter
        self._holder: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        for directory in (self.upper, self.work, self.mountpoint):
            directory.mkdir(parents=True, exist_ok=True)
        options = f"userxattr,lowerdir={self.base},upperdir={self.upper},workdir={self.work}"
        # The shell stays on as the holder, blocked in `read` until its stdin closes; its $0
        # names the base it serves, so that `ps` shows what each holder is for.
        script = 'mount -t overlay overlay -o "$1" "$2" && echo ready && read -r _'
        self._holder = await asyncio.create_subprocess_exec(
            self._unshare, "--user", "--map-root-user", "--mount", "--propagation", "private",
            "/bin/sh", "-c", script, f"overture-holder {self.base}", options, str(self.mountpoint),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )  # fmt: skip
        assert self._holder.stdout is not None
        try:
            line = await asyncio.wait_for(self._holder.stdout.readline(), HOLDER_START_TIMEOUT_S)
        except TimeoutError:
            line = b""
        if line.strip() != b"ready":
            await self.stop()
            stderr = await self._holder.stderr.read() if self._holder.stderr else b""
            reason = stderr.decode(errors="replace").strip()
            raise SandboxError(f"{self.base}: could not mount the overlay workspace: {reason}")

    @property
    def alive(self) -> bool:
        return self._holder is not None and self._holder.returncode is None

    @property
    def root(self) -> Path:
        """The merged view as the host sees it."""
        if not self.alive:
            raise SandboxDead(f"workspace of {self.base}: its namespace holder has exited")
        return Path(f"/proc/{self._holder.pid}/root{self.mountpoint}")

    @property
    def holder_pid(self) -> int | None:
        return self._holder.pid if self.alive else None

    def command_prefix(self) -> list[str]:
        """Run what follows inside the workspace's user and mount namespaces."""
        if not self.alive:
            raise SandboxDead(f"workspace of {self.base}: its namespace holder has exited")
        return [self._nsenter, f"--target={self._holder.pid}", "--user", "--mount", "--preserve-credentials"]

    @property
    def mount_path(self) -> str:
        """Where the merged view is, inside the workspace's namespace."""
        return str(self.mountpoint)

    def changed_paths(self) -> list[str]:
        """Paths that may differ from the base: everything the upper layer holds or hides. The
        layer is walked at any depth from directory descriptors (`overture.sandbox.tree`); past
        `MAX_CHANGED_PATHS` entries or paths it is `TooManyPaths`, never a partial list (grading
        restores what this lists)."""
        changed: set[str] = set()
        too_many = f"the workspace holds more than {MAX_CHANGED_PATHS} changed paths; stopped listing them"
        try:
            for directory in walk(self.upper, limit=MAX_CHANGED_PATHS):
                rel_dir = directory.rel
                if rel_dir:
                    if self._is_opaque(directory.fd):
                        changed.update(self._base_files(rel_dir))  # the base's entries are hidden
                    if read_entry(self.base, rel_dir, max_bytes=0)[0] in ("file", "symlink"):
                        changed.add(rel_dir)  # a base file (or link) replaced by a directory
                for entry in directory.entries:
                    if is_directory(entry):
                        continue
                    rel = directory.path_of(entry)
                    try:
                        info = entry.stat(follow_symlinks=False)
                    except FileNotFoundError:
                        continue
                    if not (stat.S_ISCHR(info.st_mode) and info.st_rdev == 0):  # not a whiteout
                        changed.add(rel)
                    changed.update(self._base_files(rel))  # deleted, or a base directory replaced by a file
                if len(changed) > MAX_CHANGED_PATHS:
                    raise TooManyPaths(too_many)
        except TooManyPaths:
            raise TooManyPaths(too_many) from None
        return sorted(changed)

    def _base_files(self, rel: str) -> list[str]:
        return files_under(self.base, rel)

    @staticmethod
    def _is_opaque(directory_fd: int) -> bool:
        try:
            return os.getxattr(directory_fd, OPAQUE_XATTR) == b"y"
        except OSError:
            return False

    def diff(self) -> str:
        return render_diff(self.base, self.root, self.changed_paths())

    async def reset(self) -> None:
        """Back to the base: drop the upper layer and mount afresh."""
        await self.stop()
        await asyncio.to_thread(remove_tree, self.upper)
        await asyncio.to_thread(remove_tree, self.work)
        await self.start()

    async def stop(self) -> None:
        holder = self._holder
        if holder is None or holder.returncode is not None:
            return
        if holder.stdin:
            holder.stdin.close()
        with contextlib.suppress(ProcessLookupError):
            holder.kill()
        await holder.wait()

    async def destroy(self) -> None:
        await self.stop()
        await asyncio.to_thread(remove_tree, self.state)


class CopyWorkspace:
    """isolation = "none": a plain copy of the base, for debugging where namespaces are unwanted."""

    def __init__(self, base: Path, state: Path) -> None:
        self.base = check_base(base)
        self.state = state
        self.mountpoint = state / "copy"
        self.alive = True

    async def start(self) -> None:
        await asyncio.to_thread(shutil.copytree, self.base, self.mountpoint, symlinks=True)

    @property
    def root(self) -> Path:
        return self.mountpoint

    @property
    def holder_pid(self) -> None:
        return None

    def command_prefix(self) -> list[str]:
        return []

    @property
    def mount_path(self) -> str:
        return str(self.mountpoint)

    def changed_paths(self) -> list[str]:
        return changed_between(self.base, self.mountpoint)

    def diff(self) -> str:
        return render_diff(self.base, self.root, self.changed_paths())

    async def reset(self) -> None:
        await asyncio.to_thread(remove_tree, self.mountpoint)
        await self.start()

    async def stop(self) -> None:
        return None

    async def destroy(self) -> None:
        await asyncio.to_thread(remove_tree, self.state)
