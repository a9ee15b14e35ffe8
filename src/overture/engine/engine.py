"""The engine: a policy model served by a background step thread, with an async and a sync API.

Threading: one daemon thread owns the model, the KV cache and the scheduler and runs the step
loop. Every other thread talks to it only through a command inbox guarded by a condition
variable: `submit`, `abort`, `update_weights` and `close` append a closure and wake the thread,
which runs pending commands between two steps. Results travel back on
`concurrent.futures.Future`s, which `RequestHandle` makes awaitable on any asyncio loop. So
aborts and weight updates land between decode steps, never inside one, and compute never runs
on the caller's event loop.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import random
import secrets
import threading
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

import torch

from overture.config import EngineConfig
from overture.engine.kv_cache import PagedKVCache
from overture.engine.paged_forward import PagedForward
from overture.engine.params import Completion, EngineError, RequestError, SamplingParams
from overture.engine.scheduler import Scheduler
from overture.engine.sequence import Sequence
from overture.engine.weights import apply_update, check_update
from overture.model import Transformer, load_pretrained
from overture.runtime.cpu import keep_freed_memory
from overture.text import Tokenizer

log = logging.getLogger(__name__)


class RequestHandle:
    """A submitted request: `await handle` or `handle.result()` gives its `Completion`."""

    def __init__(self, request_id: int, future: Future, engine: Engine) -> None:
        self.request_id = request_id
        self.future = future
        self._engine = engine

    def result(self, timeout: float | None = None) -> Completion:
        return self.future.result(timeout)

    def done(self) -> bool:
        return self.future.done()

    def abort(self) -> Completion | None:
        """Abort this request; its partial completion, or None if it had already finished."""
        found = self._engine.abort([self.request_id])
        return found[0] if found else None

    def __await__(self):
        return asyncio.wrap_future(self.future).__await__()


class Engine:
    """Generation for one policy model: continuous batching over a paged KV cache.

    `options` override fields of `config` (an `EngineConfig`). `version` is the policy version
    of the initial weights; every generated token records the version it was produced under.
    """

    def __init__(
        self,
        model: Transformer,
        tokenizer: Tokenizer | None = None,
        config: EngineConfig | None = None,
        version: int = 0,
        **options: Any,
    ) -> None:
        base = (config or EngineConfig()).model_dump()
        self.config = EngineConfig(**{**base, **options})
        # Eval mode: in training mode the routers would keep counting expert load for balancing.
        self.model = model.eval()
        if self.config.precision is not None:
            # The served weights are not converted: the GEMMs quantize them as training does.
            model.set_precision(self.config.precision)
        self.tokenizer = tokenizer
        self.vocab_size = model.config.vocab_size
        if self.config.keep_freed_host_memory and model.embed_tokens.weight.device.type == "cpu":
            keep_freed_memory()
        self.cache = _build_cache(model, self.config)
        # A request can never hold more tokens than the pool, or it would preempt itself forever.
        self.max_model_len = min(
            self.config.max_model_len or model.config.max_position_embeddings,
            self.cache.pool.capacity * self.config.kv_block_size,
        )
        decode = tokenizer.decode if tokenizer is not None else None
        self._scheduler = Scheduler(
            PagedForward(
                model,
                self.cache,
                self.config.native_attention,
                self.config.native_gemm,
                self.config.attention_threads,
            ),
            self.cache,
            self.config,
            self.max_model_len,
            decode,
        )
        self._version = version
        self._ids = itertools.count()
        self._inbox: list[Callable[[], None]] = []
        self._wakeup = threading.Condition()
        self._closing = False
        self._thread = threading.Thread(target=self._loop, name="overture-engine", daemon=True)
        self._thread.start()

    @classmethod
    def from_pretrained(
        cls, path: str | Path, dtype: torch.dtype = torch.float32, device: str = "cpu", **options: Any
    ) -> Engine:
        """Serve the checkpoint at `path` (and its `tokenizer.json`, when it has one)."""
        model = load_pretrained(path, dtype=dtype).to(device)
        tokenizer = Tokenizer.from_dir(path) if (Path(path) / "tokenizer.json").is_file() else None
        return cls(model, tokenizer, **options)

    @property
    def version(self) -> int:
        return self._version

    # ------------------------------------------------------------------ requests

    def fitting_budget(self, prompt_length: int, max_new_tokens: int) -> int:
        """`max_new_tokens`, cut to what fits in the context after a prompt of this length (at
        least 1, so that a prompt too long for the context still gets its clear `RequestError`)."""
        return max(1, min(max_new_tokens, self.max_model_len - prompt_length))

    def sampling_params(self, **fields: Any) -> SamplingParams:
        """The engine's defaults (config, and the end-of-turn token as a stop) with `fields` applied."""
        defaults = dict(
            max_new_tokens=self.config.max_new_tokens,
            temperature=self.config.temperature,
            top_p=self.config.top_p,
            top_k=self.config.top_k,
            max_repeats=self.config.max_repeats,
            repeat_span=self.config.repeat_span,
            stop_token_ids=(self.tokenizer.im_end_id,) if self.tokenizer is not None else (),
        )
        given = {k: v for k, v in fields.items() if v is not None}
        for name in ("stop_token_ids", "stop_strings"):
            if name in given:
                given[name] = tuple(given[name])
        try:
            return SamplingParams(**{**defaults, **given})
        except TypeError as exc:
            raise RequestError(f"unknown sampling parameter: {exc}") from None

    def submit(
        self, prompt: list[int], params: SamplingParams | None = None, **sampling: Any
    ) -> RequestHandle:
        """Queue one request; raises `RequestError` at once if it cannot be served."""
        params = params or self.sampling_params(**sampling)
        self._check_request(prompt, params)
        return self._submit_checked(prompt, params)

    def _submit_checked(self, prompt: list[int], params: SamplingParams) -> RequestHandle:
        """Queue a request already checked by `_check_request`."""
        if params.seed is None:
            params = replace(params, seed=secrets.randbits(63))
        return self._enqueue(list(prompt), params, random.Random(f"{params.seed}"))

    def submit_group(
        self, prompt: list[int], n: int, params: SamplingParams | None = None, **sampling: Any
    ) -> list[RequestHandle]:
        """`n` samples of one prompt (one prefill, shared prompt blocks); sample j gets seed (seed, j)."""
        params = params or self.sampling_params(**sampling)
        self._check_request(prompt, params)
        seed = params.seed if params.seed is not None else secrets.randbits(63)
        with self._wakeup:  # one inbox batch, so the samples are admitted in the same step
            return [
                self._submit_checked(prompt, replace(params, seed=_derive_seed(seed, j))) for j in range(n)
            ]

    def resume(self, partial: Completion, max_new_tokens: int | None = None) -> RequestHandle:
        """Continue an aborted request: prompt + its tokens are re-prefilled under the current
        weights, up to `max_new_tokens` more tokens (default: what is left of its budget). The
        result holds the earlier tokens, logprobs and versions followed by the new ones."""
        if partial.finish_reason != "abort":
            raise RequestError(
                f"request {partial.request_id}: finished ({partial.finish_reason!r}); only aborted "
                "requests are resumed"
            )
        budget = partial.remaining_budget if max_new_tokens is None else max_new_tokens
        if not isinstance(budget, int) or budget < 1:
            raise RequestError(f"request {partial.request_id}: no budget left to resume ({budget!r})")
        self._check_request(partial.prompt_ids + partial.token_ids, partial.params.with_budget(budget))
        rng = random.Random(f"{partial.params.seed}:{len(partial.token_ids)}")
        seq_fields = dict(
            generated=list(partial.token_ids),
            logprobs=list(partial.logprobs),
            versions=list(partial.versions),
            budget_end=len(partial.token_ids) + budget,
        )
        return self._enqueue(list(partial.prompt_ids), partial.params, rng, **seq_fields)

    def _check_request(self, prompt: list[int], params: SamplingParams) -> None:
        if not prompt:
            raise RequestError("empty prompt: at least one token is needed")
        bad = [t for t in prompt if not isinstance(t, int) or not 0 <= t < self.vocab_size]
        if bad:
            raise RequestError(f"prompt tokens {bad[:5]} outside the vocabulary 0..{self.vocab_size - 1}")
        if len(prompt) >= self.max_model_len:
            raise RequestError(
                f"prompt of {len(prompt)} tokens leaves no room in the context of "
                f"{self.max_model_len} tokens (max_model_len)"
            )
        params.validate(self.vocab_size)
        if params.stop_strings and self.tokenizer is None:
            raise RequestError("stop_strings need a tokenizer; this engine has none (use stop_token_ids)")

    def _enqueue(
        self, prompt: list[int], params: SamplingParams, rng: random.Random, **fields
    ) -> RequestHandle:
        future: Future = Future()
        request_id = next(self._ids)
        seq = Sequence(request_id, prompt, params, rng, future, **fields)
        self._post(lambda: self._scheduler.add(seq))
        return RequestHandle(request_id, future, self)

    # ------------------------------------------------------------------ control

    def abort(self, request_ids: Iterable[int] | Literal["all"] = "all") -> list[Completion]:
        """Stop requests between two decode steps; their partial completions (finish_reason "abort").

        Requests that already finished are not in the list. Each aborted request's handle also
        resolves to its partial completion. Called from the engine's own thread (a completion
        callback), the abort is queued for the next step boundary and None is returned."""
        ids = None if request_ids == "all" else list(request_ids)
        return self._call(lambda: self._scheduler.abort(ids))

    def update_weights(self, state: Mapping[str, torch.Tensor], version: int, strict: bool = True) -> None:
        """Swap in new weights between two decode steps; returns once they serve. Requests in
        flight continue under them, their next tokens tagged `version`. A mismatched `state` raises
        `WeightUpdateError` here and changes nothing."""
        if not isinstance(version, int):
            raise RequestError(f"version must be an integer, got {version!r}")
        pairs = check_update(self.model, state, strict)

        def swap() -> None:
            apply_update(pairs)
            self._scheduler.forward.decoder.pack()
            self._scheduler.invalidate_prefix_cache()
            self._version = version

        self._call(swap)

    def stats(self) -> dict[str, int]:
        """A snapshot of the load (read without locking: approximate while requests run)."""
        pool = self.cache.pool
        return {
            "running": len(self._scheduler.running),
            "waiting": len(self._scheduler.waiting),
            "kv_blocks_total": pool.capacity,
            "kv_blocks_used": pool.capacity - pool.num_free,
            "kv_blocks_peak": self._scheduler.peak_blocks_used,
            "steps": self._scheduler.steps,
            "preemptions": self._scheduler.preemptions,
            "kv_blocks_cached": pool.num_cached,
            "prefill_tokens": self._scheduler.prefill_tokens,
            "prefix_cache_hit_tokens": self._scheduler.prefix_hit_tokens,
            "kv_cache_bytes": self.cache.nbytes,
        }

    # ------------------------------------------------------------------ sync and async helpers

    def generate(
        self,
        prompts: list[list[int]],
        max_new_tokens: int | None = None,
        temperature: float | None = None,
        top_p: float | None = None,
        seed: int | None = None,
        **sampling: Any,
    ) -> list[Completion]:
        """Complete every prompt (blocking); prompt i samples with seed (seed, i) when `seed` is set.

        Every prompt is checked before any is queued, so a bad one raises `RequestError` naming
        its index and nothing is started."""
        handles = self._submit_all(prompts, max_new_tokens, temperature, top_p, seed, **sampling)
        return [handle.result() for handle in handles]

    async def agenerate(
        self,
        prompts: list[list[int]],
        max_new_tokens: int | None = None,
        temperature: float | None = None,
        top_p: float | None = None,
        seed: int | None = None,
        **sampling: Any,
    ) -> list[Completion]:
        """`generate` for an asyncio caller: awaits the step thread instead of blocking the loop."""
        handles = self._submit_all(prompts, max_new_tokens, temperature, top_p, seed, **sampling)
        return list(await asyncio.gather(*handles))

    def _submit_all(
        self, prompts, max_new_tokens, temperature, top_p, seed, **sampling
    ) -> list[RequestHandle]:
        base = self.sampling_params(
            max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p, **sampling
        )
        requests = []
        for i, prompt in enumerate(prompts):
            params = replace(base, seed=None if seed is None else _derive_seed(seed, i))
            try:
                self._check_request(prompt, params)
            except RequestError as exc:
                raise RequestError(f"prompt {i}: {exc}") from None
            requests.append((prompt, params))
        with self._wakeup:
            return [self._submit_checked(prompt, params) for prompt, params in requests]

    # ------------------------------------------------------------------ the step thread

    def close(self) -> None:
        """Stop the step thread; requests still in flight fail with `EngineError`."""
        with self._wakeup:
            self._closing = True
            self._wakeup.notify()
        self._thread.join()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _post(self, command: Callable[[], None]) -> None:
        with self._wakeup:
            if self._closing:
                raise EngineError("the engine is closed")
            self._inbox.append(command)
            self._wakeup.notify()

    def _call(self, fn: Callable[[], Any]) -> Any:
        """Run `fn` on the step thread between two steps and wait for its result.

        Called from the step thread itself (a completion callback that aborts the rest, as
        partial rollouts do), waiting would never return, and running it there and then would
        change the scheduler in the middle of a step: it is queued for the next step boundary
        instead and the call returns None (aborted requests still resolve their handles)."""
        if threading.current_thread() is self._thread:
            self._post(fn)
            return None
        future: Future = Future()

        def run() -> None:
            try:
                future.set_result(fn())
            except BaseException as exc:  # handed to the caller, who decides
                future.set_exception(exc)

        self._post(run)
        return future.result()

    def _loop(self) -> None:
        while True:
            with self._wakeup:
                while not self._inbox and not self._scheduler.has_work() and not self._closing:
                    self._wakeup.wait()
                commands, self._inbox = self._inbox, []
                closing = self._closing
            for command in commands:
                command()
            if closing:
                self._scheduler.fail_all(EngineError("the engine was closed before the request finished"))
                return
            if self._scheduler.has_work():
                self._step()

    def _step(self) -> None:
        try:
            self._scheduler.step(self._version)
        except Exception as exc:
            # A failure inside a step cannot be pinned on one request: fail those in flight,
            # keep the thread alive for the next ones.
            log.exception("engine step failed")
            self._scheduler.fail_all(EngineError(f"engine step failed: {exc!r}"))


def _derive_seed(seed: int, index: int) -> int:
    return random.Random(f"{seed}/{index}").getrandbits(63)


def _build_cache(model: Transformer, config: EngineConfig) -> PagedKVCache:
    model_config = model.config
    weight = model.embed_tokens.weight
    # One extra block: block 0 is the scratch block.
    blocks = -(-config.kv_cache_tokens // config.kv_block_size) + 1
    return PagedKVCache(
        num_layers=model_config.num_hidden_layers,
        num_blocks=blocks,
        block_size=config.kv_block_size,
        kv_heads=model_config.num_key_value_heads,
        head_dim=model_config.head_dim,
        dtype=weight.dtype if config.kv_cache_dtype == "auto" else getattr(torch, config.kv_cache_dtype),
        device=weight.device,
    )
