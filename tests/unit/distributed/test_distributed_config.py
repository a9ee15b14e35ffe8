"""The parallel config section, the launch environment and the pieces of expert dispatch that need
no process group: errors name the key at fault, and the row regrouping is exact."""

from __future__ import annotations

import re

import pytest
import torch
from pydantic import ValidationError

from overture.config import ConfigError, ModelConfig, config_to_toml, load_config
from overture.config.schema import ParallelConfig
from overture.distributed import (
    LaunchError,
    LayoutError,
    ProcessEnv,
    check_layout_fits_model,
    local_batch,
    meshes_for_run,
    run_parallel,
)
from overture.distributed.comm_model import fsdp_bytes
from overture.distributed.expert_parallel import expert_major_order
from overture.distributed.process_group import resolve_backend


def test_dp_shard_defaults_to_the_rest_of_nproc():
    config = load_config(None, ["parallel.nproc=8", "parallel.dp_replicate=2", "parallel.ep=2"])
    assert config.parallel.shard_size == 4
    assert config.parallel.expert_shard == 2
    assert "[parallel]" in config_to_toml(config)


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        (dict(nproc=4, dp_replicate=2, dp_shard=3), "parallel.nproc is 4"),
        (dict(nproc=4, dp_replicate=3), "parallel.dp_replicate (3) must divide parallel.nproc (4)"),
        (dict(nproc=4, ep=3), "parallel.ep (3) must divide parallel.dp_shard (4)"),
        (dict(nproc=2, dp_shard=0), "parallel.dp_shard must be positive"),
    ],
)
def test_inconsistent_layouts_name_the_keys(fields, named):
    with pytest.raises(ValidationError, match=re.escape(named)):
        ParallelConfig(**fields)


def test_bad_override_is_a_config_error_naming_parallel():
    with pytest.raises(ConfigError, match=r"parallel\.nproc is 4"):
        load_config(None, ["parallel.nproc=4", "parallel.dp_shard=3"])


def test_experts_must_split_evenly_over_ep():
    with pytest.raises(LayoutError, match=r"parallel.ep \(3\) must divide model.num_experts \(4\)"):
        check_layout_fits_model(ParallelConfig(nproc=3, ep=3), ModelConfig(num_experts=4))
    with pytest.raises(LayoutError, match="no experts"):
        check_layout_fits_model(ParallelConfig(nproc=2, ep=2), ModelConfig(num_experts=0))


def test_torchrun_environment_is_read_and_incomplete_ones_rejected():
    env = {
        "RANK": "3",
        "WORLD_SIZE": "4",
        "MASTER_ADDR": "10.0.0.1",
        "MASTER_PORT": "29500",
        "LOCAL_RANK": "1",
    }
    assert ProcessEnv.from_environ(env) == ProcessEnv(3, 4, 1, "10.0.0.1", 29500)
    assert ProcessEnv.from_environ({}) is None
    with pytest.raises(LaunchError, match="MASTER_PORT"):
        ProcessEnv.from_environ({"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "x"})


def test_backend_follows_the_device_unless_named():
    assert resolve_backend(ParallelConfig(), "cpu") == "gloo"
    assert resolve_backend(ParallelConfig(), "cuda") == "nccl"
    with pytest.raises(LaunchError, match=r"parallel\.backend"):
        resolve_backend(ParallelConfig(backend="nccl"), "cpu")


def test_one_process_runs_in_place(monkeypatch):
    for key in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(key, raising=False)
    assert run_parallel(lambda x: x + 1, ParallelConfig(), 41) == [42]
    assert meshes_for_run(ParallelConfig()) is None  # train unsharded, no process group
    batch = torch.arange(6).view(3, 2)
    assert local_batch(batch, None) is batch


def test_expert_major_order_regroups_arrivals_by_local_expert():
    # received[s, j]: rows from source rank s for local expert j, stored source after source.
    received = torch.tensor([[2, 0, 1], [1, 3, 0]])
    labels = [(s, j) for s in range(2) for j in range(3) for _ in range(int(received[s, j]))]
    order = expert_major_order(received)
    regrouped = [labels[i] for i in order.tolist()]
    assert regrouped == sorted(labels, key=lambda sj: (sj[1], sj[0]))
    assert sorted(order.tolist()) == list(range(len(labels)))


def test_fsdp_volume_counts_padding_and_replicas():
    model = ModelConfig(vocab_size=64, hidden_size=32, num_hidden_layers=1, num_experts=0, head_dim=16)
    one_group = fsdp_bytes(model, ParallelConfig(nproc=2))
    hsdp = fsdp_bytes(model, ParallelConfig(nproc=4, dp_replicate=2, dp_shard=2))
    assert one_group["all_reduce"] == 0 and hsdp["all_reduce"] > 0
    assert hsdp["all_gather"] == one_group["all_gather"]  # same shard groups, more of them
    assert fsdp_bytes(model, ParallelConfig(nproc=1)) == {
        "all_gather": 0,
        "reduce_scatter": 0,
        "all_reduce": 0,
    }
