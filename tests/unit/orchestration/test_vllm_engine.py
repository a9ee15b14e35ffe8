"""vLLM behind the orchestrator's engine handle and the agent's `Policy`: per-token versions
across a weight update in mid-generation, aborts, groups kept on one replica, a server's death
in mid-request, and the trainer's weights written for the servers. The server tests need `make
vllm-env` (skipped without it) and share one server, which the last one kills; the replica
test starts a second."""

from __future__ import annotations

import asyncio
import http.server
import os
import signal
import threading
import time
import urllib.request

import pytest
import torch
from agent_helpers import tokenizer
from conftest import tiny_model_config

from overture.agent.scripted import ScriptedPolicy
from overture.engine.vllm_client import VllmClient, VllmClientError
from overture.engine.vllm_server import VllmServer, default_python
from overture.model import Transformer, load_pretrained, save_pretrained
from overture.orchestration.rollout_groups import group_policy
from overture.orchestration.vllm_engine import VllmEngine, write_checkpoint

needs_vllm = pytest.mark.skipif(
    not default_python().exists(), reason="vLLM's environment is not built: run `make vllm-env`"
)
CONTEXT = 32768
# The shared tiny layout at widths vLLM's CPU kernels take (multiples of 32), embeddings tied.
CONFIG = tiny_model_config(
    vocab_size=256, hidden_size=64, intermediate_size=128, head_dim=32, moe_intermediate_size=32,
    max_position_embeddings=CONTEXT, initializer_range=0.1, tie_word_embeddings=True,
)  # fmt: skip
PROMPT = [5, 6, 7, 8]
BUDGET = 30000  # far more than the seconds below make, however loaded the machine


def model(seed: int) -> Transformer:
    torch.manual_seed(seed)
    return Transformer(CONFIG).eval()


def teacher_forced(weights: Transformer, prompt: list[int], tokens: list[int]) -> list[float]:
    """Each of `tokens`' logprob (temperature 1) under `weights`, after `prompt` and the tokens before it."""
    with torch.no_grad():
        logits = weights(torch.tensor([prompt + tokens])).logits[0, len(prompt) - 1 : -1].double()
    return torch.log_softmax(logits, -1).gather(-1, torch.tensor(tokens)[:, None])[:, 0].tolist()


def test_the_trainers_weights_are_written_as_a_checkpoint_that_loads_back(tmp_path):
    trained = model(4)
    folder = write_checkpoint(trained.state_dict(), CONFIG, tmp_path / "version-000001")
    loaded = load_pretrained(folder)
    for name, value in trained.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], value), name
    with pytest.raises(ValueError, match="lack 1 tensors"):
        partial = {k: v for k, v in trained.state_dict().items() if k != "norm.weight"}
        write_checkpoint(partial, CONFIG, tmp_path / "partial")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("vllm_engine")
    save_pretrained(model(0), root / "start")
    with VllmServer(
        root / "start", root / "server.log", dtype="float32", max_model_len=CONTEXT,
        env={"VLLM_CPU_KVCACHE_SPACE": "1"},
    ) as server:  # fmt: skip
        yield server


