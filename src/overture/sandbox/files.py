"""File access confined to a workspace root, safe against `..` and symlink escapes.

Paths are resolved one component at a time from a directory descriptor of the root, never
letting the kernel follow a symlink: each symlink met on the way is read and resolved by hand
*inside* the workspace (an absolute target is taken relative to the sandbox's view, where the
workspace is mounted at `/workspace`). A path or link that would leave the root raises
`PathEscape` naming it. Because nothing is followed implicitly, a command racing to swap a
directory for a symlink cannot redirect a read or write outside the workspace.
"""

from __future__ import annotations

import contextlib
import errno
import os
import posixpath
import re
import stat
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import PurePosixPath

from overture.sandbox.errors import NotRegularFile, PathEscape
from overture.sandbox.tree import is_regular, walk

WORKSPACE_MOUNT = "/workspace"
MAX_SYMLINKS = 40


def workspace_relative(path: str) -> PurePosixPath:
    """`path` as seen by the agent (relative, or absolute under /workspace) → relative path."""
    posix = PurePosixPath(path)
    if posix.is_absolute():
        try:
            posix = posix.relative_to(WORKSPACE_MOUNT)
        except ValueError:
            raise PathEscape(f"{path}: outside the workspace ({WORKSPACE_MOUNT})") from None
    return posix


def inside_workspace(path: str) -> str:
    """`path` as a normalised workspace-relative path ("." for the root); `PathEscape` naming it
    when it is absolute elsewhere or its `..` lead out. (Symlinks are not resolved here: that
    is `ConfinedFiles`' work, or the sandbox's own, for commands.)"""
    relative = posixpath.normpath(str(workspace_relative(path)))
    if relative == ".." or relative.startswith("../"):
        raise PathEscape(f"{path}: outside the workspace")
    return relative


def looks_binary(data: bytes) -> bool:
    """Whether file contents are binary rather than text (a NUL byte near the start, as git judges)."""
    return b"\0" in data[:8192]


SPECIAL_KINDS = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}


def refusal(mode: int | None) -> str:
    """Why a file of `mode` (None: not known, its open was refused) is neither read nor written."""
    what = SPECIAL_KINDS.get(stat.S_IFMT(mode), "no regular file") if mode is not None else None
    return f"{what or 'a FIFO, socket or device'}, not a regular file; refused (neither read nor written)"


