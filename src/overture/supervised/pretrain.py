"""Language-model warm-up: next-token training of the policy on the frozen corpus overture ships.

`overture pretrain CONFIG` runs it end to end:
tokenizer (trained here or loaded), model (from scratch or from a checkpoint), AdamW with
warmup and cosine decay, the router's auxiliary loss and balancing bias, held-out loss before
and after, a Hugging Face checkpoint that is reloaded and checked, and a greedy sample. The main
job (`overture train`) runs it as its warm-up before SFT, with `[lm_warmup]`'s windows and
schedule (`LMPhase.of_warmup`) and the demonstrations' tokens added to the corpus (`documents`).

With `parallel.nproc` > 1 it runs on that many processes (`run_parallel`; Ray actors when
`runtime.ray` is set): every rank draws the same windows from the seed and trains on its rows
of them; the loss is the sum of its tokens' cross-entropy over the global token count, and the
router's auxiliary loss is computed from the loads of the whole batch
(`overture.distributed.lm_step`), so each step equals one process's. Rank 0 writes the run
directory, the gathered checkpoint and the sample.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist

from overture.config import ConfigError, LMWarmupConfig, OptimizerConfig, RunConfig, TrainingConfig
from overture.distributed import (
    Meshes,
    all_reduce_floats,
    launches_processes,
    load_balancing_share,
    local_batch,
    meshes_for_run,
    run_parallel,
    unsharded_model,
)
from overture.engine import Engine
from overture.model import CausalLMOutput, Transformer, load_pretrained
from overture.rl.run_dir import RunDir
from overture.rl.setup import build_model, load_tokenizer, run_tokenizer
from overture.rl.trainer import Trainer, check_sharded_training
from overture.runtime.devices import resolve_device
from overture.supervised.sft import prepare_run_dir, silent
from overture.text import Tokenizer, corpus_texts

SAMPLE_PROMPT = "def "


@dataclass(frozen=True)
class LMPhase:
    """A language-model phase's windows and optimizer: `[training]`'s for `overture pretrain`
    (`of_training`), `[lm_warmup]`'s for the main job's warm-up (`of_warmup`)."""

    batch_size: int
    seq_len: int
    optimizer: OptimizerConfig
    section: str  # where batch_size and seq_len are set, for errors

    @classmethod
    def of_training(cls, training: TrainingConfig) -> LMPhase:
        return cls(training.batch_size, training.seq_len, training.optimizer, "training")

    @classmethod
    def of_warmup(cls, warmup: LMWarmupConfig, training: TrainingConfig) -> LMPhase:
        return cls(warmup.batch_size, warmup.seq_len, warmup.optimizer(training), "lm_warmup")


@dataclass
class TokenSplits:
    """The corpus as one token stream per split (documents separated by <|endoftext|>)."""

    train: torch.Tensor
    val: torch.Tensor


def corpus_tokens(
    tokenizer: Tokenizer,
    texts: list[str],
    hold_out_every: int = 10,
    documents: Sequence[Sequence[int]] = (),
    train_only: Sequence[Sequence[int]] = (),
) -> TokenSplits:
    """Encode `texts`, then append `documents` (already token ids), into two streams; every
    `hold_out_every`-th document is held out, so the held-out split mixes source files and
    conversations as the training split does. `train_only` (token ids) go to the training split
    after them, none held out."""
    encoded = [tokenizer.encode(text) for text in texts] + [list(ids) for ids in documents]
    splits: tuple[list[int], list[int]] = ([], [])
    for i, ids in enumerate(encoded):
        held_out = i % hold_out_every == hold_out_every - 1
        splits[held_out].extend([*ids, tokenizer.endoftext_id])
    for ids in train_only:
        splits[0].extend([*ids, tokenizer.endoftext_id])
    return TokenSplits(train=torch.tensor(splits[0]), val=torch.tensor(splits[1]))


def random_windows(
    tokens: torch.Tensor, batch: int, length: int, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """`batch` random windows of `length` inputs and their next-token targets."""
    starts = torch.randint(0, len(tokens) - length - 1, (batch,), generator=generator)
    windows = torch.stack([tokens[s : s + length + 1] for s in starts.tolist()])
    return windows[:, :-1], windows[:, 1:]


@torch.no_grad()
def held_out_loss(
    model: Transformer, tokens: torch.Tensor, length: int, device: torch.device, max_windows: int = 32
) -> float:
    """Mean next-token cross-entropy over evenly spaced, fixed windows of the held-out stream."""
    model.eval()
    count = max(1, min(max_windows, (len(tokens) - 1) // length))
    windows = torch.stack([tokens[i * length : i * length + length + 1] for i in range(count)]).to(device)
    targets = windows[:, 1:]
    loss = (model(windows[:, :-1], targets=targets).target_loss_sum / targets.numel()).item()
    model.train()
    return loss


def greedy_sample(model: Transformer, tokenizer: Tokenizer, prompt: str, new_tokens: int) -> str:
    """`prompt` continued greedily by the engine, the way these weights will be served."""
    prompt_ids = tokenizer.encode(prompt)
    with Engine(model, tokenizer) as engine:
        (completion,) = engine.generate(
            [prompt_ids], max_new_tokens=new_tokens, temperature=0.0, stop_token_ids=[tokenizer.endoftext_id]
        )
    return tokenizer.decode(prompt_ids + completion.token_ids)


def expert_load_cv(tokens_per_expert: torch.Tensor) -> float:
    """Coefficient of variation of per-expert load, averaged over MoE layers (0 = balanced)."""
    if tokens_per_expert.numel() == 0:
        return 0.0
    load = tokens_per_expert.float()
    return (load.std(-1) / load.mean(-1)).mean().item()


def pretrain(
    config: RunConfig,
    overwrite: bool = False,
    echo: Callable[[str], None] = print,
    documents: Sequence[Sequence[int]] = (),
    corpus_exclude: Sequence[str] = (),
    train_documents: Sequence[Sequence[int]] = (),
    phase: LMPhase | None = None,
) -> dict:
    """Train the policy as a language model on the shipped corpus (less the package folders in
    `corpus_exclude`) and `documents` (token ids: the main job's demonstrations, every token of
    them), and `train_documents` in the training split only (token ids: extra copies of code to
    learn by heart), with `phase`'s windows and optimizer (unset: `[training]`'s); returns a
    summary dict (rank 0's when `parallel.nproc` > 1)."""
    phase = phase or LMPhase.of_training(config.training)
    prepared = False
    if launches_processes(config.parallel):
        check_sharded_training(config)
        if phase.batch_size % config.parallel.nproc:
            raise ConfigError(
                f"{phase.section}.batch_size ({phase.batch_size}) must be a multiple of "
                f"parallel.nproc ({config.parallel.nproc}): every process trains on its rows of each batch"
            )
        prepare_run_dir(config, overwrite, resume=False)
        overwrite, prepared = False, True
    args = (config, phase, overwrite, prepared, documents, corpus_exclude, train_documents)
    return run_parallel(pretrain_rank, config.parallel, *args, runtime=config.runtime, echo=echo)[0]


def _lm_loss(
    out: CausalLMOutput, targets: torch.Tensor, model: Transformer, meshes: Meshes | None
) -> tuple[torch.Tensor, float, float, torch.Tensor]:
    """(loss to differentiate, global cross-entropy, global aux loss, tokens per expert) of a step."""
    coef = model.config.router_aux_loss_coef
    if meshes is None:
        ce = out.target_loss_sum / targets.numel()
        return ce + coef * out.aux_loss, ce.item(), out.aux_loss.item(), out.tokens_per_expert
    tokens = targets.numel() * meshes.world_size
    ce_share = out.target_loss_sum / tokens
    aux_share, aux_value = load_balancing_share(out.routes, model.config.num_experts, meshes)
    loss = ce_share + coef * aux_share.to(ce_share.device)
    (ce,) = all_reduce_floats([ce_share.item()], meshes)
    loads = out.tokens_per_expert.clone()
    dist.all_reduce(loads, group=meshes.world_group)
    return loss, ce, float(aux_value), loads


def pretrain_rank(
    config: RunConfig,
    phase: LMPhase,
    overwrite: bool,
    prepared: bool,
    documents: Sequence[Sequence[int]] = (),
    corpus_exclude: Sequence[str] = (),
    train_documents: Sequence[Sequence[int]] = (),
    echo: Callable[[str], None] = print,
) -> dict | None:
    """`pretrain` on this process: the whole run, or this rank's part of a job (`prepared`: the
    launcher made the run directory). Ranks other than 0 return None."""
    torch.manual_seed(config.seed)
    device = resolve_device(config.runtime)
    meshes = meshes_for_run(config.parallel, device.type)
    lead = meshes is None or meshes.rank == 0
    run = RunDir(config, overwrite=overwrite, resume=prepared) if lead else None
    if run is None:
        echo = silent
    started = time.time()

    tokenizer = run_tokenizer(config, run.path, resume=False) if run is not None else load_tokenizer(config)
    texts = corpus_texts(config.tokenizer.corpus, corpus_exclude)
    data = corpus_tokens(tokenizer, texts, documents=documents, train_only=train_documents)
    model = build_model(config, tokenizer, device)
    where = f"{device} x {meshes.world_size} processes" if meshes else f"{device}"
    echo(
        f"run {Path(config.output_dir) / config.name}: {model.num_parameters():,} parameters "
        f"({model.num_parameters(active=True):,} active per token), {len(data.train):,} training tokens, "
        f"vocab {tokenizer.vocab_size}, {where}"
    )
    parameters, active = model.num_parameters(), model.num_parameters(active=True)
    trainer = Trainer(model, config.training, phase.optimizer, meshes=meshes)
    generator = torch.Generator().manual_seed(config.seed)
    # Sharded, every rank evaluates all the windows: the same value everywhere, and every rank
    # takes part in the forward's collectives as it must.
    initial_val = held_out_loss(model, data.val, phase.seq_len, device)
    if run is not None:
        run.log(0, val_loss=initial_val)
    echo(f"step     0  held-out loss {initial_val:.3f}")

    window_start, window_tokens = time.time(), 0
    for step in range(1, phase.optimizer.steps + 1):
        inputs, targets = random_windows(data.train, phase.batch_size, phase.seq_len, generator)
        # Every rank drew the same windows; each trains on its own rows of them.
        inputs, targets = local_batch(inputs, meshes), local_batch(targets, meshes)
        targets = targets.to(device)
        out = model(inputs.to(device), targets=targets)
        loss, ce, aux, loads = _lm_loss(out, targets, model, meshes)
        loss.backward()
        update = trainer.optimizer_step()
        window_tokens += inputs.numel() * (meshes.world_size if meshes else 1)
        if step % config.training.log_every == 0 or step == phase.optimizer.steps:
            elapsed = time.time() - window_start
            metrics = dict(
                loss=ce,
                aux_loss=aux,
                lr=update["lr"],
                grad_norm=update["grad_norm"],
                tokens_per_s=window_tokens / elapsed,
                expert_load_cv=expert_load_cv(loads),
            )
            if step == phase.optimizer.steps:
                metrics["val_loss"] = held_out_loss(model, data.val, phase.seq_len, device)
            if run is not None:
                run.log(step, **metrics)
            echo(
                f"step {step:5d}  loss {ce:.3f}  aux {aux:.3f}  "
                f"load-cv {metrics['expert_load_cv']:.2f}  {metrics['tokens_per_s']:,.0f} tok/s"
            )
            window_start, window_tokens = time.time(), 0

    final_val = held_out_loss(model, data.val, phase.seq_len, device)
    checkpoint = Path(config.output_dir) / config.name / "checkpoints" / "final"
    trainer.save_weights(checkpoint)
    # The checks below read the whole model: rank 0 works on a gathered copy when sharded.
    whole = unsharded_model(model).to(device) if meshes is not None else model
    if run is None:
        return None
    tokenizer.save(checkpoint)
    reload_difference = _reload_difference(whole, checkpoint, data.val[: phase.seq_len][None].to(device))
    sample = greedy_sample(whole, tokenizer, SAMPLE_PROMPT, 48)
    summary = {
        "run_dir": str(run.path),
        "checkpoint": str(checkpoint),
        "parameters": parameters,
        "active_parameters": active,
        "steps": phase.optimizer.steps,
        "initial_val_loss": initial_val,
        "final_val_loss": final_val,
        "reload_max_logit_difference": reload_difference,
        "seconds": round(time.time() - started, 1),
        "sample": sample,
    }
    run.log(phase.optimizer.steps, final_val_loss=final_val, reload_max_logit_difference=reload_difference)
    run.close()
    echo(
        f"held-out loss {initial_val:.3f} -> {final_val:.3f}; checkpoint {checkpoint} "
        f"(reloaded, max logit difference {reload_difference:.1e})"
    )
    echo(f"greedy sample: {sample!r}")
    return summary


def _reload_difference(model: Transformer, checkpoint: Path, ids: torch.Tensor) -> float:
    """Max |logit difference| between the trained model and its reloaded checkpoint."""
    reloaded = load_pretrained(checkpoint, dtype=model.embed_tokens.weight.dtype).to(ids.device).eval()
    model.eval()
    with torch.no_grad():
        difference = (model(ids).logits - reloaded(ids).logits).abs().max().item()
    model.train()
    return difference
