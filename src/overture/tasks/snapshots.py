"""Repository snapshots (stored once per repository, no history) and task starting workspaces.

`store_snapshot` copies a repository without version-control history, caches and virtual
environments into `<root>/<name>-<content hash>/`; the same content is stored once however
many tasks refer to it. `starting_base` gives the directory a task's sandbox starts from: the
snapshot itself, or — for a task with a `setup_patch` — a copy of it made of hard links to the
snapshot's files, except the patched files, which are real copies with the patch applied. The
sandbox mounts that directory read-only as its overlay's lower layer, so the agent's diff is
measured against the task's starting state, not against the snapshot. `keep_test_bytecode`
adds the bytecode of a snapshot's test modules, as pytest's assertion rewriting makes it, to
the snapshot itself (its content hash and file list leave `__pycache__` out).
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path, PurePosixPath

from overture.sandbox import Sandbox
from overture.sandbox.tree import remove_tree
from overture.tasks.run_failure import output_tail
from overture.tasks.spec import Task, TaskError

SKIPPED_DIRS = frozenset(
    {".git", ".hg", ".svn", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".tox", ".nox",
     ".venv", "venv", ".eggs", "build", "dist", "node_modules"}
)  # fmt: skip
SKIPPED_SUFFIXES = (".pyc", ".pyo", ".egg-info")
BYTECODE_WRITES = "unset PYTHONDONTWRITEBYTECODE; "  # shell: a sandboxed run that may write bytecode
PATCHED_FILE = re.compile(r"^(?:\+\+\+ b|--- a)/(.+?)(?:\t.*)?$", re.MULTILINE)


class SnapshotError(TaskError):
    """A repository that cannot be snapshotted, or a patch that does not apply."""


def _skipped(name: str) -> bool:
    return name in SKIPPED_DIRS or name.endswith(SKIPPED_SUFFIXES)


def repository_files(repo: Path) -> list[str]:
    """Relative paths of the files (and symlinks) a snapshot of `repo` holds, sorted."""
    found = []
    for dirpath, dirnames, filenames in os.walk(repo):  # symlinked directories are not entered
        rel_dir = os.path.relpath(dirpath, repo)
        links = [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]
        dirnames[:] = [d for d in dirnames if not _skipped(d) and d not in links]
        for name in [*filenames, *links]:
            if not _skipped(name):
                found.append(name if rel_dir == "." else f"{rel_dir}/{name}")
    return sorted(found)


def content_hash(repo: Path, files: list[str]) -> str:
    digest = hashlib.sha256()
    for rel in files:
        full = repo / rel
        digest.update(rel.encode() + b"\0")
        digest.update(os.readlink(full).encode() if full.is_symlink() else full.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()


def store_snapshot(repo: str | Path, root: str | Path, name: str | None = None) -> Path:
    """Copy `repo` (no history, no caches) to `root/<name>-<hash12>` unless that exists; the path."""
    repo = Path(repo).resolve()
    if not repo.is_dir():
        raise SnapshotError(f"{repo}: repository directory not found")
    files = repository_files(repo)
    if not files:
        raise SnapshotError(f"{repo}: no files to snapshot")
    label = re.sub(r"[^A-Za-z0-9._-]", "-", name or repo.name)
    target = Path(root).resolve() / f"{label}-{content_hash(repo, files)[:12]}"
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{label}-", dir=target.parent))
    try:
        for rel in files:
            source, copy = repo / rel, staging / rel
            copy.parent.mkdir(parents=True, exist_ok=True)
            if source.is_symlink():
                os.symlink(os.readlink(source), copy)
            else:
                shutil.copy2(source, copy)
        os.rename(staging, target)
    except FileExistsError:
        remove_tree(staging)  # another process stored the same content first
    except OSError as exc:
        remove_tree(staging)
        if not target.is_dir():
            raise SnapshotError(f"{repo}: cannot store a snapshot in {target.parent}: {exc}") from None
    return target


def keep_test_bytecode(sandbox: Sandbox, snapshot: Path) -> int:
    """Copy into `snapshot` the bytecode of its test modules that pytest's assertion rewriting
    left in `sandbox` (a sandbox over `snapshot` whose run wrote bytecode, `BYTECODE_WRITES`);
    how many files. Every later sandbox over the snapshot, or over a task's starting base linked
    from it, then imports its test modules without rewriting them again (about a quarter of a
    small suite's run). pytest checks each against its source's size and modification time, so a test
    file changed since is rewritten as before; library modules get no bytecode here, so a mutated
    module can never be served the clean one's."""
    kept = 0
    for rel in sandbox.changed_paths():
        path = PurePosixPath(rel)
        if path.parent.name != "__pycache__" or path.suffix != ".pyc" or "-pytest-" not in path.name:
            continue
        source = path.parent.parent / f"{path.name.split('.', 1)[0]}.py"
        target = snapshot / rel
        if target.exists() or _through_link(snapshot, path.parent) or not (snapshot / source).is_file():
            continue
        data = sandbox.files.read_bytes(rel)
        target.parent.mkdir(exist_ok=True)
        partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
        partial.write_bytes(data)
        os.replace(partial, target)
        kept += 1
    return kept


def _through_link(root: Path, rel: PurePosixPath) -> bool:
    """Whether `root/rel` is, or passes through, a symlink (a snapshot keeps a repository's links)."""
    return any((root / part).is_symlink() for part in [rel, *rel.parents] if str(part) != ".")


def patched_files(patch: str) -> list[str]:
    """The files a unified diff touches (its `--- a/...` and `+++ b/...` lines)."""
    return sorted(set(PATCHED_FILE.findall(patch)))


def apply_patch(directory: Path, patch: str, what: str) -> None:
    """Apply a `patch -p1` diff to `directory` on the host; a SnapshotError naming `what` if it fails."""
    patch_tool = shutil.which("patch")
    if patch_tool is None:
        raise SnapshotError("the `patch` program is not installed (Debian package `patch`)")
    done = subprocess.run(
        [patch_tool, "-p1", "--forward", "--batch", "--no-backup-if-mismatch", "-s", "-d", str(directory)],
        input=patch.encode(), capture_output=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        output = (done.stdout + done.stderr).decode(errors="replace").strip()
        raise SnapshotError(f"{what} does not apply: {output_tail(output, 500)}")


def default_bases_root() -> Path:
    return Path(tempfile.gettempdir()) / f"overture-task-bases-{os.getuid()}"


def starting_base(task: Task, root: str | Path | None = None) -> Path:
    """The directory `task`'s sandbox starts from (made on first use, then reused)."""
    if not task.base:
        raise SnapshotError(
            f"task {task.instance_id}: no base directory (a SWE-bench instance needs its repository "
            "checked out at base_commit, given as `base`)"
        )
    base = Path(task.base)
    if not base.is_dir():
        raise SnapshotError(f"task {task.instance_id}: base {base} is not a directory")
    if not task.setup_patch:
        return base
    # Named by a hash only: the sandbox's mount table shows this path, so it must say nothing.
    key = hashlib.sha256(f"{base.resolve()}\0{task.setup_patch}".encode()).hexdigest()[:24]
    target = Path(root or default_bases_root()) / key
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".base-", dir=target.parent))
    try:
        _link_tree(base, staging)
        for rel in patched_files(task.setup_patch):
            _unshare(staging, rel, task.instance_id)
        apply_patch(staging, task.setup_patch, f"task {task.instance_id}: setup_patch")
        os.rename(staging, target)
    except OSError as exc:
        remove_tree(staging)
        # Another thread or process made it first: renaming onto it gives EEXIST or ENOTEMPTY.
        if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY) or not target.is_dir():
            raise
    except BaseException:
        remove_tree(staging)
        raise
    return target


def _link_tree(source: Path, target: Path) -> None:
    """`target` mirrors `source` with hard links (copies where linking is not possible)."""

    def link_or_copy(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    shutil.copytree(source, target, symlinks=True, copy_function=link_or_copy, dirs_exist_ok=True)


def _unshare(root: Path, rel: str, instance_id: str) -> None:
    """Replace a hard link with a private copy, so that patching it leaves the snapshot intact.

    The path must stay inside `root` without passing through a symlink: a task file is input,
    and its patch must not reach the host through a link in its base."""
    parts = PurePosixPath(rel).parts
    if PurePosixPath(rel).is_absolute() or ".." in parts:
        raise SnapshotError(f"task {instance_id}: setup_patch names a path outside the workspace: {rel}")
    for depth in range(1, len(parts) + 1):
        if (root.joinpath(*parts[:depth])).is_symlink():
            raise SnapshotError(f"task {instance_id}: setup_patch writes through a symlink: {rel}")
    path = root / rel
    if path.is_file():
        private = path.with_name(f".{path.name}.copy")
        shutil.copy2(path, private)
        os.replace(private, path)