def open_regular(name: str, dir_fd: int, shown: str, write: bool = False) -> int:
    """A blocking descriptor of the regular file `name` in `dir_fd` (`shown` names it in errors),
    opened without following a symlink (`ELOOP`) and without waiting: `O_NONBLOCK`, so that a FIFO
    swapped in after any earlier check cannot hang the call, then `fstat` on the descriptor itself.
    A FIFO, device or socket is `NotRegularFile` (for writing, a FIFO without a reader already
    fails to open, ENXIO: the same refusal); a directory `IsADirectoryError`. For writing the
    file is created if missing, and emptied only once it is known to be a regular file."""
    flags = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    flags |= os.O_WRONLY | os.O_CREAT if write else os.O_RDONLY
    try:
        fd = os.open(name, flags, 0o644, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise NotRegularFile(f"{shown}: {refusal(None)}") from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(f"{shown}: is a directory")
        if not stat.S_ISREG(mode):
            raise NotRegularFile(f"{shown}: {refusal(mode)}")
        os.set_blocking(fd, True)
        if write:
            os.ftruncate(fd, 0)
    except BaseException:
        os.close(fd)
        raise
    return fd


@dataclass(frozen=True)
class Entry:
    """One directory entry as `list_dir` reports it."""

    name: str
    kind: str  # "file", "dir", "symlink" or "other"
    size: int


def _kind(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISLNK(mode):
        return "symlink"
    return "other"


class ConfinedFiles:
    """Read, write, list and glob files under `root` without ever leaving it; what it creates is
    given to `owner` (uid, gid) when set: the sandbox's user, when overture runs as root."""

    def __init__(self, root: str, owner: tuple[int, int] | None = None) -> None:
        self.root = root
        self.owner = owner

    # ----------------------------------------------------------------- resolution

    def _resolve(self, path: str, follow_last: bool = True) -> list[str]:
        """The components of `path` after resolving `..` and symlinks inside the root."""
        pending = deque(workspace_relative(path).parts)
        resolved: list[str] = []
        links = 0
        while pending:
            part = pending.popleft()
            if part in ("", "."):
                continue
            if part == "..":
                if not resolved:
                    raise PathEscape(f"{path}: '..' leaves the workspace")
                resolved.pop()
                continue
            if not pending and not follow_last:
                resolved.append(part)
                break
            with self._open_dir(resolved) as dir_fd:
                try:
                    info = os.stat(part, dir_fd=dir_fd, follow_symlinks=False)
                except FileNotFoundError:
                    info = None
                target = os.readlink(part, dir_fd=dir_fd) if info and stat.S_ISLNK(info.st_mode) else None
            if info is None:
                # Nothing below a missing component exists yet, so nothing there can be a link.
                if ".." in pending:
                    raise PathEscape(f"{path}: '..' after the missing {'/'.join([*resolved, part])}")
                resolved.extend([part, *(p for p in pending if p not in ("", "."))])
                break
            if target is None:
                resolved.append(part)
                continue
            links += 1
            if links > MAX_SYMLINKS:
                raise PathEscape(f"{path}: too many levels of symbolic links")
            if target.startswith("/"):
                if not (target == WORKSPACE_MOUNT or target.startswith(WORKSPACE_MOUNT + "/")):
                    link = "/".join([*resolved, part])
                    raise PathEscape(f"{path}: symlink {link} -> {target} points outside the workspace")
                resolved = []
                pending.extendleft(reversed(workspace_relative(target).parts))
            else:
                pending.extendleft(reversed(PurePosixPath(target).parts))
        return resolved

    @contextlib.contextmanager
    def _open_dir(self, parts: list[str], create: bool = False) -> Iterator[int]:
        """A descriptor of the directory `parts` (created when asked), no symlink followed."""
        fd = os.open(self.root, os.O_DIRECTORY | os.O_RDONLY)
        try:
            for part in parts:
                if create:
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(part, 0o755, dir_fd=fd)
                        self._give(part, fd)
                try:
                    nxt = os.open(part, os.O_DIRECTORY | os.O_RDONLY | os.O_NOFOLLOW, dir_fd=fd)
                except OSError as exc:
                    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                        raise NotADirectoryError(f"{'/'.join(parts)}: not a directory") from None
                    raise
                os.close(fd)
                fd = nxt
            yield fd
        finally:
            os.close(fd)

    def _give(self, name: str, dir_fd: int) -> None:
        """Hand a just-created entry to the owner (nothing to do without one)."""
        if self.owner is not None:
            os.chown(name, *self.owner, dir_fd=dir_fd, follow_symlinks=False)

    # ----------------------------------------------------------------- operations

    def read_bytes(self, path: str) -> bytes:
        parts = self._resolve(path)
        if not parts:
            raise IsADirectoryError(f"{path}: is the workspace directory")
        with self._open_dir(parts[:-1]) as dir_fd:
            fd = open_regular(parts[-1], dir_fd, path)
        with os.fdopen(fd, "rb") as handle:
            return handle.read()

    def read_text(self, path: str) -> str:
        return self.read_bytes(path).decode("utf-8", errors="replace")

    def write_bytes(self, path: str, data: bytes) -> None:
        """Write a file, creating parent directories; a symlink at the path is refused."""
        parts = self._resolve(path, follow_last=False)
        if not parts:
            raise IsADirectoryError(f"{path}: is the workspace directory")
        with self._open_dir(parts[:-1], create=True) as dir_fd:
            try:
                existing = os.stat(parts[-1], dir_fd=dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                existing = None
            if existing is not None and stat.S_ISLNK(existing.st_mode):
                raise PathEscape(f"{path}: is a symlink; refusing to write through it")
            if existing is not None and stat.S_ISDIR(existing.st_mode):
                raise IsADirectoryError(f"{path}: is a directory")
            if existing is not None and not stat.S_ISREG(existing.st_mode):
                raise NotRegularFile(f"{path}: {refusal(existing.st_mode)}")
            # What is there now may not be what was checked: `open_regular` checks again.
            try:
                fd = open_regular(parts[-1], dir_fd, path, write=True)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise PathEscape(f"{path}: is a symlink; refusing to write through it") from None
                raise
            if existing is None and self.owner is not None:
                os.fchown(fd, *self.owner)  # the descriptor: the name may point elsewhere by now
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)

    def write_text(self, path: str, text: str) -> None:
        self.write_bytes(path, text.encode("utf-8"))

    def delete(self, path: str) -> None:
        """Remove a file or symlink (not a directory)."""
        parts = self._resolve(path, follow_last=False)
        if not parts:
            raise IsADirectoryError(f"{path}: is the workspace directory")
        with self._open_dir(parts[:-1]) as dir_fd:
            info = os.stat(parts[-1], dir_fd=dir_fd, follow_symlinks=False)
            if stat.S_ISDIR(info.st_mode):
                raise IsADirectoryError(f"{path}: is a directory")
            os.unlink(parts[-1], dir_fd=dir_fd)

    def exists(self, path: str) -> bool:
        try:
            parts = self._resolve(path)
            with self._open_dir(parts[:-1]) as dir_fd:
                if parts:
                    os.stat(parts[-1], dir_fd=dir_fd, follow_symlinks=False)
            return True
        except (FileNotFoundError, NotADirectoryError):
            return False

    def is_dir(self, path: str) -> bool:
        try:
            with self._open_dir(self._resolve(path)):
                return True
        except (FileNotFoundError, NotADirectoryError, PathEscape):
            return False

    def list_dir(self, path: str = ".") -> list[Entry]:
        parts = self._resolve(path)
        with self._open_dir(parts) as dir_fd:
            entries = []
            for name in sorted(os.listdir(dir_fd)):
                try:
                    info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                except FileNotFoundError:
                    continue  # removed by a command since it was listed
                entries.append(Entry(name=name, kind=_kind(info.st_mode), size=info.st_size))
            return entries

    def walk_files(self, path: str = ".") -> Iterator[str]:
        """Relative paths of every regular file under `path` (symlinks not followed), sorted."""
        parts = self._resolve(path)
        with self._open_dir(parts) as dir_fd:
            prefix = "/".join(parts)
            for directory in walk(dir_fd):
                for entry in directory.entries:
                    if is_regular(entry):
                        rel = directory.path_of(entry)
                        yield f"{prefix}/{rel}" if prefix else rel

    def glob(self, pattern: str, path: str = ".") -> list[str]:
        """Files matching a glob (`*`, `?`, `[...]`, `**` for any depth), relative to the root."""
        regex = glob_to_regex(str(workspace_relative(pattern)))
        matches = []
        for file in self.walk_files(path):
            # A pattern without a slash matches a file name at any depth, as ripgrep's globs do.
            if regex.fullmatch(file) or ("/" not in pattern and regex.fullmatch(file.rsplit("/", 1)[-1])):
                matches.append(file)
        return matches


def glob_to_regex(pattern: str) -> re.Pattern[str]:
    """A compiled regex for a path glob: `**/` any directories, `*` within one name."""
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[":
            end = pattern.find("]", i + 1)
            if end == -1:
                out.append(re.escape(pattern[i]))
                i += 1
            else:
                body = pattern[i + 1 : end].replace("\\", "\\\\")
                out.append(f"[{'^' + body[1:] if body.startswith('!') else body}]")
                i = end + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out))
