"""The main job's settings phase by phase, and the checks of them before a run or a resume.

- `lm_warmup_phase_config`, `sft_phase_config`: the run's config as the language-model warm-up
  sub-run (`RUN/lm-warmup/`) and the SFT sub-run (`RUN/sft/`) take it: where they write, the
  job's tokenizer, the weights they start from. No phase's settings are rewritten: each phase
  builds its optimizer from its own section (`TrainingConfig.optimizer`, `LMWarmupConfig.optimizer`,
  `RLConfig.optimizer`);
- `rl_mode`: `sync`, `async` or `async+partial`, as the `[rl]` knobs make it;
- `check_job_config`: errors, naming the key, that would otherwise surface minutes into a run;
- `resume_conflicts`: the run-defining settings (`RUN_DEFINING`) a `--resume` may not change.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from overture.agent import ToolSet
from overture.config import ConfigError, RunConfig
from overture.orchestration.orchestrator import check_config
from overture.recipes.main_job.copy_circuit import check_copy_circuit_shape
from overture.tasks import Task


def rl_mode(config: RunConfig) -> str:
    if config.rl.staleness == 0:
        return "sync"
    return "async+partial" if config.rl.overprovision > 1 else "async"


def _sub_run_settings(config: RunConfig, run_path: Path, name: str) -> dict[str, Any]:
    """The run's settings for its sub-run `RUN/name/`, reading the job's tokenizer (saved in
    `run_path` by `MainJob._tokenizer`)."""
    data = config.model_dump()
    data.update(output_dir=str(run_path), name=name)
    data["tokenizer"]["path"] = str(run_path)
    return data


def lm_warmup_phase_config(config: RunConfig, run_path: Path, start: Path | None = None) -> RunConfig:
    """The run's config for its language-model warm-up sub-run `RUN/lm-warmup/`: the job's
    tokenizer (saved in `run_path`), from the checkpoint `start` (the job's initial weights) when
    given. Its windows and schedule are `[lm_warmup]`'s (`LMPhase.of_warmup`)."""
    data = _sub_run_settings(config, run_path, "lm-warmup")
    if start is not None:
        data["model"]["path"] = str(start)
    return RunConfig.model_validate(data)


def sft_phase_config(
    config: RunConfig, run_path: Path, demonstrations: Path, start: Path | None = None
) -> RunConfig:
    """The run's config for its SFT sub-run `RUN/sft/` on the oracle's demonstrations, from the
    checkpoint `start` (the language-model warm-up's) when given, with the job's tokenizer."""
    data = _sub_run_settings(config, run_path, "sft")
    data["sft"]["data"] = str(demonstrations)
    if start is not None:
        data["model"]["path"] = str(start)
    return RunConfig.model_validate(data)


def check_job_config(config: RunConfig, rl_tasks: list[Task] | None = None) -> None:
    """Errors (naming the key) that would otherwise surface minutes into a run; `rl_tasks`: the
    tasks RL would deal (the train split)."""
    if config.model.path is None and config.model.max_position_embeddings < config.training.seq_len:
        raise ConfigError(
            f"model.max_position_embeddings = {config.model.max_position_embeddings} is below "
            f"training.seq_len = {config.training.seq_len}: demonstrations would not fit the model"
        )
    if config.model.path is None and config.main_job.copy_circuit:
        try:
            check_copy_circuit_shape(config.model)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        if importlib.util.find_spec("scipy") is None:
            raise ConfigError(
                "main_job.copy_circuit needs scipy (the circuit's linear program): "
                "pip install 'overture[main-job]', or set main_job.copy_circuit = false"
            )
    ToolSet.for_agent(config.agent)  # names only tools there are
    if config.tasks.eval_size < 1:
        raise ConfigError("tasks.eval_size = 0: the main job evaluates on held-out tasks, give at least 1")
    if rl_tasks is not None:
        try:
            check_config(config.rl, rl_tasks)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None


# The settings that decide what a run's finished phases built: its task set and split, its
# tokenizer, its model, the agent's tools (the system turn its demonstrations hold). Resumed under
# other values, a run would mix its demonstrations and checkpoints with another run's tasks or
# prompt; other settings (RL's steps, the engine's) may change.
RUN_DEFINING = ("seed", "tasks", "tokenizer", "model", "main_job", "agent.tools")


def resume_conflicts(saved: RunConfig, config: RunConfig) -> list[str]:
    """Each run-defining setting (`RUN_DEFINING`) in which `config` differs from the run's own
    `saved` one, as `key: the run's value, this one's`."""
    old, new = saved.model_dump(), config.model_dump()
    conflicts = []
    for key in RUN_DEFINING:
        section, _, name = key.partition(".")
        if name:
            pairs = [(key, old[section][name], new[section][name])]
        elif isinstance(old[key], dict):
            pairs = [(f"{key}.{name}", value, new[key].get(name)) for name, value in old[key].items()]
        else:
            pairs = [(key, old[key], new[key])]
        conflicts += [f"{name}: {was!r} in the run, {now!r} now" for name, was, now in pairs if was != now]
    return conflicts
