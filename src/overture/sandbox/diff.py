"""Unified diffs of a workspace against its base, in the format `patch -p1` and `git apply` read.

File contents are read without following any symlink, at any depth of the path, and without
waiting on a FIFO or device swapped in for a file (`open_regular`), so a link or a special file
the command created can neither pull a host file into the diff nor hang it; a changed symlink is
reported on a line of its own.

A diff is bounded whatever the workspace holds: at most `DIFF_FILE_BYTES` are read of a file (one
byte more tells a file over the cap from one that fits; the file is left out with a line saying
so), at most `DIFF_TOTAL_BYTES` in all and `DIFF_MAX_PATHS` paths (rendering stops there, with a
line saying how many paths were left out). A path whose name a diff header cannot carry (not
UTF-8, or holding control characters) is left out with a line naming it escaped
(`overture.sandbox.printable`). Every such line starts with `[` and sits between files' diffs,
where `patch` and `git apply` pass over it, so the other files of the diff still apply.
"""

from __future__ import annotations

import difflib
import itertools
import os
import stat
from pathlib import Path, PurePosixPath

from overture.sandbox.errors import NotRegularFile
from overture.sandbox.files import looks_binary, open_regular
from overture.sandbox.printable import escape_name, writable_in_diff
from overture.sandbox.tree import is_directory, walk

NO_NEWLINE = "\\ No newline at end of file\n"
DIFF_FILE_BYTES = 1 << 20
DIFF_TOTAL_BYTES = 16 << 20
DIFF_MAX_PATHS = 10_000
MAX_CHANGED_PATHS = 100_000  # entries of a writable layer a walk lists before it gives up


def read_entry(root: Path, rel: str, max_bytes: int | None = None) -> tuple[str, bytes | str | None]:
    """("file", bytes) | ("symlink", target) | ("missing", None) | ("other", None) for `rel`
    under `root`, opening every component from its parent's descriptor without following any
    symlink: below a symlinked directory there is nothing (the link itself is its own entry).
    With `max_bytes`, at most `max_bytes + 1` bytes of a file are read: more than `max_bytes`
    says the file is bigger than that."""
    parts = PurePosixPath(rel).parts
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return "missing", None
    try:
        for part in parts[:-1]:
            try:
                child = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except OSError:  # missing, not a directory, or a symlink (ELOOP)
                return "missing", None
            os.close(fd)
            fd = child
        try:
            info = os.stat(parts[-1], dir_fd=fd, follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):
            return "missing", None
        if stat.S_ISLNK(info.st_mode):
            return "symlink", os.readlink(parts[-1], dir_fd=fd)
        if not stat.S_ISREG(info.st_mode):
            return "other", None
        try:
            file = open_regular(parts[-1], fd, rel)
        except FileNotFoundError:
            return "missing", None
        except (NotRegularFile, IsADirectoryError, NotADirectoryError):  # swapped since the stat
            return "other", None
        with os.fdopen(file, "rb") as handle:
            return "file", handle.read() if max_bytes is None else handle.read(max_bytes + 1)
    finally:
        os.close(fd)


def file_diff(rel: str, old: bytes | None, new: bytes | None) -> str:
    """The unified diff of one file (None = absent); empty when unchanged."""
    if old == new:
        return ""
    before = "/dev/null" if old is None else f"a/{rel}"
    after = "/dev/null" if new is None else f"b/{rel}"
    if looks_binary(old or b"") or looks_binary(new or b""):
        return f"Binary files {before} and {after} differ\n"
    old_lines = (old or b"").decode("utf-8", errors="replace").splitlines(keepends=True)
    new_lines = (new or b"").decode("utf-8", errors="replace").splitlines(keepends=True)
    out = []
    for line in difflib.unified_diff(old_lines, new_lines, before, after, lineterm="\n"):
        out.append(line if line.endswith("\n") else line + "\n" + NO_NEWLINE)
    return "".join(out)


def render_diff(
    base: Path,
    current: Path,
    paths: list[str],
    file_bytes: int = DIFF_FILE_BYTES,
    total_bytes: int = DIFF_TOTAL_BYTES,
    max_paths: int = DIFF_MAX_PATHS,
) -> str:
    """The diff of `paths` (relative) between the trees `base` and `current`, within the bounds
    the module docstring gives."""
    parts = []
    ordered = sorted(set(paths))
    read = 0
    for done, rel in enumerate(ordered):
        if done == max_paths:
            parts.append(_cut(f"{max_paths} paths", len(ordered) - done))
            break
        if not writable_in_diff(rel):
            why = "a diff header cannot name it (not UTF-8, or control characters)"
            parts.append(f"[left out: {escape_name(rel)}: {why}]\n")
            continue
        budget = min(file_bytes, total_bytes - read)
        old_kind, old = read_entry(base, rel, budget)
        new_kind, new = read_entry(current, rel, budget)
        read += sum(len(data) for data in (old, new) if isinstance(data, bytes))
        if "symlink" in (old_kind, new_kind):
            if (old_kind, old) != (new_kind, new):
                shown = f"symlink -> {escape_name(str(new))}" if new_kind == "symlink" else new_kind
                parts.append(f"Symlink {rel} changed: now {shown}\n")
            continue
        if any(isinstance(data, bytes) and len(data) > budget for data in (old, new)):
            if budget < file_bytes:  # the bytes left in all ran out on this file
                parts.append(_cut(f"{total_bytes} bytes read", len(ordered) - done))
                break
            parts.append(f"[left out: {rel}: bigger than the {file_bytes} bytes a diff reads of a file]\n")
            continue
        parts.append(file_diff(rel, old if old_kind == "file" else None, new if new_kind == "file" else None))
    return "".join(parts)


def _cut(bound: str, left: int) -> str:
    return f"[diff cut at its bound of {bound}: {left} more changed paths not shown]\n"


def files_under(root: Path, rel: str, limit: int | None = None) -> list[str]:
    """`rel` itself if it is a file, link or other non-directory under `root` (no symlink followed on
    the way), or every such entry below it if it is a directory, at any depth; nothing if missing.
    `limit` bounds the entries listed (`TooManyPaths` past it)."""
    start = PurePosixPath(rel).parts
    directories = walk(root, start, limit)
    try:
        top = next(directories)
    except (FileNotFoundError, NotADirectoryError):
        kind, _ = read_entry(root, rel, max_bytes=0) if start else ("missing", None)
        return [rel] if kind in ("file", "symlink", "other") else []
    found = []
    for directory in itertools.chain([top], directories):
        found += [directory.path_of(entry) for entry in directory.entries if not is_directory(entry)]
    return found


def changed_between(base: Path, current: Path) -> list[str]:
    """Every file path that differs between two trees (a plain comparison, for copied workspaces)."""
    paths = set(files_under(base, ".")) | set(files_under(current, "."))
    return sorted(p for p in paths if read_entry(base, p) != read_entry(current, p))
