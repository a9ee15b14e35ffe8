"""Sharded training on spawned CPU processes (gloo) equals one process on the same global batch.

One spawn per layout, shared by the tests through module fixtures: 4 processes as 2 × 2 HSDP,
4 as ep = 2 × expert_shard = 2 (dp_shard = 4), which also saves a checkpoint after step 2, and
2 processes (ep = 2) resuming from it. The reference is plain one-process training written here
without `overture.distributed`: cross-entropy mean + aux loss, `clip_grad_norm_`, AdamW.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F
from weight_helpers import assert_state_dicts_match

from overture.config import ModelConfig
from overture.config.schema import ParallelConfig
from overture.distributed import (
    CollectiveCounter,
    build_meshes,
    gather_model_state,
    lm_train_step,
    load_model,
    load_optimizer,
    local_batch,
    parallelize,
    save_checkpoint,
    spawn,
)
from overture.distributed.comm_counter import count_remote_slots
from overture.distributed.comm_model import all_to_all_bytes, fsdp_bytes, step_scalar_bytes
from overture.model import Transformer, load_pretrained

# The [model] of configs/smoke.toml, shrunk in vocabulary; a dense layer and a MoE layer.
MODEL = ModelConfig(
    vocab_size=128,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=2,
    num_key_value_heads=1,
    head_dim=32,
    num_experts=4,
    num_experts_per_tok=2,
    moe_intermediate_size=32,
    mlp_only_layers=[0],
    tie_word_embeddings=True,
    router_aux_loss_coef=0.01,
)
SEED = 3
STEPS = 3
SAVE_AFTER = 2
ROWS, LENGTH = 8, 16
GRAD_CLIP = 1.0
TOLERANCE = dict(rtol=1e-4, atol=2e-6)
LR = 2e-3
# Weights after AdamW steps: a few elements with near-zero gradients may differ by a share of lr.
WEIGHT_TOLERANCE = dict(**TOLERANCE, lr=LR, steps=STEPS)

HSDP = ParallelConfig(nproc=4, dp_replicate=2, dp_shard=2)
EXPERT_PARALLEL = ParallelConfig(nproc=4, dp_shard=4, ep=2)
RESUME_AT_2 = ParallelConfig(nproc=2, ep=2)


def make_optimizer(model: torch.nn.Module) -> torch.optim.Optimizer:
    return torch.optim.AdamW(model.parameters(), lr=LR, betas=(0.9, 0.95), weight_decay=0.1)


def global_batches() -> torch.Tensor:
    generator = torch.Generator().manual_seed(11)
    return torch.randint(0, MODEL.vocab_size, (STEPS, ROWS, LENGTH), generator=generator)


def plain_step(
    model: Transformer, optimizer: torch.optim.Optimizer, batch: torch.Tensor
) -> tuple[float, float]:
    optimizer.zero_grad()
    out = model(batch)
    lm = F.cross_entropy(out.logits[:, :-1].reshape(-1, MODEL.vocab_size), batch[:, 1:].reshape(-1))
    loss = lm + MODEL.router_aux_loss_coef * out.aux_loss
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), GRAD_CLIP)
    optimizer.step()
    return loss.item(), norm.item()


def clone_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: value.detach().clone() for name, value in model.state_dict().items()}


# --- what every spawned rank runs -------------------------------------------------------------


def train_worker(parallel: ParallelConfig, batches: torch.Tensor, checkpoint: str | None) -> dict:
    meshes = build_meshes(parallel)
    torch.manual_seed(SEED)
    model = parallelize(Transformer(MODEL), meshes)
    optimizer = make_optimizer(model)
    remote = count_remote_slots(model, meshes.ep_rank, MODEL.num_experts // parallel.ep)
    losses, norms, counter = [], [], CollectiveCounter()
    for step, batch in enumerate(batches, 1):
        if step == 1:
            with counter.counting():
                result = lm_train_step(model, optimizer, local_batch(batch, meshes), meshes, GRAD_CLIP)
            first_step_remote = remote[0]
        else:
            result = lm_train_step(model, optimizer, local_batch(batch, meshes), meshes, GRAD_CLIP)
        losses.append(result.loss)
        norms.append(result.grad_norm)
        if checkpoint and step == SAVE_AFTER:
            save_checkpoint(checkpoint, model, optimizer)
    state = gather_model_state(model)
    return {
        "losses": losses,
        "norms": norms,
        "state": state if dist.get_rank() == 0 else None,
        "sent_bytes": counter.totals(),
        "calls": counter.counts(),
        "remote_slots": first_step_remote,
    }


def resume_worker(checkpoint: str, parallel: ParallelConfig, batches: torch.Tensor) -> dict:
    meshes = build_meshes(parallel)
    model = load_model(checkpoint, meshes)
    optimizer = make_optimizer(model)
    load_optimizer(checkpoint, optimizer, model)
    losses = [
        lm_train_step(model, optimizer, local_batch(b, meshes), meshes, GRAD_CLIP).loss for b in batches
    ]
    state = gather_model_state(model)
    return {"losses": losses, "state": state if dist.get_rank() == 0 else None}


# --- fixtures: one run per layout -------------------------------------------------------------


@pytest.fixture(scope="module")
def batches() -> torch.Tensor:
    return global_batches()


@pytest.fixture(scope="module")
def reference(batches) -> dict:
    torch.manual_seed(SEED)
    model = Transformer(MODEL)
    optimizer = make_optimizer(model)
    losses, norms, states = [], [], []
    for batch in batches:
        loss, norm = plain_step(model, optimizer, batch)
        losses.append(loss)
        norms.append(norm)
        states.append(clone_state(model))
    return {"losses": losses, "norms": norms, "states": states}


@pytest.fixture(scope="module")
def hsdp_run(batches) -> list[dict]:
    return spawn(train_worker, HSDP, HSDP, batches, None, device_type="cpu")


@pytest.fixture(scope="module")
def checkpoint_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("sharded") / "step-2"


@pytest.fixture(scope="module")
def expert_parallel_run(batches, checkpoint_dir) -> list[dict]:
    return spawn(
        train_worker, EXPERT_PARALLEL, EXPERT_PARALLEL, batches, str(checkpoint_dir), device_type="cpu"
    )


def assert_same_training(run: list[dict], reference: dict) -> None:
    for rank in run:  # every rank reports the global numbers
        torch.testing.assert_close(rank["losses"], reference["losses"], **TOLERANCE)
        torch.testing.assert_close(rank["norms"], reference["norms"], **TOLERANCE)
    assert_state_dicts_match(run[0]["state"], reference["states"][-1], **WEIGHT_TOLERANCE)


# --- tests ------------------------------------------------------------------------------------


def test_reference_exercises_clipping_and_learning(reference):
    # Otherwise the equality below would not cover gradient clipping or real updates.
    assert max(reference["norms"]) > GRAD_CLIP
    assert reference["losses"][-1] != reference["losses"][0]


def test_hsdp_2x2_matches_one_process(hsdp_run, reference):
    assert_same_training(hsdp_run, reference)


def test_ep2_shard2_matches_one_process(expert_parallel_run, reference):
    assert_same_training(expert_parallel_run, reference)


def test_checkpoint_from_4_processes_resumes_in_one_plain_process(
    expert_parallel_run, checkpoint_dir, reference, batches
):
    # Nothing distributed here: load_pretrained and a plain AdamW read what 4 sharded ranks wrote.
    model = load_pretrained(checkpoint_dir / "model")
    assert_state_dicts_match(model.state_dict(), reference["states"][SAVE_AFTER - 1], **WEIGHT_TOLERANCE)
    optimizer = make_optimizer(model)
    optimizer.load_state_dict(torch.load(checkpoint_dir / "optimizer.pt", weights_only=False))
    loss, _ = plain_step(model, optimizer, batches[SAVE_AFTER])
    assert loss == pytest.approx(reference["losses"][SAVE_AFTER], rel=1e-4)
    assert_state_dicts_match(model.state_dict(), reference["states"][SAVE_AFTER], **WEIGHT_TOLERANCE)


def test_checkpoint_from_4_processes_resumes_at_2(expert_parallel_run, checkpoint_dir, reference, batches):
    run = spawn(
        resume_worker, RESUME_AT_2, str(checkpoint_dir), RESUME_AT_2, batches[SAVE_AFTER:], device_type="cpu"
    )
    for rank in run:
        torch.testing.assert_close(rank["losses"], reference["losses"][SAVE_AFTER:], **TOLERANCE)
    assert_state_dicts_match(run[0]["state"], reference["states"][-1], **WEIGHT_TOLERANCE)


def test_hsdp_moves_the_analytic_fsdp_bytes_and_no_tokens(hsdp_run):
    expected = fsdp_bytes(MODEL, HSDP)
    for rank in hsdp_run:
        sent = rank["sent_bytes"]
        assert sent["all_gather"] == expected["all_gather"]
        assert sent["reduce_scatter"] == expected["reduce_scatter"]
        assert sent["all_reduce"] == expected["all_reduce"] + step_scalar_bytes(MODEL, HSDP)
        assert "all_to_all" not in sent


def test_expert_parallel_all_to_all_bytes_follow_the_routing(expert_parallel_run):
    # Per MoE layer: one count exchange, dispatch + combine in forward and again in backward.
    moe_layers = sum(MODEL.is_moe_layer(i) for i in range(MODEL.num_hidden_layers))
    assert all(rank["calls"]["all_to_all"] == 5 * moe_layers for rank in expert_parallel_run)
    mean_remote = sum(r["remote_slots"] for r in expert_parallel_run) / len(expert_parallel_run)
    measured = sum(r["sent_bytes"]["all_to_all"] for r in expert_parallel_run) / len(expert_parallel_run)
    assert mean_remote > 0
    assert measured == pytest.approx(all_to_all_bytes(MODEL, EXPERT_PARALLEL, mean_remote))
    expected = fsdp_bytes(MODEL, EXPERT_PARALLEL)
    assert expert_parallel_run[0]["sent_bytes"]["all_gather"] == expected["all_gather"]
    assert expert_parallel_run[0]["sent_bytes"]["reduce_scatter"] == expected["reduce_scatter"]
