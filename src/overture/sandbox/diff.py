"""Unified diffs of a workspace against its base, in the format `patch -p1` and `git apply` read.

File contents are read without following any symlink, at any depth of the path, so a link the
command created cannot pull a host file into the diff; a changed symlink is reported on a line of
its own.
"""

from __future__ import annotations

import difflib
import os
import stat
from pathlib import Path, PurePosixPath

from overture.sandbox.files import looks_binary

NO_NEWLINE = "\\ No newline at end of file\n"


def read_entry(root: Path, rel: str) -> tuple[str, bytes | str | None]:
    """("file", bytes) | ("symlink", target) | ("missing", None) | ("other", None) for `rel`
    under `root`, opening every component from its parent's descriptor without following any
    symlink: below a symlinked directory there is nothing (the link itself is its own entry)."""
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
        file = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd)
        with os.fdopen(file, "rb") as handle:
            return "file", handle.read()
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


def render_diff(base: Path, current: Path, paths: list[str]) -> str:
    """The diff of `paths` (relative) between the trees `base` and `current`."""
    parts = []
    for rel in sorted(set(paths)):
        old_kind, old = read_entry(base, rel)
        new_kind, new = read_entry(current, rel)
        if "symlink" in (old_kind, new_kind):
            if (old_kind, old) != (new_kind, new):
                shown = f"symlink -> {new}" if new_kind == "symlink" else new_kind
                parts.append(f"Symlink {rel} changed: now {shown}\n")
            continue
        parts.append(file_diff(rel, old if old_kind == "file" else None, new if new_kind == "file" else None))
    return "".join(parts)


def files_under(root: Path, rel: str) -> list[str]:
    """`rel` itself if it is a file or link under `root`, or every file and link below it."""
    top = root / rel
    if top.is_symlink() or top.is_file():
        return [rel]
    found = []
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames.sort()
        for name in [*filenames, *(d for d in dirnames if os.path.islink(os.path.join(dirpath, d)))]:
            found.append(os.path.relpath(os.path.join(dirpath, name), root))
    return found


def changed_between(base: Path, current: Path) -> list[str]:
    """Every file path that differs between two trees (a plain comparison, for copied workspaces)."""
    paths = set(files_under(base, ".")) | set(files_under(current, "."))
    return sorted(p for p in paths if read_entry(base, p) != read_entry(current, p))