@needs_vllm
def test_a_weight_update_in_mid_generation_tags_each_token_with_the_weights_that_made_it(server, tmp_path):
    old, new = model(0), model(1)
    engine = VllmEngine([VllmClient(server.url)], CONFIG, tmp_path / "weights", max_model_len=CONTEXT,
                        temperature=1.0)  # fmt: skip
    policy = engine.policy()

    async def run():
        await policy.generate(PROMPT, 8)  # the server's first request is slow to start
        request = policy.generate(PROMPT, BUDGET)
        generation = asyncio.ensure_future(request)
        await asyncio.sleep(2.0)  # some tokens under version 0
        began = time.monotonic()
        await engine.update_weights(new.state_dict(), 1)
        print(f"\nupdate in mid-generation: {time.monotonic() - began:.2f} s")
        await asyncio.sleep(1.0)  # some under version 1
        request.abort()
        return await generation

    result = asyncio.run(run())
    print(f"{result.versions.count(0)} tokens at version 0, {result.versions.count(1)} at version 1")
    assert engine.version == 1 and result.finish_reason == "abort"
    switch = result.versions.index(1)
    assert 0 < switch < len(result.versions) < BUDGET
    assert result.versions == [0] * switch + [1] * (len(result.versions) - switch)
    # Each token's logprob is that of the weights its version names, by overture's own forward.
    before = teacher_forced(old, PROMPT, result.token_ids[:switch])
    after = teacher_forced(new, PROMPT, result.token_ids)[switch:]
    assert result.logprobs == pytest.approx(before + after, abs=1e-3)
    assert sorted(p.name for p in (tmp_path / "weights").iterdir()) == ["version-000001"]
    # The servers keep the new weights for the next request.

    async def late_request():
        return await policy.generate(PROMPT, 16)

    late = asyncio.run(late_request())
    assert late.versions == [1] * 16 and late.finish_reason == "length"
    assert late.logprobs == pytest.approx(teacher_forced(new, PROMPT, late.token_ids), abs=1e-3)


@needs_vllm
def test_each_groups_requests_stay_on_one_replica_and_the_groups_spread_over_them(server, tmp_path):
    with VllmServer(
        server.model_dir, tmp_path / "second.log", dtype="float32", max_model_len=CONTEXT,
        env={"VLLM_CPU_KVCACHE_SPACE": "1"},
    ) as second:  # fmt: skip
        urls = [server.url, second.url]
        clients = [VllmClient(url) for url in urls]
        engine = VllmEngine(clients, CONFIG, tmp_path / "weights", max_model_len=CONTEXT)
        policy = engine.policy()
        groups = {name: policy.for_group(name) for name in "abcd"}

        async def turn(tokens: int) -> list[tuple[str, object]]:
            episodes = [(name, g, episode) for name, g in groups.items() for episode in range(3)]
            requests = [(name, g.generate([*PROMPT, episode], tokens)) for name, g, episode in episodes]
            await asyncio.gather(*(request for _, request in requests))
            return requests

        async def run():
            # Two turns of three episodes in each of four groups, then a request outside any group.
            requests = await turn(8) + await turn(4)
            loose = policy.generate(PROMPT, 4)
            await loose
            return requests, loose

        requests, loose = asyncio.run(run())
    where = {name: set() for name in groups}
    for name, request in requests:
        where[name].update(request.served_by)
    assert all(len(servers) == 1 for servers in where.values()), where
    assert sorted(next(iter(servers)) for servers in where.values()) == sorted(urls * 2), where
    assert len(loose.served_by) == 1 and loose.served_by[0] in urls


def test_a_groups_episodes_get_a_policy_kept_on_one_replica_where_the_policy_has_replicas(tmp_path):
    engine = VllmEngine([VllmClient("http://127.0.0.1:9")], CONFIG, tmp_path, max_model_len=CONTEXT)
    policy = engine.policy(temperature=0.5)
    grouped = group_policy(policy, "g-1")
    assert grouped.group == "g-1" and grouped.sampling == policy.sampling
    grouped.count_resent()
    assert policy.requests_resent == 1  # counted where the rollouts read it
    plain = ScriptedPolicy(tokenizer(), [])
    assert group_policy(plain, "g-1") is plain


class CrashingServer(http.server.BaseHTTPRequestHandler):
    """Answers /health like a vLLM server, and goes down for a moment under every completion:
    it drops the connection and fails /health until it is back (as a restart looks)."""

    down_until = 0.0
    completions = 0

    def do_GET(self) -> None:
        self.send_response(503 if time.monotonic() < CrashingServer.down_until else 200)
        self.end_headers()

    def do_POST(self) -> None:
        CrashingServer.completions += 1
        CrashingServer.down_until = time.monotonic() + 0.5
        self.close_connection = True  # no answer: the connection just ends

    def log_message(self, *args) -> None:
        pass


