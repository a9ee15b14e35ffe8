"""Shared fixtures: small random Qwen3 / Qwen3-MoE configurations and checkpoints, a small task
set, and the main job's smoke run (`configs/smoke.toml`), run once per session."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from overture.config import ModelConfig

SMOKE_CONFIG = Path(__file__).resolve().parents[1] / "configs" / "smoke.toml"


def tiny_model_config(**overrides) -> ModelConfig:
    """A model small enough to build in milliseconds, with MoE and dense layers mixed."""
    fields = dict(
        vocab_size=96,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        num_experts=8,
        num_experts_per_tok=2,
        moe_intermediate_size=16,
        mlp_only_layers=[1],
    )
    fields.update(overrides)
    return ModelConfig(**fields)


def assert_engine_option_changes_nothing(option: str, **settings) -> None:
    """An engine with the boolean engine `option` on (a C kernel) samples the same tokens as one
    with it off, with logprobs within 1e-5 (and 1e-5 of their size: kernels built with
    `-march=native -ffast-math` sum in another order on each CPU, and twenty decode steps of a
    logprob near -5 drifted by 1.4e-5 on one with AVX-512); both with the other engine `settings`
    given."""
    from overture.engine import Engine
    from overture.model import Transformer

    model = Transformer(tiny_model_config(initializer_range=0.2)).eval()
    prompts = [[1, 2, 3], [4, 5, 6, 7, 8, 9, 10, 11, 12], [13]]
    runs = {}
    for on in (True, False):
        with Engine(model, kv_block_size=4, **settings, **{option: on}) as engine:
            runs[on] = engine.generate(prompts, max_new_tokens=20, temperature=1.0, seed=7)
    for got, want in zip(runs[True], runs[False], strict=True):
        assert got.token_ids == want.token_ids
        assert got.logprobs == pytest.approx(want.logprobs, rel=1e-5, abs=1e-5)


@pytest.fixture
def no_compiler(monkeypatch, tmp_path):
    """No C compiler and an empty kernel cache, so no kernel can be built. Every kernel's cached
    `library()` is forgotten before the test and after it: inside, each is looked up afresh (and
    found absent); after, none stays absent for the tests that follow."""
    from overture.engine import native_attention, native_gemm, native_sampling

    libraries = [kernel.library for kernel in (native_attention, native_gemm, native_sampling)]
    monkeypatch.setenv("CC", str(tmp_path / "no-such-compiler"))
    monkeypatch.setenv("OVERTURE_KERNEL_CACHE", str(tmp_path / "kernels"))
    for library in libraries:
        library.cache_clear()
    yield
    for library in libraries:
        library.cache_clear()


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture(autouse=True)
def _float_mode():
    """Every test starts with denormals kept: a job run in process (`resolve_device`) flushes them."""
    torch.set_flush_denormal(False)


@pytest.fixture(scope="session", autouse=True)
def _environments(tmp_path_factory):
    """Repository environments the tests build go to a folder of the session, not the user's cache."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OVERTURE_ENVS", str(tmp_path_factory.mktemp("environments")))
        yield


@pytest.fixture(scope="session")
def numbers_task_set(tmp_path_factory):
    """(folder, tasks): eight tasks synthesized once from the small repository of `tasks_helpers`."""
    from tasks_helpers import synthesize

    root = tmp_path_factory.mktemp("numbers_tasks")
    return root, synthesize(root, 8)


@pytest.fixture(scope="session")
def smoke_runs_dir(tmp_path_factory) -> Path:
    """Where the smoke runs of a session write: one folder, so the bundled task set is built once."""
    return tmp_path_factory.mktemp("smoke_runs")


@pytest.fixture(scope="session")
def smoke_run(smoke_runs_dir) -> tuple[Path, dict]:
    """`overture train configs/smoke.toml` through the CLI, once: (its run directory, its summary)."""
    from typer.testing import CliRunner

    from overture.cli.main import app

    result = CliRunner().invoke(app, ["train", str(SMOKE_CONFIG), "--set", f"output_dir={smoke_runs_dir}"])
    assert result.exit_code == 0, result.output
    return smoke_runs_dir / "smoke", json.loads(result.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def tiny_policy(tmp_path_factory) -> Path:
    """A random tiny Qwen3-MoE saved with the project tokenizer (the orchestrator tests' policy)."""
    from orchestrator_helpers import save_tiny_policy

    from overture.text import train_default_tokenizer

    return save_tiny_policy(tmp_path_factory.mktemp("tiny_policy"), train_default_tokenizer())


@pytest.fixture(scope="session")
def numbers_tasks(numbers_task_set):
    """The tasks of `numbers_task_set`."""
    return numbers_task_set[1]
