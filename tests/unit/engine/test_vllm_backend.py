"""vLLM as a generation backend: a real server from vLLM's own environment, serving a tiny
Qwen3-MoE that overture wrote, token ids in and out; weight updates, abort, restart on death.

The server tests need the environment `make vllm-env` builds and are skipped without it. They
share one server (a start takes tens of seconds on a small CPU machine) and start three more: a
fresh one on the updated weights, the restart after a kill, and one whose starter is killed.
Figures they measure are printed (`pytest -s`), never asserted.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path

import pytest
import torch
from conftest import tiny_model_config

from overture.engine.vllm_client import VllmClient, VllmClientError, prompt_request_ids
from overture.engine.vllm_server import VllmServer, VllmServerError, check_vllm_python, default_python
from overture.model import Transformer, load_pretrained, save_pretrained

VLLM_PYTHON = default_python()
needs_vllm = pytest.mark.skipif(
    not VLLM_PYTHON.exists(), reason=f"vLLM's environment is not built ({VLLM_PYTHON}): run `make vllm-env`"
)
# vLLM computes in float32 here, like overture's reference forward, so the gap is kernels' rounding.
DTYPE = "float32"
# Logprob gap allowed between vLLM and overture's float32 forward on the same tokens.
FP32_GAP = 1e-3
PROMPTS = [[1, 2, 3, 4, 5], [17, 99, 3], [200, 201, 202, 203, 204, 205, 206, 207], [42]]
SERVER_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1"}  # GiB; vLLM's default reserves 4
# Long enough that no request here can finish its budget while a loaded machine delays an abort:
# the server makes ~900 tokens a second on two cores, and an abort took up to 9 s to be answered.
CONTEXT = 32768


def tiny_moe(seed: int) -> Transformer:
    """A random Qwen3-MoE that vLLM's CPU kernels take: widths multiples of 32, no overture-only parts."""
    torch.manual_seed(seed)
    config = tiny_model_config(
        vocab_size=256, hidden_size=64, intermediate_size=128, head_dim=32, moe_intermediate_size=32,
        max_position_embeddings=CONTEXT, initializer_range=0.1,
    )  # fmt: skip
    return Transformer(config).eval()


def reference_logprobs(
    model: Transformer, prompt: list[int], tokens: list[int], temperature: float
) -> list[float]:
    """Each of `tokens`' logprob under overture's float32 forward at `temperature`, teacher-forced."""
    ids = torch.tensor([prompt + tokens])
    with torch.no_grad():
        logits = model(ids).logits[0, len(prompt) - 1 : -1].double()
    logprobs = torch.log_softmax(logits / temperature, dim=-1)
    return logprobs.gather(-1, torch.tensor(tokens)[:, None])[:, 0].tolist()


def gaps(completions, model: Transformer, temperature: float) -> list[float]:
    return [
        abs(got - want)
        for c in completions
        for got, want in zip(
            c.logprobs, reference_logprobs(model, c.prompt_ids, c.token_ids, temperature), strict=True
        )
    ]


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """Two checkpoints of one architecture with every weight different, experts included."""
    root = tmp_path_factory.mktemp("vllm_checkpoints")
    for name, seed in (("a", 0), ("b", 1)):
        save_pretrained(tiny_moe(seed), root / name)
    return root / "a", root / "b"


@pytest.fixture(scope="module")
def server(checkpoints, tmp_path_factory):
    log_path = tmp_path_factory.mktemp("vllm_logs") / "server.log"
    began = time.monotonic()
    with VllmServer(checkpoints[0], log_path, dtype=DTYPE, max_model_len=CONTEXT, env=SERVER_ENV) as server:
        print(f"\nvLLM {server.version} server ready in {time.monotonic() - began:.1f} s")
        yield server


@pytest.fixture
def client(server):
    assert server.wait_ready(600), f"the vLLM server is down: {server.restart_error}"
    return VllmClient(server.url)


# Missing or broken pieces (no vLLM needed).


def test_a_missing_vllm_python_names_the_make_target(tmp_path):
    with pytest.raises(VllmServerError, match=r"does not exist: build .* with `make vllm-env`"):
        check_vllm_python(tmp_path / "no-venv" / "bin" / "python")


def test_a_python_without_vllm_is_named(tmp_path):
    with pytest.raises(VllmServerError, match=r"vllm is not installed in .* `make vllm-env`"):
        check_vllm_python(sys.executable)


def test_a_directory_that_is_no_checkpoint_is_refused_before_anything_starts(tmp_path):
    with pytest.raises(VllmServerError, match=r"no config\.json"):
        VllmServer(tmp_path, tmp_path / "log").start()


def test_an_unreachable_server_is_named_in_the_error():
    from overture.engine.vllm_server import free_port

    client = VllmClient(f"http://127.0.0.1:{free_port()}", model="m", timeout=5)
    with pytest.raises(VllmClientError, match="cannot reach the vLLM server"):
        client.complete([[1, 2]], max_tokens=1)


# A real server.


@needs_vllm
def test_token_ids_in_token_ids_and_logprobs_out_match_overtures_forward(client, checkpoints):
    temperature = 0.8
    completions = client.complete(PROMPTS, max_tokens=24, temperature=temperature, seed=5)
    assert [c.prompt_ids for c in completions] == PROMPTS
    for c in completions:
        assert c.finish_reason == "length"
        assert len(c.token_ids) == len(c.logprobs) == 24
        assert all(0 <= t < 256 for t in c.token_ids)
    found = gaps(completions, load_pretrained(checkpoints[0]).eval(), temperature)
    print(f"\nvLLM ({DTYPE}) vs overture fp32: mean gap {sum(found) / len(found):.2e}, max {max(found):.2e}")
    assert max(found) < FP32_GAP


