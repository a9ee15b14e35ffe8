"""A token-level client of a vLLM OpenAI-compatible server: token ids in, token ids and logprobs out.

Prompts go to `/v1/completions` as lists of token ids and completions come back as the sampled
token ids (`return_token_ids`) with each one's logprob (`logprobs: 0` asks for the sampled
token's alone; `return_tokens_as_token_ids` names tokens by id), so nothing is ever tokenized
or detokenized on either side. Each prompt of a request gets its own id,
`cmpl-{request_id}-{index}` as vLLM names it, by which `abort` ends it early: its completion then
comes back with the tokens it had, with `finish_reason == "abort"`. `update_weights` reloads
the served weights from a checkpoint directory through the worker extension `VllmServer`
installs, then resets the prefix cache. The control endpoints need the server's development
mode (`VllmServer` turns it on).
"""

from __future__ import annotations

import http.client
import json
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

FinishReason = Literal["stop", "length", "abort"]
RELOAD_METHOD = "overture_reload_weights"  # WeightReloadExtension's method
_TOKEN_PREFIX = "token_id:"


class VllmClientError(RuntimeError):
    """The server refused a request, could not be reached, or answered something unexpected."""


@dataclass
class VllmCompletion:
    """One prompt's completion: aligned `token_ids` and `logprobs`, and why it ended."""

    request_id: str
    prompt_ids: list[int]
    token_ids: list[int]
    logprobs: list[float]
    finish_reason: FinishReason


def prompt_request_ids(request_id: str, count: int) -> list[str]:
    """The ids vLLM gives the `count` prompts of completion request `request_id` (for `abort`)."""
    return [f"cmpl-{request_id}-{i}" for i in range(count)]


