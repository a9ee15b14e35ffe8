"""The rollout engine a run's config asks for (`engine.backend`), opened as an `EngineHandle`.

- `"overture"`: overture's own engine in this process, on the checkpoint's weights (`LocalEngine`).
- `"vllm"`: vLLM servers (`VllmEngine`): those `engine.vllm_urls` names, already serving the
  checkpoint, or else one started here on 127.0.0.1 from it, supervised (restarted if it dies)
  and stopped on close, its log `vllm-server.log` in `log_dir`, its KV cache sized as overture's
  engine's (`engine.kv_cache_tokens` tokens of the model's keys and values in the server's dtype,
  not a share of the machine's memory). Requests stop at the end-of-turn
  token and sample at `engine.temperature` / `top_p`, as overture's engine does; its repeat guard
  (`engine.max_repeats`) has no vLLM counterpart.

Either way the caller sees one handle: `version`, `policy(**sampling)`, `update_weights`.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path

import torch

from overture.config import ModelConfig, RunConfig
from overture.engine import Engine
from overture.engine.vllm_client import VllmClient
from overture.engine.vllm_server import VllmServer
from overture.model import load_pretrained, read_model_config
from overture.orchestration.orchestrator import EngineHandle, LocalEngine
from overture.orchestration.vllm_engine import VllmEngine
from overture.text import Tokenizer


@contextlib.contextmanager
def open_rollout_engine(
    config: RunConfig,
    checkpoint: Path,
    tokenizer: Tokenizer,
    *,
    version: int,
    device: torch.device,
    dtype: torch.dtype,
    log_dir: Path,
) -> Iterator[EngineHandle]:
    """The configured engine serving `checkpoint` (a Hugging Face directory) as `version`."""
    if config.engine.backend == "overture":
        model = load_pretrained(checkpoint, dtype=dtype).to(device)
        engine = Engine(model, tokenizer, config=config.engine, version=version)
        try:
            yield LocalEngine(engine)
        finally:
            engine.close()
        return
    model_config = read_model_config(checkpoint)
    context = config.engine.max_model_len or model_config.max_position_embeddings
    with contextlib.ExitStack() as stack:
        urls, servers = list(config.engine.vllm_urls), []
        if not urls:
            per_token = kv_bytes_per_token(model_config, config.engine.vllm_dtype)
            cache_bytes = config.engine.kv_cache_tokens * per_token
            server = VllmServer(
                checkpoint,
                log_dir / "vllm-server.log",
                dtype=config.engine.vllm_dtype,
                max_model_len=context,
                extra_args=["--kv-cache-memory-bytes", str(cache_bytes)],
            )
            servers = [stack.enter_context(server)]
            urls = [server.url]
        yield VllmEngine(
            [VllmClient(url) for url in urls],
            model_config,
            log_dir / "vllm-weights",
            max_model_len=context,
            version=version,
            servers=servers,
            temperature=config.engine.temperature,
            top_p=config.engine.top_p,
            stop_token_ids=[tokenizer.im_end_id],
        )


@contextlib.contextmanager
def open_checkpoint_engine(
    config: RunConfig, checkpoint: Path, tokenizer: Tokenizer
) -> Iterator[EngineHandle]:
    """`open_rollout_engine` for a checkpoint served once (`overture eval`, `overture agent`, the
    backends benchmark): version 0, float32 on the CPU, a started server's log in a temporary
    folder removed on close."""
    with (
        tempfile.TemporaryDirectory(prefix="overture-engine-") as scratch,
        open_rollout_engine(
            config, checkpoint, tokenizer, version=0, device=torch.device("cpu"), dtype=torch.float32,
            log_dir=Path(scratch),
        ) as engine,
    ):  # fmt: skip
        yield engine


def kv_bytes_per_token(model: ModelConfig, dtype: str) -> int:
    """Bytes of keys and values one token takes in every layer (`auto` = the checkpoint's float32)."""
    element = 2 if dtype == "bfloat16" else 4
    return 2 * model.num_hidden_layers * model.num_key_value_heads * model.head_dim * element
