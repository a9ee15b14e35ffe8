"""Copy-on-write workspaces: one read-only base shared by every sandbox, a writable layer each.

`OverlayWorkspace` mounts, in a mount namespace of its own held by a small holder process
(`unshare … sh -c 'mount … && read'`; it exits when its stdin closes, so it dies with its
owner), a tmpfs capped at `sandbox.workspace_bytes` and on it an overlay filesystem (lower = the
base, upper = this sandbox's changes on that tmpfs). Writing past the cap fails inside with
ENOSPC, and the tmpfs goes with the namespace when the holder exits, so a killed owner leaves
no writable layer behind. Run as a normal user, the holder's namespace is a user namespace of
its own as well; run as root, it is a plain mount namespace, and the lower layer is a copy of the
base owned by the sandbox's user (`overture.sandbox.base_copies`). The paths commands see
read-only (the Python that runs overture, `extra_ro_paths`) are bound into the tmpfs too, where
the sandbox's user can reach them whatever the permissions of the directories above them.
Commands enter the namespace with `nsenter`, and the host reads and writes the merged view
through `/proc/HOLDER/root`. A thousand sandboxes of one repository cost one copy of it plus
their changes. `CopyWorkspace` (isolation = "none", for debugging only) copies the base.
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
BYTES_PER_INODE = 4096  # the layer's inode cap: a million empty files must not cost unbounded memory
# $1 the state directory, $2 the tmpfs options, $3 the owner of the merged root, $4 the lower layer,
# then the read-only paths to bind. The shell stays on as the holder, blocked in `read` until its
# stdin closes; its $0 names the base it serves, so that `ps` shows what each holder is for.
HOLDER_SCRIPT = (
    "state=$1 options=$2 owner=$3 lower=$4; shift 4; "
    'mount -t tmpfs -o "$options" overture-workspace "$state" && '
    'mkdir "$state/upper" "$state/work" "$state/merged" "$state/ro" && chown "$owner" "$state/upper" && '
    'mount -t overlay overlay -o "userxattr,lowerdir=$lower,upperdir=$state/upper,workdir=$state/work" '
    '"$state/merged" || exit 1; '
    'i=0; for path; do mkdir "$state/ro/$i" && mount --bind "$path" "$state/ro/$i" || exit 1; '
    "i=$((i + 1)); done; "
    "echo ready && read -r _"
)


def check_base(base: Path) -> Path:
    """`base` resolved; it must be a directory whose path the overlay mount options can carry."""
    resolved = base.resolve()
    if not resolved.is_dir():
        raise SandboxError(f"{base}: workspace base is not a directory")
    return check_mount_option(resolved, "workspace base")


def check_mount_option(path: Path, what: str) -> Path:
    """`path`, which must be one the overlay mount options can carry."""
    bad = [c for c in OVERLAY_OPTION_CHARS if c in str(path)]
    if bad:
        raise SandboxError(f"{path}: a {what} path may not contain {' '.join(bad)}")
    return path


class OverlayWorkspace:
    """A writable overlay of `base`, mounted on a capped tmpfs in a namespace held by one process.

    `lower` is what the overlay mounts as its lower layer (`base` itself, or a copy of it that the
    sandbox's user owns); `ids` the host uid and gid of that user when overture runs as root (None
    otherwise); `read_only` the host paths to bind for commands (see `read_only_binds`)."""

    def __init__(
        self,
        base: Path,
        state: Path,
        unshare: str,
        nsenter: str,
        size_bytes: int,
        ids: tuple[int, int] | None = None,
        lower: Path | None = None,
        read_only: list[str] | None = None,
    ) -> None:
        self.base = check_base(base)
        self.lower = check_base(lower) if lower is not None else self.base
        self.state = check_mount_option(state, "sandbox state")
        self.mountpoint = state / "merged"
        self.size_bytes = size_bytes
        self.ids = ids
        self.read_only = [path for path in read_only or [] if os.path.exists(path)]
        self._unshare, self._nsenter = unshare, nsenter
        self._holder: asyncio.subprocess.Process | None = None

    def _namespace_argv(self) -> list[str]:
        """`unshare` options of the holder: root needs no user namespace to mount, a user does."""
        own_user = [] if self.ids is not None else ["--user", "--map-root-user"]
        return [self._unshare, *own_user, "--mount", "--propagation", "private"]

    async def start(self) -> None:
        self.state.mkdir(parents=True, exist_ok=True)
        inodes = max(1024, self.size_bytes // BYTES_PER_INODE)
        tmpfs = f"size={self.size_bytes},nr_inodes={inodes},mode=0755"
        owner = "{}:{}".format(*self.ids) if self.ids is not None else "0:0"
        self._holder = await asyncio.create_subprocess_exec(
            *self._namespace_argv(), "/bin/sh", "-c", HOLDER_SCRIPT, f"overture-holder {self.base}",
            str(self.state), tmpfs, owner, str(self.lower), *self.read_only,
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
    def upper(self) -> Path:
        """The writable layer as the host sees it."""
        return self.root.parent / "upper"

    @property
    def holder_pid(self) -> int | None:
        return self._holder.pid if self.alive else None

    def command_prefix(self) -> list[str]:
        """Run what follows inside the workspace's mount namespace (and its user namespace, when
        it has one), with the credentials of the caller."""
        if not self.alive:
            raise SandboxDead(f"workspace of {self.base}: its namespace holder has exited")
        own_user = [] if self.ids is not None else ["--user", "--preserve-credentials"]
        return [self._nsenter, f"--target={self._holder.pid}", "--mount", *own_user]

    @property
    def mount_path(self) -> str:
        """Where the merged view is, inside the workspace's namespace."""
        return str(self.mountpoint)

    def read_only_binds(self) -> dict[str, str]:
        """Each read-only path → where the workspace's namespace has it bound."""
        return {path: str(self.state / "ro" / str(i)) for i, path in enumerate(self.read_only)}

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
        """Back to the base: a new holder mounts afresh (the old layer went with its namespace)."""
        await self.stop()
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

    def __init__(self, base: Path, state: Path, read_only: list[str] | None = None) -> None:
        self.base = check_base(base)
        self.state = state
        self.mountpoint = state / "copy"
        self.read_only = [path for path in read_only or [] if os.path.exists(path)]
        self.alive = True

    def read_only_binds(self) -> dict[str, str]:
        return {path: path for path in self.read_only}

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
