"""Layer 0: the typed run configuration (pydantic), TOML loading and `--set` overrides, and the
user cache directory other layers keep files in."""

from overture.config.loading import (
    ConfigError,
    config_to_toml,
    load_config,
    parse_override,
    save_config,
    validate_config,
)
from overture.config.paths import user_cache_dir
from overture.config.schema import (
    AgentConfig,
    EngineConfig,
    LMWarmupConfig,
    MainJobConfig,
    ModelConfig,
    OptimizerConfig,
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
    "MainJobConfig",
    "ModelConfig",
    "OptimizerConfig",
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
    "user_cache_dir",
    "validate_config",
]
