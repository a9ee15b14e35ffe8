"""vLLM servers as the orchestrator's rollout engine: an `EngineHandle` and the agent's `Policy`
over `overture.engine.vllm_client`.

Every token keeps the version that made it. A weight update first stops each generation in
flight (vLLM aborts its request, which returns the tokens it had, all made by the weights being
replaced), then reloads the weights on every server (`VllmClient.update_weights`: in place, MoE
experts repacked, prefix cache reset), and only then lets those generations go on from where
they stopped: prompt + their tokens, prefilled again under the new weights. A generation is
thus a chain of vLLM requests, each of one version, like a partial rollout resumed by overture's
own engine. Requests that arrive during an update wait for it.

Replicas: a group's requests (those of a policy from `VllmPolicy.for_group`) all go to the one
server the group's first request went to, so the group's shared prompt is prefilled once and
each later turn finds its conversation in that server's prefix cache; that first request, and
any request outside a group, goes to the server with the fewest of this engine's requests in
flight, which spreads the groups across the servers.
The trainer's weights reach the servers as a Hugging Face checkpoint directory per version
under `weights_dir` (the previous one is removed once the new one serves).

A server that dies under a request: the request fails, and the generation waits for the server
to answer `/health` again (restarted by its `VllmServer`, or by whoever runs a joined one; for up
to `recover_wait_s`), has the weights serving now loaded into it again (once per death, whoever
notices first), and sends its request again from where the turn stood before that request: the
tokens of the lost request died with the server, the turn's earlier tokens and their versions
stay. The policy counts such requests (`requests_resent`). A request its server dies under
`DEATHS_PER_REQUEST` times fails instead, naming the server's log: it is what kills it. A
supervised server is also restarted from the newest weights directory, so a restart while idle
never serves older weights; a joined server restarted by its owner while nothing was in flight
is not noticed.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Generator, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from overture.agent import Generation, Policy
from overture.config import ModelConfig
from overture.engine.vllm_client import VllmClient, VllmClientError, prompt_request_ids
from overture.engine.vllm_server import VllmServer
from overture.model import Transformer, save_pretrained

# How often an interrupted request's abort is sent again until its request returns: an abort that
# reaches the server before the request does is a no-op there.
ABORT_RETRY_S = 0.1
RECOVER_WAIT_S = 900.0  # how long a request waits for its dead server to answer again
RECOVER_POLL_S = 0.5
GROUPS_REMEMBERED = 4096  # groups whose server is kept (the oldest forgotten first)
# A request its server dies under this many times is not sent again: it is what kills the server.
DEATHS_PER_REQUEST = 3


class VllmEngine:
    """vLLM servers (one `VllmClient` each, the same checkpoint) as an `EngineHandle`.

    `sampling` (temperature, top_p, stop_token_ids, seed) applies to every request; `max_model_len`
    is the servers' context, which cuts each request's budget as overture's engine does.
    `servers`: the `VllmServer`s behind the clients that this process supervises (same order; None
    for a joined one), restarted from the newest weights.
    """

    def __init__(
        self,
        clients: Sequence[VllmClient],
        model_config: ModelConfig,
        weights_dir: str | Path,
        *,
        max_model_len: int,
        version: int = 0,
        servers: Sequence[VllmServer | None] = (),
        recover_wait_s: float = RECOVER_WAIT_S,
        **sampling: Any,
    ) -> None:
        if not clients:
            raise ValueError("a vLLM engine needs at least one server")
        if servers and len(servers) != len(clients):
            raise ValueError(f"{len(servers)} supervised servers given for {len(clients)} clients")
        self.clients = list(clients)
        self.servers = list(servers) or [None] * len(self.clients)
        self.recover_wait_s = recover_wait_s
        self._deaths = [0] * len(self.clients)  # deaths recovered from, per server
        self._group_servers: OrderedDict[str, int] = OrderedDict()  # group → its server, newest last
        self.model_config = model_config
        self.weights_dir = Path(weights_dir)
        self.max_model_len = max_model_len
        self.sampling = {key: value for key, value in sampling.items() if value is not None}
        self._version = version
        self._load = [0] * len(self.clients)  # this engine's requests in flight, per server
        self._generations: set[VllmGeneration] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._served_dir: Path | None = None

    @property
    def version(self) -> int:
        return self._version

    def _in_this_loop(self) -> None:
        """The engine's events, made for the running event loop. A job runs its evaluations and
        its RL steps each in an `asyncio.run` of its own, with nothing in flight in between, and
        an asyncio event belongs to one loop."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._loop = loop
            self._serving = asyncio.Event()  # set: requests may start
            self._serving.set()
            self._drained = asyncio.Event()  # set: no request of this engine is on a server
            self._drained.set()
            self._reloading = asyncio.Lock()  # held while servers load weights

    def policy(self, **sampling: Any) -> Policy:
        """Requests on these servers; `sampling` overrides the engine's own for them."""
        return VllmPolicy(self, {**self.sampling, **{k: v for k, v in sampling.items() if v is not None}})

    def fitting_budget(self, prompt_length: int, max_new_tokens: int) -> int:
        """`max_new_tokens`, cut to what fits in the context after the prompt (at least 1)."""
        return max(1, min(max_new_tokens, self.max_model_len - prompt_length))

    async def update_weights(self, weights: Mapping[str, torch.Tensor], version: int) -> None:
        """Serve `weights` (the trainer's state dict) as `version`: stop what is in flight, reload
        every server, then let the stopped generations go on under the new weights."""
        self._in_this_loop()
        self._serving.clear()
        try:
            for generation in list(self._generations):
                generation.interrupt()
            await self._drained.wait()
            folder = self.weights_dir / f"version-{version:06d}"
            await asyncio.to_thread(write_checkpoint, weights, self.model_config, folder)
            async with self._reloading:
                await asyncio.gather(*(self._load_weights(i, folder) for i in range(len(self.clients))))
                self._version = version
                if self._served_dir is not None and self._served_dir != folder:
                    shutil.rmtree(self._served_dir, ignore_errors=True)
                self._served_dir = folder
        finally:
            self._serving.set()

    async def _load_weights(self, server: int, folder: Path) -> None:
        """Have `server` serve `folder`'s weights (waiting for it to answer if it is down), and be
        restarted from them if it is supervised (caller holds `_reloading`)."""
        supervised = self.servers[server]
        if supervised is not None:
            supervised.model_dir = folder
        while True:
            try:
                await asyncio.to_thread(self.clients[server].update_weights, folder)
                return
            except VllmClientError:
                if await asyncio.to_thread(self.clients[server].healthy):
                    raise  # the server is up and refused the weights
                await self._wait_healthy(server)

    # ------------------------------------------------------------------ requests

    async def _complete(self, generation: VllmGeneration) -> tuple[Any, int] | None:
        """One vLLM request continuing `generation` under the weights serving now; the completion
        and the version that made all of its tokens. Sent again after its server's death (see
        the module docstring); None if the generation was aborted while its server was down."""
        self._in_this_loop()
        died_under = 0
        while True:
            await self._serving.wait()
            server = self._server_for(generation.policy.group)
            generation.served_by.append(self.clients[server].base_url)
            deaths = self._deaths[server]
            try:
                return await self._request(generation, server)
            except VllmClientError as exc:
                if await asyncio.to_thread(self.clients[server].healthy):
                    raise  # the server is up: the request itself was refused
                died_under += 1
                if died_under == DEATHS_PER_REQUEST:
                    raise VllmClientError(
                        f"the vLLM server at {self.clients[server].base_url} went down under this request "
                        f"{died_under} times, so it is not sent again ({exc}){self._log_hint(server)}"
                    ) from None
            if died_under == 1:
                generation.policy.count_resent()
            if not await self._wait_healthy(server, generation):
                return None
            await self._reload_after_death(server, deaths)

    def _log_hint(self, server: int) -> str:
        supervised = self.servers[server]
        return f"; its log: {supervised.log_path}" if supervised is not None else ""

    def _server_for(self, group: str | None) -> int:
        """The server of `group` (chosen once, least loaded), or the least loaded one now."""
        if group is not None and group in self._group_servers:
            self._group_servers.move_to_end(group)
            return self._group_servers[group]
        server = min(range(len(self.clients)), key=self._load.__getitem__)
        if group is not None:
            self._group_servers[group] = server
            if len(self._group_servers) > GROUPS_REMEMBERED:
                self._group_servers.popitem(last=False)
        return server

    async def _request(self, generation: VllmGeneration, server: int) -> tuple[Any, int]:
        client, version = self.clients[server], self._version
        request_id = uuid.uuid4().hex
        generation.current = (client, prompt_request_ids(request_id, 1)[0], threading.Event())
        self._load[server] += 1
        self._drained.clear()
        try:
            (completion,) = await asyncio.to_thread(
                client.complete,
                [generation.prompt_ids + generation.token_ids],
                generation.budget - len(generation.token_ids),
                request_id=request_id,
                **generation.sampling,
            )
        finally:
            generation.current[2].set()
            generation.current = None
            self._load[server] -= 1
            if not any(self._load):
                self._drained.set()
        return completion, version

    async def _wait_healthy(self, server: int, generation: VllmGeneration | None = None) -> bool:
        """Wait until `server` answers `/health`; False if `generation` was aborted meanwhile,
        `VllmClientError` after `recover_wait_s`."""
        client = self.clients[server]
        deadline = time.monotonic() + self.recover_wait_s
        while not await asyncio.to_thread(client.healthy):
            if generation is not None and generation.aborted:
                return False
            if time.monotonic() > deadline:
                raise VllmClientError(
                    f"the vLLM server at {client.base_url} went down and did not answer again "
                    f"within {self.recover_wait_s:.0f} s"
                )
            await asyncio.sleep(RECOVER_POLL_S)
        return True

    async def _reload_after_death(self, server: int, deaths: int) -> None:
        """Load the weights serving now into a server back from its death number `deaths + 1`,
        unless a request that failed with it did already."""
        async with self._reloading:
            if self._deaths[server] != deaths:
                return
            if self._served_dir is not None:
                await self._load_weights(server, self._served_dir)
            self._deaths[server] += 1