# vLLM servers are the job's own, on loopback or the cluster's network: never through a proxy
# that the environment may name for the outside world.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class VllmClient:
    """Talks to one vLLM server at `base_url` (e.g. `VllmServer.url`)."""

    def __init__(self, base_url: str, model: str | None = None, timeout: float = 3600.0) -> None:
        self.base_url = base_url.rstrip("/")
        self._model = model
        self.timeout = timeout

    def _request(self, method: str, path: str, body: Any = None, timeout: float | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"{self.base_url}{path}", data=data, method=method, headers={"Content-Type": "application/json"}
        )
        try:
            with _OPENER.open(request, timeout=timeout or self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")[:2000]
            raise VllmClientError(f"{method} {self.base_url}{path}: HTTP {exc.code}: {detail}") from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            reason = getattr(exc, "reason", exc)
            raise VllmClientError(
                f"{method} {self.base_url}{path}: cannot reach the vLLM server: {reason}"
            ) from None
        if not raw:
            return None
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            raise VllmClientError(f"{method} {self.base_url}{path}: not JSON: {raw[:200]!r}") from None

    def healthy(self) -> bool:
        try:
            self._request("GET", "/health", timeout=5.0)
        except VllmClientError:
            return False
        return True

    @property
    def model(self) -> str:
        """The served model's name (asked of the server once)."""
        if self._model is None:
            models = self._request("GET", "/v1/models")
            try:
                self._model = models["data"][0]["id"]
            except (KeyError, IndexError, TypeError):
                raise VllmClientError(f"{self.base_url}/v1/models: no model listed: {models}") from None
        return self._model

    def complete(
        self,
        prompts: Sequence[Sequence[int]],
        max_tokens: int,
        *,
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: int | None = None,
        stop_token_ids: Sequence[int] = (),
        request_id: str | None = None,
    ) -> list[VllmCompletion]:
        """Complete every prompt (token ids) in one request; one `VllmCompletion` per prompt, in order.

        Pass `request_id` to be able to abort the prompts while this call waits, by the ids
        `prompt_request_ids(request_id, len(prompts))`.
        """
        if not prompts or any(not prompt for prompt in prompts):
            raise VllmClientError("every prompt needs at least one token id")
        request_id = request_id or uuid.uuid4().hex
        body: dict[str, Any] = {
            "model": self.model,
            "prompt": [list(map(int, prompt)) for prompt in prompts],
            "max_tokens": max_tokens,
            "temperature": temperature,
            "top_p": top_p,
            "logprobs": 0,
            "return_token_ids": True,
            "return_tokens_as_token_ids": True,
            "stop_token_ids": list(stop_token_ids),
            "skip_special_tokens": False,
            "request_id": request_id,
        }
        if seed is not None:
            body["seed"] = seed
        response = self._request("POST", "/v1/completions", body)
        choices = sorted(response.get("choices", []), key=lambda choice: choice["index"])
        if len(choices) != len(prompts):
            raise VllmClientError(f"{len(prompts)} prompts sent, {len(choices)} completions received")
        ids = prompt_request_ids(request_id, len(prompts))
        pairs = zip(choices, prompts, ids, strict=True)
        return [_completion(choice, prompt, rid) for choice, prompt, rid in pairs]

    def abort(self, request_ids: Sequence[str] | None = None) -> int:
        """Abort these prompts (ids from `prompt_request_ids`), or every request in flight when None.
        Their `complete` calls return what they had. Returns how many the server aborted."""
        response = self._request("POST", "/abort_requests", {"request_ids": list(request_ids or [])})
        return int(response.get("aborted", 0))

    def reset_prefix_cache(self) -> None:
        """Drop every cached key and value; requests in flight are preempted and recompute theirs."""
        response = self._request("POST", "/reset_prefix_cache?reset_running_requests=true")
        if not (response or {}).get("success"):
            raise VllmClientError(f"{self.base_url}: the prefix cache was not reset: {response!r}")

    def pause(self, mode: Literal["abort", "wait", "keep"] = "keep") -> None:
        """Pause generation: abort requests in flight, wait for them, or keep them frozen until `resume`."""
        self._request("POST", f"/pause?mode={mode}")

    def resume(self) -> None:
        self._request("POST", "/resume")

    def update_weights(self, checkpoint_dir: str | Path) -> dict[str, Any]:
        """Serve the weights of `checkpoint_dir` (same architecture) from now on, and drop the prefix
        cache computed with the old ones. Returns the worker's report with the total `seconds`."""
        start = time.perf_counter()
        body = {"method": RELOAD_METHOD, "args": [str(Path(checkpoint_dir).resolve())]}
        response = self._request("POST", "/collective_rpc", body)
        results = (response or {}).get("results")
        if not results or not isinstance(results[0], dict):
            raise VllmClientError(
                f"weight update from {checkpoint_dir}: unexpected answer {response!r} (is the server "
                f"running overture's worker extension?)"
            )
        self.reset_prefix_cache()
        return {**results[0], "seconds": time.perf_counter() - start}


def _completion(choice: dict[str, Any], prompt: Sequence[int], request_id: str) -> VllmCompletion:
    token_ids = choice.get("token_ids")
    logprobs = (choice.get("logprobs") or {}).get("token_logprobs")
    tokens = (choice.get("logprobs") or {}).get("tokens")
    if token_ids is None or logprobs is None or tokens is None:
        raise VllmClientError(f"{request_id}: completion without token ids or logprobs: {choice}")
    if not len(token_ids) == len(logprobs) == len(tokens):
        raise VllmClientError(
            f"{request_id}: {len(token_ids)} token ids but {len(logprobs)} logprobs and {len(tokens)} tokens"
        )
    if tokens != [f"{_TOKEN_PREFIX}{t}" for t in token_ids] or any(lp is None for lp in logprobs):
        raise VllmClientError(f"{request_id}: logprobs do not belong to the sampled tokens: {choice}")
    prompt_ids = choice.get("prompt_token_ids")
    if prompt_ids is not None and list(prompt_ids) != list(prompt):
        raise VllmClientError(f"{request_id}: the server saw prompt {prompt_ids[:20]}..., not the one sent")
    reason = choice.get("finish_reason")
    if reason not in ("stop", "length", "abort"):
        raise VllmClientError(f"{request_id}: unexpected finish_reason {reason!r}")
    return VllmCompletion(request_id, list(prompt), list(token_ids), [float(x) for x in logprobs], reason)
