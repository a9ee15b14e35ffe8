"""The sandbox pool: a bound on live sandboxes, FIFO admission for bursts, pre-warmed spares.

`async with pool.sandbox(base) as sb:` waits its turn (first come, first served) while
`max_live` sandboxes are alive, starts one (or takes a pre-warmed spare of the same base and
Python whose namespace is still alive; a dead one is discarded and replaced), and closes it on
exit, killing whatever is left. Commands run overture's own Python (`sandbox.python_env`) unless
the request names another (`python=`, e.g. the environment built for a task's repository).
Closing the pool closes every sandbox and fails the waiters. Counters: started, failed,
released, replaced, queue wait and start latency percentiles.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

from overture.config import SandboxConfig
from overture.sandbox.base_copies import OwnedBaseCopies
from overture.sandbox.errors import PoolClosed, PoolFull, SandboxError
from overture.sandbox.isolation import etc_files, host_ids, require_tools
from overture.sandbox.limits import CgroupLimits, Limits, orphaned, remove_cgroups
from overture.sandbox.python_env import PythonEnvironment
from overture.sandbox.sandbox import Sandbox
from overture.sandbox.tree import remove_tree
from overture.sandbox.workspace import CopyWorkspace, OverlayWorkspace, check_base

log = logging.getLogger(__name__)


SandboxKind = tuple[Path, PythonEnvironment | None]  # what spares of one kind share: base and Python
STATE_PREFIX = "overture-sandboxes-"  # + the owner's pid + "-" + a random suffix


def default_state_root() -> str:
    """Where writable layers live unless configured: memory-backed /dev/shm when usable (creating
    and removing the layers' directories there measured about twice as fast as on an ext4 /tmp,
    which is most of a sandbox's start-up), else the system's temporary directory."""
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else tempfile.gettempdir()


def remove_orphaned_state(root: Path) -> None:
    """Remove state directories that pools of processes no longer alive left behind (killed owners).
    One that cannot be removed is logged and left: it must not stop a new pool from starting."""
    for stale in root.glob(f"{STATE_PREFIX}*"):
        if orphaned(stale.name, STATE_PREFIX):
            log.info("removing %s, left by a pool whose process is gone", stale)
            try:
                remove_tree(stale)
            except OSError as exc:
                log.warning("could not remove %s (left by a pool whose process is gone): %s", stale, exc)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))]


class SandboxPool:
    """Creates, bounds and cleans up sandboxes for any number of base directories."""

    def __init__(self, config: SandboxConfig | None = None) -> None:
        self.config = config or SandboxConfig()
        if self.config.isolation == "none":
            log.warning("SANDBOX ISOLATION IS OFF (isolation = 'none'): commands run unconfined on the host")
        self._tools = require_tools(self.config.isolation)
        isolated = self.config.isolation != "none"
        self._ids = host_ids(self.config.host_uid, self.config.host_gid) if isolated else None
        state_root = Path(self.config.state_dir or default_state_root())
        remove_orphaned_state(state_root)
        self._state = Path(tempfile.mkdtemp(prefix=f"{STATE_PREFIX}{os.getpid()}-", dir=state_root))
        if self._ids is not None:
            self._state.chmod(0o711)  # the sandbox's user passes through to its etc files and workspace
        self._etc = etc_files(self._state)
        owned = self._ids is not None  # as root: lower layers the sandbox's user owns
        self._base_copies = OwnedBaseCopies(self._state / "bases", self._ids) if owned else None
        self._python = PythonEnvironment.running() if self.config.python_env else None
        self._cgroups = CgroupLimits() if self.config.isolation != "none" else None
        self._limits = Limits.from_config(self.config, shared_user=self._ids is not None)
        self._live: set[Sandbox] = set()
        self._spares: dict[SandboxKind, list[Sandbox]] = collections.defaultdict(list)
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._slots = self.config.max_live
        self._closed = False
        self._warming: set[asyncio.Task] = set()
        self._closing: set[asyncio.Future] = set()  # closes that go on after their caller was cancelled
        self.counters = {"started": 0, "failed": 0, "released": 0, "replaced": 0}
        self.queue_waits: list[float] = []
        self.start_latencies: list[float] = []

    # ----------------------------------------------------------------- admission (FIFO)

    async def _acquire_slot(self) -> None:
        if self._closed:
            raise PoolClosed("the sandbox pool is closed")
        if self._slots > 0 and not self._waiters:
            self._slots -= 1
            return
        if len(self._waiters) >= self.config.max_queue:
            raise PoolFull(f"{len(self._waiters)} requests already wait for a sandbox (sandbox.max_queue)")
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter  # the releaser hands its slot over directly
        except BaseException:
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                self._release_slot()  # got the slot but will not use it
            elif waiter in self._waiters:
                self._waiters.remove(waiter)
            raise

    def _release_slot(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self._slots += 1

    # ----------------------------------------------------------------- sandboxes

    async def _start(self, kind: SandboxKind) -> Sandbox:
        base, python = kind
        name = uuid.uuid4().hex[:12]
        state = self._state / name
        read_only = [*(python.paths if python else []), *self.config.extra_ro_paths]
        if self.config.isolation == "none":
            workspace: OverlayWorkspace | CopyWorkspace = CopyWorkspace(base, state, read_only)
        else:
            lower = await self._base_copies.lower_for(base) if self._base_copies else base
            workspace = OverlayWorkspace(
                base, state, self._tools["unshare"], self._tools["nsenter"], self.config.workspace_bytes,
                ids=self._ids, lower=lower, read_only=read_only,
            )  # fmt: skip
        cgroups = self._cgroups.create(name, self._limits) if self._cgroups else []
        try:
            await workspace.start()
        except BaseException:
            self.counters["failed"] += 1
            await workspace.destroy()
            await asyncio.to_thread(remove_cgroups, cgroups)
            raise
        self.counters["started"] += 1
        return Sandbox(workspace, self.config, self._tools, self._etc, cgroups, self._ids, python)

    async def _take(self, kind: SandboxKind) -> Sandbox:
        spares = self._spares.get(kind, [])
        while spares:
            spare = spares.pop()
            if spare.alive:
                return spare
            self.counters["replaced"] += 1
            await spare.close()
        return await self._start(kind)

    def _warm(self, kind: SandboxKind) -> None:
        warming = sum(1 for task in self._warming if task.get_name() == str(kind))
        missing = self.config.prewarm - len(self._spares[kind]) - warming
        for _ in range(max(0, missing)):
            task = asyncio.create_task(self._add_spare(kind), name=str(kind))
            self._warming.add(task)
            task.add_done_callback(self._warming.discard)

    async def _add_spare(self, kind: SandboxKind) -> None:
        try:
            spare = await self._start(kind)
        except SandboxError as exc:
            log.warning("pre-warming a sandbox of %s failed: %s", kind[0], exc)
            return
        if self._closed:
            await spare.close()
        else:
            self._spares[kind].append(spare)

    @contextlib.asynccontextmanager
    async def sandbox(
        self, base_dir: str | Path, python: PythonEnvironment | None = None
    ) -> AsyncIterator[Sandbox]:
        """A sandbox over `base_dir` for the duration of the block; closed (and cleaned) after.
        Its commands run `python` when given, else the pool's (overture's own, or none)."""
        kind = (check_base(Path(base_dir)), python or self._python)
        queued = time.monotonic()
        await self._acquire_slot()
        self.queue_waits.append(time.monotonic() - queued)
        try:
            started = time.monotonic()
            box = await self._take(kind)
            self.start_latencies.append(time.monotonic() - started)
        except BaseException:
            self._release_slot()
            raise
        self._live.add(box)
        if self.config.prewarm:
            self._warm(kind)
        try:
            yield box
        finally:
            self._live.discard(box)
            closing = asyncio.ensure_future(box.close())
            self._closing.add(closing)
            closing.add_done_callback(self._closing.discard)
            try:
                await asyncio.shield(closing)
            finally:
                self.counters["released"] += 1
                self._release_slot()  # even when cancelled or failing while closing

    # ----------------------------------------------------------------- lifecycle

    @property
    def live(self) -> int:
        return len(self._live)

    def stats(self) -> dict:
        return {
            **self.counters,
            "live": self.live,
            "waiting": len(self._waiters),
            "queue_wait_p50_s": percentile(self.queue_waits, 50),
            "queue_wait_p99_s": percentile(self.queue_waits, 99),
            "start_latency_p50_s": percentile(self.start_latencies, 50),
            "start_latency_p99_s": percentile(self.start_latencies, 99),
        }

    async def close(self) -> None:
        """Close every sandbox (live and spare), fail the waiters, remove the state directory."""
        self._closed = True
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_exception(PoolClosed("the sandbox pool was closed while waiting"))
        self._waiters.clear()
        for task in list(self._warming):
            task.cancel()
        await asyncio.gather(*self._warming, return_exceptions=True)
        boxes = [*self._live, *(s for spares in self._spares.values() for s in spares)]
        self._spares.clear()
        await asyncio.gather(*(box.close() for box in boxes), *self._closing, return_exceptions=True)
        await asyncio.to_thread(remove_tree, self._state)

    async def __aenter__(self) -> SandboxPool:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()
