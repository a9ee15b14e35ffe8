"""Layer 0: the typed run configuration (pydantic), TOML loading and `--set` overrides."""

from overture.config.loading import (
    ConfigError,
    config_to_toml,
    load_config,
    parse_override,
    save_config,
    validate_config,
)
from overture.config.schema import (
    AgentConfig,
    EngineConfig,
    LMWarmupConfig,
    ModelConfig,
    RLConfig,
    RunConfig,
    RuntimeConfig,
    SandboxConfig,
    SFTConfig,
    TasksConfig,
    TokenizerConfig,
    TrainingConfig,
)

__all__ = [
    "AgentConfig",
    "ConfigError",
    "EngineConfig",
    "LMWarmupConfig",
    "ModelConfig",
    "RLConfig",
    "RunConfig",
    "RuntimeConfig",
    "SFTConfig",
    "SandboxConfig",
    "TasksConfig",
    "TokenizerConfig",
    "TrainingConfig",
    "config_to_toml",
    "load_config",
    "parse_override",
    "save_config",
    "validate_config",
]