@needs_vllm
def test_a_weight_update_serves_what_a_fresh_server_on_the_new_weights_serves(
    server, client, checkpoints, tmp_path
):
    old, new = checkpoints
    before = client.complete(PROMPTS, max_tokens=12, temperature=1.0, seed=11)
    report = client.update_weights(new)
    print(f"\nweight update: {report}")
    assert report["moe_layers_repacked"] == 2  # layers 0 and 2; layer 1 is dense
    updated = client.complete(PROMPTS, max_tokens=12, temperature=1.0, seed=11)
    assert [c.token_ids for c in updated] != [c.token_ids for c in before]
    with VllmServer(
        new, tmp_path / "fresh.log", dtype=DTYPE, max_model_len=CONTEXT, env=SERVER_ENV, restart=False
    ) as fresh:
        expected = VllmClient(fresh.url).complete(PROMPTS, max_tokens=12, temperature=1.0, seed=11)
    for got, want in zip(updated, expected, strict=True):
        assert got.token_ids == want.token_ids
        assert got.logprobs == pytest.approx(want.logprobs, abs=1e-5)
    # And both are the new model itself, experts included, by overture's own forward.
    assert max(gaps(updated, load_pretrained(new).eval(), 1.0)) < FP32_GAP
    client.update_weights(old)
    restored = client.complete(PROMPTS, max_tokens=12, temperature=1.0, seed=11)
    assert [c.token_ids for c in restored] == [c.token_ids for c in before]
    assert max(gaps(restored, load_pretrained(old).eval(), 1.0)) < FP32_GAP


def abort_until_returned(client: VllmClient, request_id: str, returned: threading.Event) -> float:
    """Abort `request_id` until its request has returned (an abort that reaches the server before
    the request does is a no-op there); seconds the first abort call took."""
    began = time.monotonic()
    client.abort([request_id])
    first = time.monotonic() - began
    while not returned.wait(0.1):
        client.abort([request_id])
    return first


@needs_vllm
def test_an_aborted_request_returns_the_tokens_it_had(client, checkpoints):
    client.complete([[1]], max_tokens=2)  # a warm server, so that the requests below make tokens soon
    budget, results = CONTEXT - 16, {}  # minutes of generation: the aborts land long before
    requests = {name: (uuid.uuid4().hex, threading.Event()) for name in ("a", "b")}

    def run(name: str, prompt: list[int]) -> None:
        request_id, done = requests[name]
        (results[name],) = client.complete([prompt], max_tokens=budget, temperature=1.0, seed=3,
                                           request_id=request_id)  # fmt: skip
        done.set()

    workers = [threading.Thread(target=run, args=item) for item in (("a", [7, 8, 9]), ("b", [10, 11]))]
    for worker in workers:
        worker.start()
    time.sleep(2.0)
    for name, pause in (("a", 1.0), ("b", 0.0)):  # b runs a second longer
        request_id, done = requests[name]
        (prompt_id,) = prompt_request_ids(request_id, 1)
        print(f"\n/abort_requests answered in {abort_until_returned(client, prompt_id, done):.3f} s")
        time.sleep(pause)
    for worker in workers:
        worker.join(120)
    a, b = results["a"], results["b"]
    assert a.finish_reason == b.finish_reason == "abort"
    assert 0 < len(b.token_ids) < budget and len(a.token_ids) < len(b.token_ids)
    assert len(a.logprobs) == len(a.token_ids) and len(b.logprobs) == len(b.token_ids)
    assert max(gaps([a, b], load_pretrained(checkpoints[0]).eval(), 1.0)) < FP32_GAP


@needs_vllm
def test_a_killed_server_is_restarted_on_the_same_address(server, client):
    old_pid, url, starts = server.pid, server.url, server.starts
    os.kill(old_pid, signal.SIGKILL)
    deadline = time.monotonic() + 600
    while server.starts == starts and time.monotonic() < deadline:
        time.sleep(0.2)
    assert server.wait_ready(600), f"not restarted: {server.restart_error}"
    print(f"\nrestarted in {server.last_startup_s:.1f} s")
    assert server.pid != old_pid and server.url == url
    with pytest.raises(ProcessLookupError):
        os.killpg(old_pid, 0)  # nothing of the dead server's process group is left
    (c,) = client.complete([[1, 2, 3]], max_tokens=4, temperature=1.0)
    assert len(c.token_ids) == 4


def living_in_group(pgid: int) -> list[int]:
    """Processes of process group `pgid` that are not zombies (a dead one waits for its reaper)."""
    living = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            living.append(int(stat.parent.name))
    return living


@needs_vllm
def test_a_server_ends_with_the_process_that_started_it(checkpoints, tmp_path):
    starter_code = textwrap.dedent(
        """
        import sys, time
        from overture.engine.vllm_server import VllmServer
        env = {"VLLM_CPU_KVCACHE_SPACE": "1"}
        server = VllmServer(sys.argv[1], sys.argv[2], dtype="float32", max_model_len=4096, env=env).start()
        print(server.pid, flush=True)
        time.sleep(3600)
        """
    )
    starter = subprocess.Popen(
        [sys.executable, "-c", starter_code, str(checkpoints[0]), str(tmp_path / "server.log")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    line = starter.stdout.readline()  # once the server is healthy
    assert line.strip().isdigit(), f"the starter failed: {starter.stderr.read()[-2000:]}"
    server_pid = int(line)
    assert living_in_group(server_pid)
    starter.kill()  # no chance to stop its server
    starter.wait()
    deadline = time.monotonic() + 120
    while living_in_group(server_pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not living_in_group(server_pid), "the vLLM server outlived the process that started it"
