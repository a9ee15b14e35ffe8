"""Copies of workspace bases owned by the sandbox's user, for a pool that runs as root.

A sandboxed command runs as an unprivileged host uid when overture is root, and such a user can
write only files it owns: a base owned by root would leave the agent unable to edit anything
through its terminal, and grading unable to apply a test patch. So the pool mounts, as each
overlay's lower layer, a copy of the base whose files and directories belong to that uid,
made once per base and shared by every sandbox of it.

A file met before — the same inode, as in the hard-linked starting workspaces of tasks cut from
one repository snapshot — is hard-linked to its earlier copy instead of copied again, so a
thousand task bases of one repository cost one copy of it plus their own files. Trees are
walked with an explicit stack (no depth limit); symlinks are copied as links, and anything that
is neither a file, a directory nor a link (a FIFO, a socket, a device) is left out.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import shutil
import stat
from pathlib import Path


class OwnedBaseCopies:
    """Copies of bases under `root`, owned by `ids` (uid, gid), one per base path."""

    def __init__(self, root: Path, ids: tuple[int, int]) -> None:
        self.root = root
        self.ids = ids
        self._copies: dict[Path, asyncio.Task[Path]] = {}
        self._inodes: dict[tuple[int, int], Path] = {}  # (device, inode) of a source file → its copy
        self._numbers = itertools.count()

    async def lower_for(self, base: Path) -> Path:
        """The copy of `base` (a resolved directory), made on first use; concurrent callers of one
        base share one copy."""
        task = self._copies.get(base)
        if task is None or (task.done() and (task.cancelled() or task.exception() is not None)):
            destination = self.root / str(next(self._numbers))
            task = asyncio.ensure_future(asyncio.to_thread(self._copy, base, destination))
            self._copies[base] = task
        return await asyncio.shield(task)

    def _copy(self, base: Path, destination: Path) -> Path:
        uid, gid = self.ids
        self.root.mkdir(parents=True, exist_ok=True)
        pending = [(base, destination)]
        while pending:
            source_dir, target_dir = pending.pop()
            target_dir.mkdir()
            shutil.copystat(source_dir, target_dir)
            os.chown(target_dir, uid, gid)
            with os.scandir(source_dir) as entries:
                for entry in entries:
                    source, target = Path(entry.path), target_dir / entry.name
                    info = entry.stat(follow_symlinks=False)
                    if stat.S_ISDIR(info.st_mode):
                        pending.append((source, target))
                    elif stat.S_ISLNK(info.st_mode):
                        os.symlink(os.readlink(source), target)
                        os.lchown(target, uid, gid)
                    elif stat.S_ISREG(info.st_mode):
                        self._copy_file(source, target, info)
        return destination

    def _copy_file(self, source: Path, target: Path, info: os.stat_result) -> None:
        key = (info.st_dev, info.st_ino)
        earlier = self._inodes.get(key)
        if earlier is not None:
            os.link(earlier, target)
            return
        shutil.copy2(source, target, follow_symlinks=False)
        os.chown(target, *self.ids)
        self._inodes[key] = target
