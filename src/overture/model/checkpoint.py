"""Hugging Face checkpoint IO: `load_pretrained` and `save_pretrained` for the Qwen3 layouts.

A checkpoint is a directory with `config.json` and safetensors weights, either one
`model.safetensors` or shards listed by `model.safetensors.index.json`. Routed experts are
stored per expert (`mlp.experts.J.gate_proj.weight`, ...) in the files and stacked (E×out×in)
in the model. Every problem raises `CheckpointError` naming the file, the tensor and what was
expected.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterator
from pathlib import Path

import torch
from pydantic import ValidationError
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

from overture.config import ModelConfig
from overture.model.hf_config import HFConfigError, model_config_from_hf, model_config_to_hf
from overture.model.transformer import Transformer

log = logging.getLogger(__name__)

CONFIG_FILE = "config.json"
SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"
EXPERT_PROJECTIONS = ("gate_proj", "up_proj", "down_proj")
_STACKED_EXPERT = re.compile(r"^layers\.(\d+)\.mlp\.experts\.(gate_proj|up_proj|down_proj)$")
_IGNORED = re.compile(r"rotary_emb\.inv_freq$")
DEFAULT_MAX_SHARD_BYTES = 5 * 1024**3


class CheckpointError(ValueError):
    """A checkpoint that cannot be read or written; the message names the file and the tensor."""


def _hf_name(name: str) -> str:
    """Our parameter name → the checkpoint's (model-level names gain the `model.` prefix)."""
    if name == "lm_head.weight":
        return name
    name = name.replace(".mlp.gate.expert_bias", ".mlp.gate.e_score_correction_bias")
    return "model." + name


def read_model_config(path: str | Path) -> ModelConfig:
    """The architecture described by `path/config.json`."""
    file = Path(path) / CONFIG_FILE
    if not file.is_file():
        raise CheckpointError(f"{file}: missing (not a Hugging Face checkpoint directory?)")
    try:
        hf = json.loads(file.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{file}: not valid JSON: {exc}") from None
    if not isinstance(hf, dict):
        raise CheckpointError(f"{file}: expected a JSON object")
    try:
        return model_config_from_hf(hf)
    except HFConfigError as exc:
        raise CheckpointError(f"{file}: {exc}") from None
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise CheckpointError(f"{file}: invalid values: {problems}") from None


def _weight_map(path: Path) -> dict[str, Path]:
    """Checkpoint tensor name → the file that holds it."""
    index = path / INDEX_FILE
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text())["weight_map"]
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise CheckpointError(
                f"{index}: not a safetensors index (need a 'weight_map' object): {exc}"
            ) from None
        files = {name: path / shard for name, shard in weight_map.items()}
        for shard in sorted(set(files.values())):
            if not shard.is_file():
                listed = sorted(n for n, f in files.items() if f == shard)
                raise CheckpointError(
                    f"{shard}: missing, but {index.name} lists {len(listed)} tensors in it (e.g. {listed[0]})"
                )
        return files
    single = path / SINGLE_FILE
    if single.is_file():
        return {name: single for name in _tensor_names(single)}
    others = sorted(p.name for p in path.glob("*.bin")) + sorted(p.name for p in path.glob("*.pt"))
    hint = f" (found {', '.join(others)}: only safetensors is read)" if others else ""
    raise CheckpointError(f"{path}: no {SINGLE_FILE} or {INDEX_FILE}{hint}")


def _tensor_names(file: Path) -> list[str]:
    try:
        with safe_open(file, framework="pt") as handle:
            return list(handle.keys())
    except (SafetensorError, OSError, ValueError) as exc:
        raise CheckpointError(f"{file}: not a readable safetensors file: {exc}") from None


