"""The rollout engine as a Ray actor: generation, aborts and weight updates across processes.

- `WeightsKeeper` holds the newest weights (an object-store reference, never a copy) and their
  version. Every weight update goes through it, so that
- `EngineActor`, which Ray restarts when its process dies, comes back serving the newest weights
  and version instead of the checkpoint it was first built from. What generates inside it is an
  `ActorEngine` that an opener (a picklable callable, run again on every restart) builds:
  overture's `Engine` by default (`open_overture_engine`), or whatever the caller passes, e.g.
  vLLM servers started inside the actor (`overture.orchestration.ray_actors`).
- `RemoteEngine` is the orchestrator's `EngineHandle` for the actor: `update_weights` takes the
  trainer's exported weights as a Ray object reference, so they travel trainer → object store →
  engine without passing through the orchestrator's process.
- `RemoteEnginePolicy` is the agent's `Policy` for the actor, used by episodes in any process. A
  request cut off by the death of the engine's process is submitted again once Ray has restarted
  it (for up to `restart_wait_s`, a restart being a new process that imports torch and loads
  the weights: seconds, more on a loaded machine): the episode continues from the turn it was
  in, its earlier turns and their versions untouched; the tokens of the lost turn died with the
  process.

Aborts may reach the actor before the request they name (Ray does not order an async actor's
calls): the actor remembers such keys (the newest `EARLY_ABORTS_KEPT`, as an abort that comes
after its request has finished is remembered too), and a request that arrives already aborted
returns an empty partial completion at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import os
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Generator, Mapping
from pathlib import Path
from typing import Any, Protocol

from overture.agent import Generation
from overture.config import EngineConfig, RuntimeConfig
from overture.distributed.ray.cluster import ACTOR_OPTIONS, import_ray
from overture.engine import Engine
from overture.runtime.devices import resolve_device

# Seconds between tries while a dead engine actor is being restarted.
RETRY_DELAY_S = 0.5
RESTART_WAIT_S = 120.0  # how long a call waits for the engine actor to come back
EARLY_ABORTS_KEPT = 4096


class WeightsKeeper:
    """The newest weights reference and version (a Ray actor; see the module docstring)."""

    def __init__(self) -> None:
        self._weights: list[Any] = []  # [ObjectRef]: a list, so that Ray passes the reference on
        self._version = 0

    def put(self, weights: list[Any], version: int) -> None:
        self._weights, self._version = list(weights), version

    def get(self) -> tuple[list[Any], int]:
        return self._weights, self._version


class ActorEngine(Protocol):
    """What generates inside an `EngineActor`."""

    @property
    def version(self) -> int: ...

    @property
    def max_model_len(self) -> int: ...

    def submit(
        self, prompt_ids: list[int], max_new_tokens: int, sampling: dict[str, Any], group: str | None
    ) -> Any:
        """A request (of rollout group `group`, if any: an engine over several replicas keeps a
        group on one): its `abort()` ends it early, awaiting it gives a completion with
        `token_ids`, `logprobs`, `versions` and `finish_reason`."""
        ...

    async def update_weights(self, weights: Mapping[str, Any], version: int) -> None: ...

    def stats(self) -> dict[str, int]: ...

    def close(self) -> None: ...


class ActorEngineAdapter:
    """What every `ActorEngine` over an engine object takes from it as it is: `version` and
    `max_model_len`."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine

    @property
    def version(self) -> int:
        return self.engine.version

    @property
    def max_model_len(self) -> int:
        return self.engine.max_model_len


class OvertureActorEngine(ActorEngineAdapter):
    """overture's `Engine` as an `ActorEngine`."""

    def submit(
        self, prompt_ids: list[int], max_new_tokens: int, sampling: dict[str, Any], group: str | None
    ) -> Any:
        budget = self.engine.fitting_budget(len(prompt_ids), max_new_tokens)
        return self.engine.submit(prompt_ids, max_new_tokens=budget, **sampling)

    async def update_weights(self, weights: Mapping[str, Any], version: int) -> None:
        await asyncio.to_thread(self.engine.update_weights, weights, version)

    def stats(self) -> dict[str, int]:
        return self.engine.stats()

    def close(self) -> None:
        self.engine.close()


