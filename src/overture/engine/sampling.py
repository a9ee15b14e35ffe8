"""Choosing the next token of every sequence in a batch, with the logprob it was sampled with.

Randomness comes from one uniform number per sequence and step, drawn by the caller from that
sequence's own seeded stream; the token is the inverse CDF of its distribution at that number.
A sequence's samples therefore depend only on its seed and its logits, never on which other
sequences share the batch, so batched, unbatched and prefix-shared runs agree.

On CPU, a float32 batch whose rows neither top-k nor top-p truncate is sampled by a C kernel
(`native_sampling`) with the same rule; everything else by the torch ops below.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from overture.engine import native_sampling


@dataclass
class BatchSampling:
    """Per-row sampling settings of one batch."""

    temperatures: list[float]
    top_ks: list[int]
    top_ps: list[float]
    uniforms: list[float]  # in [0, 1); ignored by greedy rows


def _truncate(scaled: torch.Tensor, top_ks: list[int], top_ps: list[float]) -> torch.Tensor:
    """Set to -inf every logit outside its row's top-k and top-p (nucleus) sets."""
    sorted_logits, order = torch.sort(scaled, dim=-1, descending=True)
    vocab = scaled.shape[-1]
    ranks = torch.arange(vocab, device=scaled.device)
    k = torch.tensor([k if k > 0 else vocab for k in top_ks], device=scaled.device)
    drop = ranks[None, :] >= k[:, None]
    probs = torch.softmax(sorted_logits, dim=-1)
    # Keep the smallest prefix whose mass reaches top_p: a token stays while the mass before it is < p.
    mass_before = torch.cumsum(probs, dim=-1) - probs
    p = torch.tensor(top_ps, device=scaled.device, dtype=probs.dtype)
    drop |= mass_before >= p[:, None]
    drop[:, 0] = False
    sorted_logits = sorted_logits.masked_fill(drop, float("-inf"))
    return torch.empty_like(scaled).scatter_(-1, order, sorted_logits)


def sample(
    logits: torch.Tensor, settings: BatchSampling, native: bool = True
) -> tuple[list[int], list[float]]:
    """Tokens and their logprobs for B×V float32 `logits` (see `SamplingParams` for which logprob);
    `native`: through the C kernel where it can serve the batch."""
    truncating = any(k > 0 for k in settings.top_ks) or any(p < 1 for p in settings.top_ps)
    if native and not truncating and native_sampling.supports(logits):
        return native_sampling.sample_rows(logits, settings.temperatures, settings.uniforms)
    device = logits.device
    temps = torch.tensor(settings.temperatures, device=device, dtype=logits.dtype)
    greedy = temps == 0
    scaled = logits / torch.where(greedy, 1.0, temps)[:, None]
    if truncating:
        truncated = _truncate(scaled, settings.top_ks, settings.top_ps)
        scaled = torch.where(greedy[:, None], scaled, truncated)
    logprobs = torch.log_softmax(scaled, dim=-1)
    if all(t == 0 for t in settings.temperatures):
        tokens = logits.argmax(dim=-1)
    else:
        tokens = _inverse_cdf(logprobs.exp(), settings.uniforms)
        if bool(greedy.any()):
            tokens = torch.where(greedy, logits.argmax(dim=-1), tokens)
    chosen = logprobs.gather(-1, tokens[:, None])[:, 0]
    return tokens.tolist(), chosen.tolist()


def _inverse_cdf(probs: torch.Tensor, uniforms: list[float]) -> torch.Tensor:
    """The token whose cumulative-probability interval holds each row's uniform number.

    u is scaled by the row's total and kept at least one ulp below it, so rounding in the
    cumulative sum can neither push u past the last token nor land on a token of probability
    zero (its interval is empty).
    """
    cdf = torch.cumsum(probs, dim=-1)
    u = torch.tensor(uniforms, device=probs.device, dtype=cdf.dtype).clamp(0, 1 - 2**-23) * cdf[:, -1]
    return torch.searchsorted(cdf, u[:, None], right=True)[:, 0].clamp_max(cdf.shape[-1] - 1)
