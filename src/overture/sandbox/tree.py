"""Walking and removing directory trees of any depth: no recursion, no symlink followed.

A command can build a tree deeper than Python's recursion limit, than PATH_MAX and than the host's
descriptor limit (one `mkdir d && cd d` a level). `walk` and `remove_tree` therefore keep their own
stack, reach each directory from its parent's descriptor by one name (never a path string, never
through a symlink: `O_NOFOLLOW | O_DIRECTORY`), and hold descriptors only for the root and the
deepest `MAX_OPEN_LEVELS` directories of the branch they are in. A directory whose descriptor was
let go is reopened name by name from the deepest one still held when it is needed again, and must
be the same directory (device and inode) it was: one that a command moved meanwhile counts as
gone. Entries that vanish while a tree is walked or removed are passed over.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from overture.sandbox.errors import TooManyPaths

MAX_OPEN_LEVELS = 64
DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def open_directory(name: str, parent_fd: int) -> int:
    """A descriptor of the directory `name` in `parent_fd`; `NotADirectoryError` when it is a file
    or a symlink (a symlink is never followed)."""
    try:
        return os.open(name, DIRECTORY_FLAGS, dir_fd=parent_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NotADirectoryError(errno.ENOTDIR, "a symlink, not a directory", name) from None
        raise


def _identity(fd: int) -> tuple[int, int]:
    info = os.fstat(fd)
    return info.st_dev, info.st_ino


class Branch:
    """The directories from a walk's root down to the one it is in: their names, identities, and
    descriptors for the root and the deepest `MAX_OPEN_LEVELS` of them (see the module docstring).
    The branch owns every descriptor it holds, the root's included; `close` lets them go."""

    def __init__(self, root_fd: int) -> None:
        self.names: list[str] = []  # names[i] is the name of level i + 1 in level i
        self.ids = [_identity(root_fd)]
        self.fds: list[int | None] = [root_fd]

    @property
    def parts(self) -> tuple[str, ...]:
        return tuple(self.names)

    def top(self) -> int:
        """A descriptor of the directory the branch is in (reopened if it was let go)."""
        if self.fds[-1] is None:
            self._reopen()
        fd = self.fds[-1]
        assert fd is not None
        return fd

    def enter(self, name: str, opener: Callable[[str, int], int] = open_directory) -> int:
        """Go down into the directory `name` (opened by `opener`); its descriptor.
        `FileNotFoundError` or `NotADirectoryError` when it is gone or no directory (the branch is
        then unchanged)."""
        fd = opener(name, self.top())
        self.names.append(name)
        self.ids.append(_identity(fd))
        self.fds.append(fd)
        self._let_go_above(len(self.fds) - 1)
        return fd

    def leave(self) -> None:
        """Go back up one level."""
        fd = self.fds.pop()
        self.names.pop()
        self.ids.pop()
        if fd is not None:
            os.close(fd)

    def close(self) -> None:
        for fd in self.fds:
            if fd is not None:
                os.close(fd)
        self.fds = [None] * len(self.fds)

    def _let_go_above(self, level: int) -> None:
        """Close the descriptor `MAX_OPEN_LEVELS` levels above `level` (never the root's)."""
        far = level - MAX_OPEN_LEVELS
        fd = self.fds[far] if far >= 1 else None
        if fd is not None:
            os.close(fd)
            self.fds[far] = None

    def _reopen(self) -> None:
        held = max(level for level, fd in enumerate(self.fds) if fd is not None)
        for level in range(held + 1, len(self.fds)):
            parent = self.fds[level - 1]
            assert parent is not None
            fd = open_directory(self.names[level - 1], parent)
            if _identity(fd) != self.ids[level]:
                os.close(fd)
                where = "/".join(self.names[:level])
                raise FileNotFoundError(errno.ENOENT, "moved while the tree was walked", where)
            self.fds[level] = fd
            self._let_go_above(level)


def _open_root(root: int | str | os.PathLike[str]) -> int:
    """A descriptor of its own for `root` (a path, or a directory descriptor the caller keeps)."""
    if isinstance(root, int):
        return os.open(".", DIRECTORY_FLAGS, dir_fd=root)
    return os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)  # the caller's choice: followed


@dataclass
class Directory:
    """One directory of a walk: its path from the walk's root, a descriptor of it, and its entries
    sorted by name. The descriptor (and so each entry's `stat`) is valid only until the walk goes on."""

    parts: tuple[str, ...]
    fd: int
    entries: list[os.DirEntry[str]]

    @property
    def rel(self) -> str:
        """The path from the walk's root ("" for the root itself)."""
        return "/".join(self.parts)

    def path_of(self, entry: os.DirEntry[str]) -> str:
        return f"{self.rel}/{entry.name}" if self.parts else entry.name


def _list(fd: int, budget: list[int] | None, where: str) -> list[os.DirEntry[str]]:
    entries = []
    with os.scandir(fd) as listing:
        for entry in listing:
            entries.append(entry)
            if budget is not None:
                budget[0] -= 1
                if budget[0] < 0:
                    raise TooManyPaths(f"{where or '.'}: the tree holds more entries than the walk may list")
    entries.sort(key=lambda entry: entry.name)
    return entries


LEAVE = None  # a step of the walk's own stack: go back up one level