def open_overture_engine(
    model_dir: str, config: EngineConfig, runtime: RuntimeConfig, dtype: str, version: int
) -> OvertureActorEngine:
    """overture's engine on the checkpoint at `model_dir` (and its tokenizer), as `version`."""
    import torch

    device = str(resolve_device(runtime))
    engine = Engine.from_pretrained(
        model_dir, dtype=getattr(torch, dtype), device=device, config=config, version=version
    )
    return OvertureActorEngine(engine)


class EngineActor:
    """An `ActorEngine` in its own process, serving the keeper's newest weights.

    `opener(version)` builds the engine (again on every restart); the keeper's weights are fetched
    before the first request is served, so that a restarted actor never serves stale ones.
    """

    def __init__(self, opener: Callable[[int], ActorEngine], keeper_name: str, version: int) -> None:
        self.engine = opener(version)
        # By name, not by handle: Ray could not restart an actor built with a handle argument.
        self.keeper = import_ray().get_actor(keeper_name)
        self.incarnation = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self._requests: dict[str, Any] = {}
        self._aborted_early: OrderedDict[str, None] = OrderedDict()
        self._weights_fetched = False
        self._fetching = asyncio.Lock()

    async def _serve_kept_weights(self) -> None:
        """Once per process: swap in the keeper's newest weights and version."""
        if self._weights_fetched:  # every request passes here: no lock once they are in
            return
        async with self._fetching:
            if self._weights_fetched:
                return
            weights, version = await self.keeper.get.remote()
            if weights:
                await self.engine.update_weights(await weights[0], version)
            self._weights_fetched = True

    async def describe(self) -> dict[str, Any]:
        """Version, context length and which process (a restart changes `incarnation`)."""
        await self._serve_kept_weights()
        return {
            "version": self.engine.version,
            "max_model_len": self.engine.max_model_len,
            "incarnation": self.incarnation,
        }

    async def generate(
        self,
        key: str,
        prompt_ids: list[int],
        max_new_tokens: int,
        sampling: dict[str, Any],
        group: str | None = None,
    ) -> dict[str, Any]:
        """One request to its end (or its abort): the completion's aligned lists and finish reason."""
        await self._serve_kept_weights()
        if key in self._aborted_early:
            del self._aborted_early[key]
            return {"token_ids": [], "logprobs": [], "versions": [], "finish_reason": "abort"}
        handle = self.engine.submit(prompt_ids, max_new_tokens, sampling, group)
        self._requests[key] = handle
        try:
            completion = await handle
        finally:
            self._requests.pop(key, None)
        return {
            "token_ids": list(completion.token_ids),
            "logprobs": list(completion.logprobs),
            "versions": list(completion.versions),
            "finish_reason": completion.finish_reason,
        }

    async def abort(self, key: str) -> None:
        handle = self._requests.get(key)
        if handle is None:
            self._aborted_early[key] = None
            if len(self._aborted_early) > EARLY_ABORTS_KEPT:
                self._aborted_early.popitem(last=False)
            return
        await asyncio.to_thread(handle.abort)  # returns within one decode step

    async def update_weights(self, weights: Mapping[str, Any], version: int) -> int:
        await self._serve_kept_weights()  # a newer update must not be overwritten by older kept weights
        await self.engine.update_weights(weights, version)
        return self.engine.version

    def stats(self) -> dict[str, int]:
        return self.engine.stats()

    def close(self) -> None:
        self.engine.close()


def start_engine_actor(
    model_dir: str | Path,
    config: EngineConfig,
    runtime: RuntimeConfig,
    dtype: str = "float32",
    weights: Any = None,
    version: int = 0,
    opener: Callable[[int], ActorEngine] | None = None,
) -> RemoteEngine:
    """An engine actor (restarted by Ray whenever its process dies) serving `model_dir`'s model
    and tokenizer with `weights` (an object reference or a state dict; unset = the checkpoint's)
    as `version`: on overture's engine, or on what `opener(version)` builds (then it alone says
    what serves, and `model_dir`, `config`, `runtime` and `dtype` are not used)."""
    ray = import_ray()
    opener = opener or functools.partial(open_overture_engine, str(model_dir), config, runtime, dtype)
    keeper_name = f"overture-weights-{uuid.uuid4().hex}"
    keeper = ray.remote(WeightsKeeper).options(**ACTOR_OPTIONS, name=keeper_name).remote()
    ray.get(keeper.put.remote([] if weights is None else [object_ref(weights)], version))
    actor = (
        ray.remote(EngineActor)
        .options(**ACTOR_OPTIONS, max_restarts=-1, max_task_retries=0)
        .remote(opener, keeper_name, version)
    )
    return RemoteEngine(actor, keeper, ray.get(actor.describe.remote()))