class VllmGeneration:
    """One assistant turn generated on vLLM, as a `PolicyRequest`: awaiting it gives the
    `Generation`, its tokens tagged with the versions that made them."""

    def __init__(self, policy: VllmPolicy, prompt_ids: list[int], budget: int) -> None:
        self.policy = policy
        self.engine = policy.engine
        self.sampling = policy.sampling
        self.prompt_ids = list(prompt_ids)
        self.budget = budget
        self.token_ids: list[int] = []
        self.logprobs: list[float] = []
        self.versions: list[int] = []
        self.current: tuple[VllmClient, str, threading.Event] | None = None
        self.aborted = False
        self.served_by: list[str] = []  # the server of each of its vLLM requests, in order

    def abort(self) -> None:
        """Finish as soon as possible with the tokens made so far (`finish_reason == "abort"`)."""
        self.aborted = True
        self.interrupt()

    def interrupt(self) -> None:
        """Stop the vLLM request in flight, if any (sent again until it has returned)."""
        if self.current is None:
            return
        client, request_id, returned = self.current

        def keep_aborting() -> None:
            while not returned.is_set():
                with contextlib.suppress(VllmClientError):  # a dead server fails the request itself
                    client.abort([request_id])
                returned.wait(ABORT_RETRY_S)

        threading.Thread(target=keep_aborting, name="vllm-abort", daemon=True).start()

    async def _run(self) -> Generation:
        self.engine._generations.add(self)
        try:
            reason = "length"
            while not self.aborted and len(self.token_ids) < self.budget:
                result = await self.engine._complete(self)
                if result is None:
                    break  # aborted while its server was down
                completion, version = result
                self.token_ids += completion.token_ids
                self.logprobs += completion.logprobs
                self.versions += [version] * len(completion.token_ids)
                reason = completion.finish_reason
                if reason != "abort":
                    break  # stopped or at its budget; an abort of a weight update goes on
            if self.aborted:
                reason = "abort"
            return Generation(self.token_ids, self.logprobs, self.versions, reason)
        finally:
            self.engine._generations.discard(self)

    def __await__(self) -> Generator[Any, None, Generation]:
        return self._run().__await__()