def walk(
    root: int | str | os.PathLike[str], start: Sequence[str] = (), limit: int | None = None
) -> Iterator[Directory]:
    """Every directory under `root` (a path or a directory descriptor), from the directory `start`
    (names below `root`, each a directory, none a symlink) down: each before the directories in it,
    those in name order. A directory that vanishes meanwhile is passed over; `limit` bounds the
    entries listed in all (`TooManyPaths` past it)."""
    branch = Branch(_open_root(root))
    budget = [limit] if limit is not None else None
    try:
        for name in start:
            branch.enter(name)
        steps: list[str | None] = []
        at_start = True
        while at_start or steps:
            if not at_start:
                step = steps.pop()
                if step is LEAVE:
                    branch.leave()
                    continue
                try:
                    branch.enter(step)
                except (FileNotFoundError, NotADirectoryError):
                    continue
                steps.append(LEAVE)
            at_start = False
            directory = Directory(branch.parts, branch.top(), [])
            directory.entries = _list(directory.fd, budget, directory.rel)
            subdirectories = [entry.name for entry in directory.entries if is_directory(entry)]
            yield directory
            steps.extend(reversed(subdirectories))
    finally:
        branch.close()


def is_directory(entry: os.DirEntry[str]) -> bool:
    """Whether a listed entry is a directory (a symlink is not; False if it vanished)."""
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


def is_regular(entry: os.DirEntry[str]) -> bool:
    """Whether a listed entry is a regular file (a symlink is not; False if it vanished)."""
    try:
        return entry.is_file(follow_symlinks=False)
    except OSError:
        return False


def remove_tree(path: Path | str) -> None:
    """rm -rf `path` at any depth, never through a symlink, also where a command made directories
    unreadable or unwritable (their owner may open them up again; root needs not) and where entries
    vanish meanwhile. What cannot be removed raises `OSError` naming it, once all else is gone."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(info.st_mode):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        return
    try:
        root_fd = _open_for_removal(os.fspath(path), None)
    except FileNotFoundError:
        return
    removal = _Removal(Branch(root_fd))
    try:
        removal.run()
    finally:
        removal.branch.close()
    removal.attempt(os.rmdir, path, None)
    if removal.failures:
        (first_errno, first), count = removal.failures[0], len(removal.failures)
        raise OSError(first_errno, f"{path}: {count} entries could not be removed, the first {first}")


class _Removal:
    """The depth-first removal of one tree, and what could not be removed (path and why)."""

    def __init__(self, branch: Branch) -> None:
        self.branch = branch
        self.failures: list[tuple[int | None, str]] = []

    def run(self) -> None:
        steps: list[str | None] = [*reversed(self.empty_of_files(self.branch.top()))]
        while steps:
            step = steps.pop()
            if step is LEAVE:
                name = self.branch.names[-1]
                self.branch.leave()
                self.attempt(os.rmdir, name, self.branch.top())
                continue
            try:
                fd = self.branch.enter(step, _open_for_removal)
            except (FileNotFoundError, NotADirectoryError):  # gone, or a file or link now
                self.attempt(os.unlink, step, self.branch.top())
                continue
            except OSError as exc:
                self.failed(step, exc)
                continue
            steps.append(LEAVE)
            steps.extend(reversed(self.empty_of_files(fd)))

    def empty_of_files(self, fd: int) -> list[str]:
        """Unlink every entry of the directory `fd` that is no directory; the directories' names, sorted."""
        directories = []
        with os.scandir(fd) as listing:
            for entry in listing:
                if is_directory(entry):
                    directories.append(entry.name)
                    continue
                try:
                    os.unlink(entry.name, dir_fd=fd)
                except FileNotFoundError:
                    pass
                except IsADirectoryError:  # replaced by a directory meanwhile
                    directories.append(entry.name)
                except OSError as exc:
                    self.failed(entry.name, exc)
        return sorted(directories)

    def attempt(self, remove: Callable[..., None], name: str | Path, dir_fd: int | None) -> None:
        """`remove(name)` in `dir_fd`; a vanished entry is no failure, any other error is recorded."""
        try:
            remove(name, dir_fd=dir_fd)
        except FileNotFoundError:
            pass
        except OSError as exc:
            self.failed(os.fspath(name), exc)

    def failed(self, name: str, exc: OSError) -> None:
        where = "/".join([*self.branch.names, name]) if not os.path.isabs(name) else name
        self.failures.append((exc.errno, f"{where}: {exc.strerror or exc}"))


def _open_for_removal(name: str, parent_fd: int | None) -> int:
    """A descriptor of the directory `name` that lets its entries be unlinked: one a command made
    unreadable or unwritable is given back rwx for its owner first. The mode change goes through an
    `O_PATH` descriptor of that very directory, so a symlink swapped in cannot redirect it."""
    dir_fd = {} if parent_fd is None else {"dir_fd": parent_fd}
    try:
        fd = os.open(name, DIRECTORY_FLAGS, **dir_fd)
    except PermissionError:
        handle = os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, **dir_fd)
        try:
            os.chmod(f"/proc/self/fd/{handle}", 0o700)
            fd = os.open(".", DIRECTORY_FLAGS, dir_fd=handle)
        finally:
            os.close(handle)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NotADirectoryError(errno.ENOTDIR, "a symlink, not a directory", name) from None
        raise
    if os.fstat(fd).st_mode & 0o700 != 0o700:
        with contextlib.suppress(OSError):
            os.fchmod(fd, 0o700)
    return fd