class RemoteEngine:
    """An `EngineActor` as the orchestrator's `EngineHandle` (see the module docstring)."""

    def __init__(self, actor: Any, keeper: Any, description: dict[str, Any]) -> None:
        self.actor, self.keeper = actor, keeper
        self._version = description["version"]
        self.max_model_len = description["max_model_len"]

    @property
    def version(self) -> int:
        return self._version

    def policy(self, **sampling: Any) -> RemoteEnginePolicy:
        return RemoteEnginePolicy(self.actor, **sampling)

    async def update_weights(self, weights: Any, version: int) -> None:
        """`weights`: an object reference (the trainer's export) or a state dict."""
        ref = object_ref(weights)
        await self.keeper.put.remote([ref], version)  # first: a restart from now on serves them
        self._version = await _call_through_restarts(lambda: self.actor.update_weights.remote(ref, version))

    async def close(self) -> None:
        ray = import_ray()
        with contextlib.suppress(ray.exceptions.RayActorError):  # already gone: nothing to close
            await self.actor.close.remote()
        ray.kill(self.actor, no_restart=True)
        ray.kill(self.keeper, no_restart=True)


class RemoteRequest:
    """One generation on the engine actor, as the agent's `PolicyRequest`."""

    def __init__(self, policy: RemoteEnginePolicy, prompt_ids: list[int], max_new_tokens: int) -> None:
        self.policy, self.prompt_ids, self.max_new_tokens = policy, prompt_ids, max_new_tokens
        self.key = f"{policy.name}-{next(policy.counter)}"
        self._aborted = False

    def abort(self) -> None:
        self._aborted = True
        self.policy.actor.abort.remote(self.key)  # fire and forget: the result says what was kept

    async def _result(self) -> Generation:
        ray = import_ray()
        deadline, resent = time.monotonic() + self.policy.restart_wait_s, False
        while True:
            try:
                data = await self.policy.actor.generate.remote(
                    self.key, self.prompt_ids, self.max_new_tokens, self.policy.sampling, self.policy.group
                )
                return Generation(**data)
            except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError):
                if self._aborted:
                    return Generation([], [], [], "abort")
                if time.monotonic() > deadline:
                    raise
                if not resent:
                    self.policy.count_resent()
                    resent = True
                await asyncio.sleep(RETRY_DELAY_S)

    def __await__(self) -> Generator[Any, None, Generation]:
        return self._result().__await__()


class RemoteEnginePolicy:
    """The engine actor behind the agent's `Policy` protocol; `sampling` applies to every request.
    `requests_resent` counts requests sent again because the engine's process died under them
    (each once, however many tries its restart took; those of its `for_group` policies too)."""

    def __init__(
        self, actor: Any, restart_wait_s: float = RESTART_WAIT_S, group: str | None = None,
        parent: RemoteEnginePolicy | None = None, **sampling: Any,
    ) -> None:  # fmt: skip
        self.actor, self.restart_wait_s, self.sampling = actor, restart_wait_s, sampling
        self.group, self._parent = group, parent
        self.name = uuid.uuid4().hex[:12]
        self.counter = itertools.count()
        self.requests_resent = 0

    def for_group(self, group_id: str) -> RemoteEnginePolicy:
        """This policy for the episodes of rollout group `group_id`: an engine over several
        replicas keeps their requests on one."""
        parent = self._parent or self
        return RemoteEnginePolicy(self.actor, self.restart_wait_s, group_id, parent, **self.sampling)

    def count_resent(self) -> None:
        (self._parent or self).requests_resent += 1

    def generate(self, prompt_ids: list[int], max_new_tokens: int) -> RemoteRequest:
        return RemoteRequest(self, list(prompt_ids), max_new_tokens)


def object_ref(weights: Any) -> Any:
    """`weights` as a Ray object reference (a state dict is put in the object store once)."""
    ray = import_ray()
    return weights if isinstance(weights, ray.ObjectRef) else ray.put(dict(weights))


async def _call_through_restarts(call: Any, wait_s: float = RESTART_WAIT_S) -> Any:
    """Await `call()` (a remote call), calling again while the actor is being restarted."""
    ray = import_ray()
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return await call()
        except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(RETRY_DELAY_S)