class VllmPolicy:
    """A `VllmEngine` behind the agent's `Policy` protocol, with its requests' sampling settings.
    `requests_resent` counts its requests sent again because their server died under them (those
    of its `for_group` policies included)."""

    def __init__(
        self, engine: VllmEngine, sampling: dict[str, Any], group: str | None = None,
        parent: VllmPolicy | None = None,
    ) -> None:  # fmt: skip
        self.engine = engine
        self.sampling = sampling
        self.group = group
        self._parent = parent
        self.requests_resent = 0

    def for_group(self, group_id: str) -> VllmPolicy:
        """This policy for the episodes of group `group_id`: their requests stay on one server."""
        return VllmPolicy(self.engine, self.sampling, group_id, self._parent or self)

    def count_resent(self) -> None:
        (self._parent or self).requests_resent += 1

    def generate(self, prompt_ids: list[int], max_new_tokens: int) -> VllmGeneration:
        """Refuses a token id outside the vocabulary here: vLLM, serving without a tokenizer, does
        not check ids, and one past the embedding's end kills the server."""
        vocab = self.engine.model_config.vocab_size
        outside = next((t for t in prompt_ids if not 0 <= t < vocab), None)
        if outside is not None:
            raise ValueError(f"prompt token id {outside} is outside the vocabulary (0..{vocab - 1})")
        return VllmGeneration(self, prompt_ids, self.engine.fitting_budget(len(prompt_ids), max_new_tokens))


def write_checkpoint(weights: Mapping[str, torch.Tensor], config: ModelConfig, folder: Path) -> Path:
    """The trainer's state dict as a Hugging Face checkpoint directory vLLM loads."""
    with torch.device("meta"):
        model = Transformer(config)
    model.load_state_dict(weights, assign=True, strict=False)
    missing = [name for name, value in model.state_dict().items() if value.is_meta]
    if missing:
        raise ValueError(f"weights for the vLLM servers lack {len(missing)} tensors, e.g. {missing[:3]}")
    save_pretrained(model, folder)
    return folder
