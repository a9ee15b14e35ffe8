"""A vLLM worker extension that reloads weights from a Hugging Face checkpoint directory.

This module runs inside the vLLM server's worker processes, not in overture's: the server is
started with this folder alone on its PYTHONPATH and `--worker-extension-cls
overture_vllm_extension.WeightReloadExtension`, and vLLM mixes the class into its worker. So it
imports only the standard library, torch and vllm. Clients call its method through the server's
`/collective_rpc` endpoint (`VllmClient.update_weights`).

Why a reload needs more than vLLM's own `reload_weights`: on CPU the unquantized fused-MoE layers
keep their experts in a prepacked grouped-GEMM layout, made once after the first load. A reload
copies the new experts in checkpoint layout into that storage but does not prepack them again,
so every MoE layer would compute with scrambled experts. After the reload this extension runs
each CPU expert kernel's own post-load step (padding and prepacking) on its layer once more.
The LM head needs the same: on CPU its GEMM runs on a packed copy of its weight, made once; a
checkpoint with tied embeddings has no LM head of its own, so the reload refreshes the embedding
but never the head's copy (measured: logprobs off by up to 4.4 after an update). The extension
ties the head to the embedding again where the model ties them and packs its weight anew.
The caller resets the prefix cache afterwards: cached keys and values belong to the old weights.
"""

from __future__ import annotations

import os
import time
from typing import Any

import torch


def _cpu_expert_kernels(model: torch.nn.Module) -> list[tuple[torch.nn.Module, Any]]:
    """(layer, experts kernel) for every fused-MoE layer whose experts run on vLLM's CPU kernel."""
    from vllm.model_executor.layers.fused_moe.experts.cpu_moe import CPUUnquantizedExperts

    found = []
    for layer in model.modules():
        kernel = getattr(getattr(layer, "quant_method", None), "moe_kernel", None)
        experts = getattr(kernel, "fused_experts", None)
        if isinstance(experts, CPUUnquantizedExperts):
            found.append((layer, experts))
    return found


def _refuse_padded_experts(kernels: list[tuple[torch.nn.Module, Any]]) -> None:
    """Raise before anything changes if a layer's experts were padded after loading: vLLM's in-place
    reload copies checkpoint-shaped experts into the padded storage and fails halfway."""
    for _, experts in kernels:
        config = experts.moe_config
        width = config.intermediate_size_per_partition
        padded = experts._padded_intermediate_size(config)
        if padded != width:
            raise ValueError(
                f"cannot reload MoE experts in place: their intermediate width {width} is padded to "
                f"{padded} by vLLM's CPU kernel; use a moe_intermediate_size that is a multiple of "
                f"{experts._intermediate_alignment()}"
            )


def _refresh_lm_heads(model: torch.nn.Module) -> int:
    """Tie each LM head to the embedding again where the model ties them, and let its linear
    method prepare its weight anew (on CPU: the packed copy its GEMM uses). Returns the count."""
    from vllm.model_executor.layers.vocab_parallel_embedding import ParallelLMHead

    tied = getattr(getattr(model, "config", None), "tie_word_embeddings", False)
    embed = getattr(getattr(model, "model", None), "embed_tokens", None)
    heads = [module for module in model.modules() if isinstance(module, ParallelLMHead)]
    for head in heads:
        if tied and embed is not None and head.weight is not embed.weight:
            head.weight = embed.weight
        head.quant_method.process_weights_after_loading(head)
    return len(heads)


class WeightReloadExtension:
    """Methods vLLM adds to its worker class (their names must not clash with the worker's)."""

    def overture_reload_weights(self, checkpoint_dir: str) -> dict[str, Any]:
        """Load every weight of `checkpoint_dir` into the served model in place, then prepack the
        CPU MoE experts again. Returns what it did, for the caller's log."""
        if not os.path.isfile(os.path.join(checkpoint_dir, "config.json")):
            raise FileNotFoundError(f"{checkpoint_dir}: no config.json (not a Hugging Face checkpoint)")
        kernels = _cpu_expert_kernels(self.model_runner.get_model())
        _refuse_padded_experts(kernels)
        start = time.perf_counter()
        self.reload_weights(weights_path=checkpoint_dir, is_checkpoint_format=True)
        loaded = time.perf_counter()
        with torch.no_grad():
            for layer, experts in kernels:
                experts.process_weights_after_loading(layer)
            heads = _refresh_lm_heads(self.model_runner.get_model())
        return {
            "checkpoint_dir": checkpoint_dir,
            "reload_s": loaded - start,
            "repack_s": time.perf_counter() - loaded,
            "moe_layers_repacked": len(kernels),
            "lm_heads_refreshed": heads,
        }
