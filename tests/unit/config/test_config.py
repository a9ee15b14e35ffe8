"""The run configuration: TOML loading, overrides, and errors that name the file and the key."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from overture.config import ConfigError, RunConfig, config_to_toml, load_config, save_config

REPO = Path(__file__).resolve().parents[3]


def write(tmp_path, text: str) -> Path:
    path = tmp_path / "run.toml"
    path.write_text(text)
    return path


def test_every_shipped_config_loads():
    configs = sorted((REPO / "configs").glob("*.toml"))
    assert configs
    for path in configs:
        assert isinstance(load_config(path), RunConfig)


def test_file_values_and_overrides(tmp_path):
    path = write(tmp_path, "name = 'exp'\n[model]\nhidden_size = 64\n[training]\nlr = 0.01\n")
    config = load_config(path, ["training.lr=2e-4", "model.mlp_only_layers=[0, 2]", "rl.advantage=grpo"])
    assert config.name == "exp"
    assert config.model.hidden_size == 64
    assert config.training.lr == 2e-4
    assert config.model.mlp_only_layers == [0, 2]
    assert config.rl.advantage == "grpo"


def test_unknown_key_names_the_key_and_the_file(tmp_path):
    path = write(tmp_path, "[model]\nhiden_size = 64\n")
    with pytest.raises(ConfigError, match=rf"{path}: model\.hiden_size: unknown key"):
        load_config(path)


def test_unknown_section_is_an_error(tmp_path):
    path = write(tmp_path, "[trainer]\nlr = 1\n")
    with pytest.raises(ConfigError, match=r"trainer: unknown key"):
        load_config(path)


def test_wrong_type_names_the_key_and_the_value(tmp_path):
    path = write(tmp_path, "[training]\nsteps = 'many'\n")
    with pytest.raises(ConfigError, match=rf"{path}: training\.steps: .*integer.*'many'"):
        load_config(path)


def test_invalid_value_names_the_key(tmp_path):
    path = write(tmp_path, "[model]\nnum_attention_heads = 6\nnum_key_value_heads = 4\n")
    with pytest.raises(ConfigError, match=r"model: .*num_attention_heads \(6\) must be a multiple"):
        load_config(path)


def test_agent_tools_is_a_list_of_distinct_names(tmp_path):
    path = write(tmp_path, '[agent]\ntools = ["grep", "read_file", "grep"]\n')
    with pytest.raises(ConfigError, match=r"agent\.tools: .*names a tool more than once: grep"):
        load_config(path)
    with pytest.raises(ConfigError, match=r"agent\.tools: .*at least 1"):
        load_config(write(tmp_path, "[agent]\ntools = []\n"))
    assert load_config(None, ['agent.tools=["grep", "finish"]']).agent.tools == ["grep", "finish"]
    assert load_config(None).agent.tools is None  # every tool


def test_override_errors_name_the_override():
    with pytest.raises(ConfigError, match=r"--set engine\.temperature: engine\.temperature"):
        load_config(None, ["engine.temperature=-1"])
    with pytest.raises(ConfigError, match=r"--set model\.hidden: model\.hidden: unknown key"):
        load_config(None, ["model.hidden=3"])
    with pytest.raises(ConfigError, match=r"expected KEY\.PATH=VALUE"):
        load_config(None, ["model.hidden_size"])
    with pytest.raises(ConfigError, match=r"--set seed\.x: seed: "):
        load_config(None, ["seed.x=1"])


def test_override_below_a_value_in_the_file(tmp_path):
    with pytest.raises(ConfigError, match="is a value, not a section"):
        load_config(write(tmp_path, "seed = 1\n"), ["seed.x=1"])


def test_bad_toml_and_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(write(tmp_path, "[model\n"))
    with pytest.raises(ConfigError, match="no such config file"):
        load_config(tmp_path / "absent.toml")


def test_saved_config_reloads_identically(tmp_path):
    config = load_config(REPO / "configs" / "tiny.toml", ["tokenizer.path=/some/dir", "seed=7"])
    save_config(config, tmp_path / "config.toml")
    assert load_config(tmp_path / "config.toml") == config
    assert "[model]" in config_to_toml(config)


def test_a_turn_cost_that_would_leave_a_late_fix_nothing_is_refused():
    with pytest.raises(ValidationError, match=r"turn_cost below 1 / max_turns = 0\.125"):
        RunConfig.model_validate({"tasks": {"turn_cost": 0.125}, "agent": {"max_turns": 8}})
    assert RunConfig.model_validate({"tasks": {"turn_cost": 0.1}, "agent": {"max_turns": 8}})


@pytest.mark.parametrize("url", ["127.0.0.1:8000", "http://", "ftp://host:1", ""])
def test_a_vllm_url_that_is_no_servers_address_is_refused(url):
    with pytest.raises(ValidationError, match="is not a server's address: expected http://HOST:PORT"):
        RunConfig.model_validate({"engine": {"vllm_urls": ["http://127.0.0.1:8000", url]}})
    good = ["http://127.0.0.1:8000", "https://gpu-node-3:8001/"]
    assert RunConfig.model_validate({"engine": {"vllm_urls": good}}).engine.vllm_urls == good
