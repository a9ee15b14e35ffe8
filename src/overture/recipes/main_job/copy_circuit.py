"""An induction circuit written into fresh weights, so that a small policy copies from step 0.

A coding agent copies all the time: a name from the report into a search, a line number from the
search into a read, a line of a listing into an edit. Transformers copy with induction heads
(Olsson et al., 2022): one head moves each token's predecessor into its residual stream, a head
of a later layer attends from the current token to the position after its earlier occurrence and
writes that position's token. Small models trained from scratch form them late: the tiny policy
had none after its whole warm-up (docs/experiments/induction-heads.md). `install_copy_circuit`
writes one into layers 0 and 1 of a freshly initialised `Transformer`, as ordinary Qwen3 weights
(the main job applies it to the weights it starts from, with `main_job.copy_circuit`):

- The residual stream is split: dimension 0 holds a constant (every embedding's first entry, so
  the tied LM head adds the same logit to every token), the next `t` dimensions the token's
  content (random embeddings), the `t` after them its predecessor's content.
- Layer 0 is a previous-token head. Its queries and keys read only the constant dimension, so
  they are the same vectors at every position and the score depends on the distance alone,
  through the rotary angles; the amplitudes of the fast rotary pairs are chosen (a linear
  program) so that distance 1 beats every other distance up to the context length by the widest
  margin. Its values copy the token content into the predecessor dimensions.
- Layer 1 is the induction head. Its queries read the current token's content and its keys the
  predecessor's, in the slow rotary pairs (which turn little over a context), so a key matches
  where the token before it is the current one; its values write that position's token content
  back where the LM head reads it.
- Every MLP and expert down projection, and the attention outputs of the later layers and of the
  heads the circuit does not use, start at zero, so that nothing random drowns the copy; they
  learn from the first step.

The weights are a plain Qwen3-MoE checkpoint (`transformers` loads and runs them unchanged);
training then keeps, reshapes or drops the circuit as the data asks.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import torch

from overture.config import ModelConfig
from overture.model.attention import Attention

if TYPE_CHECKING:
    from overture.model.transformer import Transformer

# The constant dimension's value. Token vectors have norm 1, so after the input RMSNorm both the
# constant (which layer 0's queries and keys read) and the content keep a comparable share.
CONSTANT = 1.0
# q/k RMSNorm weights: the attention score is sqrt(head_dim) * w**2 * cosine. For the positional
# head, a large w makes the distance-1 margin (about 0.21 of the score) several nats; for the
# matching head, w**2 * sqrt(head_dim) near 1 / variance of a random cosine (1 / 16 slow dims)
# puts most of the attention on the match among a few hundred positions.
PREVIOUS_TOKEN_NORM = 3.0
MATCH_NORM = 1.7
# Gains of the two heads' outputs: the induction head's copy must outweigh the current token's
# own embedding, which the tied LM head otherwise reads as "this token again".
PREVIOUS_TOKEN_GAIN = 1.0
INDUCTION_GAIN = 4.0


def previous_token_amplitudes(
    rope_theta: float, head_dim: int, pairs: int, horizon: int
) -> tuple[np.ndarray, np.ndarray, float]:
    """Rotary frequencies of the first `pairs` pairs, the share of a positional score to give each,
    and the margin it reaches: distance 1 scores at least `margin` (of a unit score) above every
    other distance below `horizon`."""
    try:
        from scipy.optimize import linprog
    except ImportError:
        raise RuntimeError(
            "main_job.copy_circuit needs scipy (its linear program): pip install 'overture[main-job]'"
        ) from None
    freqs = rope_theta ** (-np.arange(pairs) * 2 / head_dim)
    distances = np.delete(np.arange(horizon), 1)
    shortfall = 1 - np.cos(np.outer(distances - 1, freqs))  # what each pair loses at each distance
    # maximize m subject to shortfall @ a >= m, sum(a) = 1, a >= 0 (variables: a, then m)
    result = linprog(
        c=np.r_[np.zeros(pairs), -1.0],
        A_ub=np.hstack([-shortfall, np.ones((len(distances), 1))]),
        b_ub=np.zeros(len(distances)),
        A_eq=np.r_[np.ones(pairs), 0.0][None],
        b_eq=[1.0],
        bounds=[(0, None)] * pairs + [(None, None)],
    )
    if not result.success:
        raise RuntimeError(f"previous-token amplitudes: linear program failed ({result.message})")
    return freqs, result.x[:pairs], float(result.x[-1])


def token_dimensions(config: ModelConfig) -> int:
    """How many residual dimensions hold a token's content (as many hold its predecessor's)."""
    return (config.hidden_size - 1) // 2


def check_copy_circuit_shape(config: ModelConfig) -> None:
    """A clear error when the shape in `config` cannot hold the circuit, naming what is short."""
    token_dims = token_dimensions(config)
    problems = []
    if config.num_hidden_layers < 2:
        problems.append(f"num_hidden_layers is {config.num_hidden_layers}; the circuit needs 2")
    if config.head_dim % 4:
        problems.append(f"head_dim ({config.head_dim}) must be a multiple of 4")
    if config.num_key_value_heads * config.head_dim < token_dims:
        problems.append(
            f"num_key_value_heads x head_dim ({config.num_key_value_heads * config.head_dim}) must "
            f"hold the {token_dims} token dimensions of hidden_size {config.hidden_size}"
        )
    if config.num_key_value_heads * (config.head_dim // 2) > token_dims:
        problems.append(f"hidden_size ({config.hidden_size}) is too small for the matching heads")
    if problems:
        raise ValueError("main_job.copy_circuit: " + "; ".join(problems))


@torch.no_grad()
def install_copy_circuit(model: Transformer) -> None:
    """Overwrite `model`'s embeddings and its first two attention layers with the circuit (module
    docstring), and zero the residual branches that would add noise to it. The token vectors are
    drawn from torch's global generator, as the rest of the initialisation is."""
    config = model.config
    check_copy_circuit_shape(config)
    head_dim = config.head_dim
    token_dims = token_dimensions(config)
    token, previous = 1, 1 + token_dims  # first dimension of each part of the residual stream

    embed = model.embed_tokens.weight
    embed.zero_()
    embed[:, 0] = CONSTANT
    embed[:, token : token + token_dims] = torch.randn(embed.shape[0], token_dims) / math.sqrt(token_dims)
    if not config.tie_word_embeddings:
        model.lm_head.weight.copy_(embed)

    half = head_dim // 2
    fast, slow = range(half // 2), range(half // 2, half)  # rotary pairs i and i + half
    _previous_token_head(model.layers[0].self_attn, config, fast, token, previous, token_dims)
    _induction_head(model.layers[1].self_attn, config, slow, token, previous, token_dims)
    for index, layer in enumerate(model.layers):
        for name, parameter in layer.mlp.named_parameters():
            if "down" in name:
                parameter.zero_()
        if index >= 2:
            layer.self_attn.o_proj.weight.zero_()


def _groups(config: ModelConfig) -> range:
    return range(config.num_key_value_heads)


def _first_head(config: ModelConfig, group: int) -> int:
    return group * (config.num_attention_heads // config.num_key_value_heads)


def _copy_token_content(
    attention: Attention, config: ModelConfig, source: int, target: int, dims: int, gain: float
) -> None:
    """Values carry the token content (`dims` dimensions from `source`), split over the key/value
    heads; the first query head of each group writes them, times `gain`, from `target` on."""
    head_dim = config.head_dim
    for group in _groups(config):
        for j in range(min(head_dim, dims - group * head_dim)):
            offset = group * head_dim + j
            attention.v_proj.weight[group * head_dim + j, source + offset] = 1.0
            attention.o_proj.weight[target + offset, _first_head(config, group) * head_dim + j] = gain


def _clear(attention: Attention) -> None:
    for projection in (attention.q_proj, attention.k_proj, attention.v_proj, attention.o_proj):
        projection.weight.zero_()


def _previous_token_head(
    attention: Attention, config: ModelConfig, pairs: range, token: int, previous: int, dims: int
) -> None:
    head_dim, half = config.head_dim, config.head_dim // 2
    freqs, amplitudes, _ = previous_token_amplitudes(
        config.rope_theta, head_dim, len(pairs), config.max_position_embeddings
    )
    _clear(attention)
    # A query (a, 0) at position m and a key a(cos f, sin f) at n score a^2 cos((n - m + 1) f)
    # under the rotary embedding: highest where n = m - 1.
    for head in range(config.num_attention_heads):
        for i, amplitude in zip(pairs, amplitudes, strict=True):
            attention.q_proj.weight[head * head_dim + i, 0] = math.sqrt(amplitude)
    for group in _groups(config):
        for i, freq, amplitude in zip(pairs, freqs, amplitudes, strict=True):
            attention.k_proj.weight[group * head_dim + i, 0] = math.sqrt(amplitude) * math.cos(freq)
            attention.k_proj.weight[group * head_dim + i + half, 0] = math.sqrt(amplitude) * math.sin(freq)
    attention.q_norm.weight.fill_(PREVIOUS_TOKEN_NORM)
    attention.k_norm.weight.fill_(PREVIOUS_TOKEN_NORM)
    _copy_token_content(attention, config, token, previous, dims, PREVIOUS_TOKEN_GAIN)


def _induction_head(
    attention: Attention, config: ModelConfig, pairs: range, token: int, previous: int, dims: int
) -> None:
    head_dim, half = config.head_dim, config.head_dim // 2
    _clear(attention)
    slow_dims = [*pairs, *(i + half for i in pairs)]
    heads_per_group = config.num_attention_heads // config.num_key_value_heads
    # Group g matches its own slice of the token content: the query reads it at the current
    # position, the key the same slice of the predecessor's copy.
    for group in _groups(config):
        for index, dim in enumerate(slow_dims):
            content = group * len(slow_dims) + index
            attention.k_proj.weight[group * head_dim + dim, previous + content] = 1.0
            for head in range(group * heads_per_group, (group + 1) * heads_per_group):
                attention.q_proj.weight[head * head_dim + dim, token + content] = 1.0
    attention.q_norm.weight.fill_(MATCH_NORM)
    attention.k_norm.weight.fill_(MATCH_NORM)
    _copy_token_content(attention, config, token, token, dims, INDUCTION_GAIN)