class _TensorReader:
    """Reads named tensors from a checkpoint, keeping each shard open once."""

    def __init__(self, files: dict[str, Path]) -> None:
        self.files = files
        self.handles: dict[Path, object] = {}
        self.used: set[str] = set()

    def get(self, name: str, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        file = self.files.get(name)
        self.used.add(name)
        if file is None:
            raise CheckpointError(
                f"tensor {name}: missing from the checkpoint (expected shape {list(shape)})"
            )
        try:
            if file not in self.handles:
                self.handles[file] = safe_open(file, framework="pt")
            tensor = self.handles[file].get_tensor(name)
        except (SafetensorError, OSError, ValueError) as exc:
            raise CheckpointError(f"{file}: cannot read tensor {name}: {exc}") from None
        if tuple(tensor.shape) != tuple(shape):
            raise CheckpointError(
                f"{file}: tensor {name} has shape {list(tensor.shape)}, expected {list(shape)}"
            )
        return tensor.to(dtype)


def _read_state(model: Transformer, reader: _TensorReader, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    state: dict[str, torch.Tensor] = {}
    for name, expected in model.state_dict().items():
        if name == "lm_head.weight" and model.config.tie_word_embeddings:
            continue
        stacked = _STACKED_EXPERT.match(name)
        if stacked:
            layer, projection = stacked.groups()
            prefix = f"model.layers.{layer}.mlp.experts"
            fused = f"{prefix}.gate_up_proj"
            if projection != "down_proj" and fused in reader.files:
                # transformers' in-memory layout (E×2I×D), should a checkpoint carry it.
                experts, hidden, dim = expected.shape
                both = reader.get(fused, (experts, 2 * hidden, dim), dtype)
                state[name] = both[:, :hidden] if projection == "gate_proj" else both[:, hidden:]
                continue
            if projection == "down_proj" and f"{prefix}.down_proj" in reader.files:
                state[name] = reader.get(f"{prefix}.down_proj", tuple(expected.shape), dtype)
                continue
            state[name] = torch.stack(
                [
                    reader.get(f"{prefix}.{j}.{projection}.weight", tuple(expected.shape[1:]), dtype)
                    for j in range(expected.shape[0])
                ]
            )
        else:
            state[name] = reader.get(_hf_name(name), tuple(expected.shape), dtype)
    return state


def load_pretrained(path: str | Path, dtype: torch.dtype = torch.float32) -> Transformer:
    """Load a Hugging Face Qwen3-MoE or Qwen3 checkpoint directory into a `Transformer`."""
    path = Path(path)
    if not path.is_dir():
        raise CheckpointError(f"{path}: not a directory")
    config = read_model_config(path)
    files = _weight_map(path)
    with torch.device("meta"):
        model = Transformer(config)
    reader = _TensorReader(files)
    state = _read_state(model, reader, dtype)
    unexpected = sorted(n for n in files if n not in reader.used and not _IGNORED.search(n))
    if unexpected:
        log.warning(
            "%s: %d checkpoint tensors not used by this model, e.g. %s",
            path,
            len(unexpected),
            ", ".join(unexpected[:3]),
        )
    model.load_state_dict(state, strict=not config.tie_word_embeddings, assign=True)
    if config.tie_word_embeddings:
        model.lm_head.weight = model.embed_tokens.weight
    model.reset_buffers()
    return model


def _checkpoint_tensors(model: Transformer) -> Iterator[tuple[str, torch.Tensor]]:
    """The model's tensors under checkpoint names, experts split per expert."""
    for name, tensor in model.state_dict().items():
        if name == "lm_head.weight" and model.config.tie_word_embeddings:
            continue
        stacked = _STACKED_EXPERT.match(name)
        if stacked:
            layer, projection = stacked.groups()
            for j in range(tensor.shape[0]):
                yield f"model.layers.{layer}.mlp.experts.{j}.{projection}.weight", tensor[j]
        else:
            yield _hf_name(name), tensor


def _shards(tensors: list[tuple[str, torch.Tensor]], max_bytes: int) -> list[list[tuple[str, torch.Tensor]]]:
    shards: list[list[tuple[str, torch.Tensor]]] = [[]]
    size = 0
    for item in tensors:
        nbytes = item[1].numel() * item[1].element_size()
        if shards[-1] and size + nbytes > max_bytes:
            shards.append([])
            size = 0
        shards[-1].append(item)
        size += nbytes
    return shards


def _write_atomically(file: Path, write) -> None:
    tmp = file.with_name(f".{file.name}.tmp")
    write(tmp)
    os.replace(tmp, file)


def save_pretrained(
    model: Transformer, path: str | Path, max_shard_bytes: int = DEFAULT_MAX_SHARD_BYTES
) -> None:
    """Write `model` as a Hugging Face checkpoint directory that transformers loads.

    Files are written under temporary names and renamed into place, and weight files of an
    earlier save that the new one does not use are removed afterwards, so a failed save never
    leaves a mix of old and new weights.
    """
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    tensors = [(name, t.detach().to("cpu").contiguous()) for name, t in _checkpoint_tensors(model)]
    dtype = str(tensors[0][1].dtype).removeprefix("torch.")
    shards = _shards(tensors, max_shard_bytes)
    written: set[str] = set()
    if len(shards) == 1:
        _write_atomically(
            path / SINGLE_FILE, lambda f: save_file(dict(tensors), f, metadata={"format": "pt"})
        )
        written.add(SINGLE_FILE)
    else:
        weight_map = {}
        for i, shard in enumerate(shards, 1):
            shard_name = f"model-{i:05d}-of-{len(shards):05d}.safetensors"
            _write_atomically(
                path / shard_name, lambda f, s=shard: save_file(dict(s), f, metadata={"format": "pt"})
            )
            weight_map.update({name: shard_name for name, _ in shard})
            written.add(shard_name)
        total = sum(t.numel() * t.element_size() for _, t in tensors)
        index = {"metadata": {"total_size": total}, "weight_map": weight_map}
        _write_atomically(path / INDEX_FILE, lambda f: f.write_text(json.dumps(index, indent=2)))
        written.add(INDEX_FILE)
    hf = model_config_to_hf(model.config, dtype)
    _write_atomically(path / CONFIG_FILE, lambda f: f.write_text(json.dumps(hf, indent=2) + "\n"))
    for stale in [*path.glob("model*.safetensors"), path / INDEX_FILE]:
        if stale.name not in written and stale.exists():
            stale.unlink()