def test_a_request_its_server_dies_under_again_and_again_fails_naming_the_cause(tmp_path):
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), CrashingServer)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{httpd.server_port}"
        engine = VllmEngine([VllmClient(url, model="m")], CONFIG, tmp_path, max_model_len=CONTEXT)
        policy = engine.policy()

        async def run():
            return await policy.generate(PROMPT, 4)

        with pytest.raises(VllmClientError, match="went down under this request 3 times, so it is not sent"):
            asyncio.run(run())
    finally:
        httpd.shutdown()
    assert CrashingServer.completions == 3 and policy.requests_resent == 1


def test_a_token_id_outside_the_vocabulary_is_refused_before_it_reaches_a_server(tmp_path):
    engine = VllmEngine([VllmClient("http://127.0.0.1:9")], CONFIG, tmp_path, max_model_len=CONTEXT)
    with pytest.raises(ValueError, match=f"token id {CONFIG.vocab_size} is outside the vocabulary"):
        engine.policy().generate([5, CONFIG.vocab_size], 4)
    with pytest.raises(ValueError, match="token id -1"):
        engine.policy().generate([-1], 4)


@needs_vllm
def test_a_request_the_server_refuses_fails_at_once(server, tmp_path):
    engine = VllmEngine([VllmClient(server.url)], CONFIG, tmp_path / "weights", max_model_len=CONTEXT)
    policy = engine.policy()

    async def run():
        return await policy.generate([5] * (CONTEXT + 1), 4)  # longer than the server's context

    with pytest.raises(VllmClientError, match="HTTP 400"):
        asyncio.run(run())
    assert policy.requests_resent == 0 and server.starts == 1


async def in_flight(request, server: VllmServer, tokens: float) -> None:
    """Wait until `request` has a vLLM request on `server` and the server's process has counted
    `tokens` generated tokens."""
    while request.current is None or await asyncio.to_thread(generated_tokens, server) < tokens:
        await asyncio.sleep(0.05)


def generated_tokens(server: VllmServer) -> float:
    """The server process's count of generated tokens (its Prometheus counter); 0 while it is down."""
    try:
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(f"{server.url}/metrics") as r:
            lines = r.read().decode().splitlines()
    except OSError:
        return 0.0
    return sum(float(line.split()[-1]) for line in lines if line.startswith("vllm:generation_tokens_total"))


@needs_vllm
def test_a_server_killed_in_mid_request_is_restarted_and_the_request_sent_again(server, tmp_path):
    new = model(2)
    engine = VllmEngine(
        [VllmClient(server.url)], CONFIG, tmp_path / "weights", max_model_len=CONTEXT, servers=[server],
        temperature=1.0,
    )  # fmt: skip
    policy = engine.policy()
    starts = server.starts

    async def run():
        await engine.update_weights(new.state_dict(), 3)
        request = policy.generate(PROMPT, BUDGET)
        generation = asyncio.ensure_future(request)
        await in_flight(request, server, generated_tokens(server) + 8)
        os.killpg(server.pid, signal.SIGKILL)
        while server.starts == starts or request.current is None:  # restarted, and sent again
            assert not generation.done(), "the generation ended instead of waiting for its server"
            await asyncio.sleep(0.1)
        await in_flight(request, server, 8)  # the restarted process counts from 0
        request.abort()
        return await generation

    result = asyncio.run(run())
    assert server.starts == starts + 1 and policy.requests_resent == 1
    assert result.finish_reason == "abort" and 0 < len(result.token_ids) < BUDGET
    # The lost request's tokens died with the server; the resent one continued from the prompt
    # under the newest weights, which the restarted server loaded (not its first checkpoint).
    assert result.versions == [3] * len(result.token_ids)
    assert result.logprobs == pytest.approx(teacher_forced(new, PROMPT, result.token_ids), abs=1e-3)
