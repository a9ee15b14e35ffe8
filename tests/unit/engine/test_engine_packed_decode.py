"""The packed decode step against the training forward, its two expert paths, repacking after a
weight update, and the CPU settings the engine's step thread runs with (and freed memory handed back)."""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest
import torch
from conftest import tiny_model_config

from overture.engine import Engine
from overture.engine.kv_cache import PagedKVCache
from overture.engine.packed_decode import PackedDecoder
from overture.engine.paged_forward import PagedForward
from overture.model import Transformer
from overture.runtime.cpu import glibc_version, intra_op_threads, keep_freed_memory

LAYER_KINDS = {
    "dense and moe": {},
    "shared expert, q/k/v bias, balance bias": dict(
        shared_expert_intermediate_size=24, attention_bias=True, balance_bias=True, mlp_only_layers=[]
    ),
}


def random_model(precision: str = "fp32", **overrides) -> Transformer:
    model = Transformer(tiny_model_config(initializer_range=0.2, precision=precision, **overrides)).eval()
    with torch.no_grad():
        # Norm weights and biases away from their initial ones and zeros, so a mix-up shows.
        for name, parameter in model.named_parameters():
            if name.endswith("norm.weight") or name.endswith("bias"):
                parameter.uniform_(0.5, 1.5)
        for router in model.moe_routers():
            router.expert_bias.uniform_(-0.05, 0.05)
    return model


def decode_logits_and_reference(model: Transformer, lengths: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits of each sequence's last token from one batched packed decode step (after a prefill
    of the rest), and from a training forward over each whole sequence."""
    config = model.config
    cache = PagedKVCache(
        config.num_hidden_layers, 64, 4, config.num_key_value_heads, config.head_dim, torch.float32, "cpu"
    )
    forward = PagedForward(model, cache)
    gen = torch.Generator().manual_seed(len(lengths))
    sequences = [torch.randint(0, config.vocab_size, (n,), generator=gen).tolist() for n in lengths]
    tables = [cache.pool.allocate(cache.blocks_for(n)) for n in lengths]
    forward.prefill([s[:-1] for s in sequences], tables)
    logits = forward.decode([s[-1] for s in sequences], [n - 1 for n in lengths], tables)
    with torch.no_grad():
        reference = torch.stack([model(torch.tensor([s])).logits[0, -1].float() for s in sequences])
    return logits, reference


@pytest.mark.parametrize("kind", LAYER_KINDS)
@pytest.mark.parametrize("batch", [1, 12])  # 2 and 24 token-expert pairs: one GEMM per pair, grouped
def test_packed_decode_matches_the_training_forward(kind, batch):
    model = random_model(**LAYER_KINDS[kind])
    lengths = [3 + (5 * i) % 11 for i in range(batch)]
    logits, reference = decode_logits_and_reference(model, lengths)
    assert (logits - reference).abs().max() <= 1e-5


@pytest.mark.parametrize("precision", ["bf16", "mxfp8"])
def test_packed_decode_rounds_weights_and_activations_as_training_does(precision):
    model = random_model(precision)
    logits, reference = decode_logits_and_reference(model, [4, 9, 13, 6, 7])
    # Float32 sums in another order can flip a rounding at a boundary, so not bit for bit; but
    # far closer than serving unrounded weights, which the second check confirms.
    assert (logits - reference).abs().max() <= 1e-3
    model.set_precision("fp32")
    with torch.no_grad():
        unrounded = torch.stack([model(torch.tensor([[1, 2, 3]])).logits[0, -1]])
    model.set_precision(precision)
    with torch.no_grad():
        rounded = torch.stack([model(torch.tensor([[1, 2, 3]])).logits[0, -1]])
    assert (unrounded - rounded).abs().max() > 1e-2


def test_both_torch_expert_paths_give_the_same_rows():
    model = random_model()
    decoder = PackedDecoder(model, native_gemm=False)  # the C kernel has its own tests
    moe_layer = next(layer for layer in model.layers if layer.is_moe)
    packed = decoder.layers[list(model.layers).index(moe_layer)].experts
    x = torch.randn(6, model.config.hidden_size)
    with torch.no_grad():
        route = moe_layer.mlp.gate(x)
        per_pair = decoder._experts_per_pair(x, route.indices, route.weights, packed)
        grouped = decoder._experts_grouped(x, route.indices, route.weights, packed)
        modules = moe_layer.mlp.experts(x, route)
    assert torch.allclose(per_pair, modules, atol=1e-6)
    assert torch.allclose(grouped, modules, atol=1e-6)


def test_a_weight_update_repacks_the_decode_weights():
    old, new = random_model(), random_model()
    with torch.no_grad():
        for parameter in new.parameters():
            parameter.mul_(-1.3)
    prompts = [[1, 2, 3], [4, 5, 6, 7, 8]]
    with Engine(new) as fresh:
        expected = fresh.generate(prompts, max_new_tokens=12, temperature=1.0, seed=3)
    with Engine(old) as engine:
        engine.update_weights(new.state_dict(), version=1)
        served = engine.generate(prompts, max_new_tokens=12, temperature=1.0, seed=3)
    for got, want in zip(served, expected, strict=True):
        assert got.token_ids == want.token_ids
        assert got.logprobs == pytest.approx(want.logprobs, abs=1e-6)


def test_intra_op_threads_applies_to_the_calling_thread_only():
    before = torch.get_num_threads()
    seen = {}

    def other_thread():
        seen["other"] = torch.get_num_threads()

    with intra_op_threads(1):
        seen["inside"] = torch.get_num_threads()
        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join()
    assert seen["inside"] == 1
    assert torch.get_num_threads() == before
    with intra_op_threads(0):
        assert torch.get_num_threads() == before


@pytest.mark.skipif(glibc_version() is None, reason="the malloc thresholds are glibc's")
def test_keep_freed_memory_is_applied_once_on_glibc():
    assert keep_freed_memory() is True
    assert keep_freed_memory() is True


RESIDENT_AFTER_FREE = """
import threading, torch
from overture.runtime.cpu import keep_freed_memory, release_freed_memory

def resident_mb():
    return int(open("/proc/self/status").read().split("VmRSS:")[1].split()[0]) // 1024

keep_freed_memory()  # freed blocks below 64 MiB stay in the process, as in a serving process
kept = []

def churn():  # 1 MiB tensors in a thread's own arena; every other one freed, the rest kept alive
    tensors = [torch.ones(1 << 18) for _ in range(400)]
    kept.extend(tensors[1::2])
    del tensors

thread = threading.Thread(target=churn)
thread.start()
thread.join()
before = resident_mb()
assert release_freed_memory()
print(before, resident_mb())
"""


@pytest.mark.skipif(glibc_version() is None, reason="malloc_trim is glibc's")
def test_release_freed_memory_hands_a_threads_freed_memory_back():
    done = subprocess.run(
        [sys.executable, "-c", RESIDENT_AFTER_FREE], capture_output=True, text=True, check=True
    )
    before, after = map(int, done.stdout.split())
    # The 200 freed MiB are holes between live tensors, so only the trim can return them (glibc
    # neither shrinks a heap's top nor unmaps a heap around them): all 200 come back, none without
    # the trim. (Freeing all 400 instead let glibc unmap whole heaps on its own first, by an amount
    # that varied from run to run.)
    assert before - after >= 150, (before, after)
