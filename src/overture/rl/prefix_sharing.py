"""Shared prefixes: samples that begin with the same untrained tokens compute them once.

The samples of an RL group begin with the same prompt (system message with the tools' schemas,
the task), often most of their length, and every sample of a batch begins with the same system
message. Position t (input token t, target token t + 1) can be computed once for several samples
when their tokens 0..t+1 agree and none of them trains on it: it is then the same computation for
each, and the samples' later positions attend to the one copy exactly as they would to their own.
Gradients agree too: what each sample's loss sends back through the shared positions adds up
there, as it would over the copies. One difference: the router's balancing loss counts a shared
token once, not once per sample.

`prefix_units` builds the tree of shared runs (a node: positions [start, end) that a set of
samples shares; a leaf: the rest of one sample) and cuts it into units. A unit is a subtree laid
out depth first as one contiguous piece; in it a position attends to the earlier positions of its
own segment and of the segments above it, one attention call a segment
(`overture.model.segments`). Sharing saves positions, but a segment below others computes its
whole block of own keys (the mask path has no causal skipping), so a sample joins the unit of
the samples before it only while that costs less than laying it out alone, by a model of a unit's
cost in attention query-key pairs: l²/2 for a segment with nothing above it (causal attention),
l·(a + l) for a segment of l positions below a of them, L²/2 for a unit of one sample (one causal
segment), plus `position_cost` pairs for each position's other work (projections, MLP or experts,
LM head; `position_cost(config)` estimates it from the model's shape). Without common prefixes
every unit is one sample.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from overture.config import ModelConfig
from overture.rl.samples import TrainingSample


@dataclass
class Segment:
    """Positions [start, end) of `sample` (for a shared run: the first of the samples sharing it);
    `parent` is the index, in the unit's segment list, of the segment before it in every sample
    that runs through it (None at the top)."""

    sample: int
    start: int
    end: int
    parent: int | None

    @property
    def length(self) -> int:
        return self.end - self.start


@dataclass
class Unit:
    """Segments laid out in order as one contiguous piece of a row."""

    segments: list[Segment] = field(default_factory=list)
    samples: int = 0  # samples whose trained positions are in this unit

    @property
    def length(self) -> int:
        return sum(segment.length for segment in self.segments)


def unit_cost(unit: Unit, position_cost: float) -> float:
    """The cost model of the module docstring, in attention query-key pairs."""
    if unit.samples <= 1:
        return unit.length * unit.length / 2 + position_cost * unit.length
    above: list[int] = []  # positions above each segment
    attention = 0.0
    for segment in unit.segments:
        if segment.parent is None:
            above.append(0)
            attention += segment.length * segment.length / 2
        else:
            above.append(above[segment.parent] + unit.segments[segment.parent].length)
            attention += segment.length * (above[-1] + segment.length)
    return attention + position_cost * unit.length


def position_cost(config: ModelConfig) -> float:
    """One position's multiply-adds outside attention's score and value products, in units of
    one query-key pair's (2 · heads · head_dim per layer): its q/k/v/o projections, its MLP or
    active experts and router, and its share of the LM head, averaged over the layers."""
    hidden, heads, head_dim = config.hidden_size, config.num_attention_heads, config.head_dim
    projections = hidden * (2 * heads + 2 * config.num_key_value_heads) * head_dim
    per_layer = 0
    for layer in range(config.num_hidden_layers):
        if config.is_moe_layer(layer):
            experts = 3 * hidden * config.moe_intermediate_size * config.num_experts_per_tok
            shared = 3 * hidden * (config.shared_expert_intermediate_size or 0)
            per_layer += projections + experts + shared + hidden * config.num_experts
        else:
            per_layer += projections + 3 * hidden * config.intermediate_size
    layers = config.num_hidden_layers
    return (per_layer / layers + config.vocab_size * hidden / layers) / (2 * heads * head_dim)


@dataclass
class _Node:
    sample: int
    start: int
    end: int
    children: list[_Node]
    leaf: bool


def _prefix_tree(samples: Sequence[TrainingSample]) -> list[_Node]:
    """The top nodes of the tree of shared runs, children in the samples' order."""
    positions = [len(s.token_ids) - 1 for s in samples]
    # Positions before a sample's first trained one.
    untrained = [_first_trained_position(s) for s in samples]

    def shareable(index: int, position: int) -> bool:
        return position < untrained[index]

    def key(index: int, position: int) -> tuple:
        tokens = samples[index].token_ids
        return (tokens[position], tokens[position + 1]) if shareable(index, position) else ("own", index)

    def grow(indices: list[int], depth: int) -> list[_Node]:
        groups: dict[tuple, list[int]] = {}
        for index in indices:
            if depth < positions[index]:  # a sample wholly inside the shared run above has ended
                groups.setdefault(key(index, depth), []).append(index)
        nodes = []
        for members in groups.values():
            first = members[0]
            if len(members) == 1:
                nodes.append(_Node(first, depth, positions[first], [], leaf=True))
                continue
            # Shared while every member is untrained there and the targets agree (the inputs
            # agree already: each input is the target one position before).
            targets = [samples[i].token_ids[depth + 1 :] for i in members]
            agreeing = _common_prefix_length(targets)
            end = min(depth + agreeing, *(untrained[i] for i in members))
            nodes.append(_Node(first, depth, end, grow(members, end), leaf=False))
        return nodes

    return grow(list(range(len(samples))), 0)


def _first_trained_position(sample: TrainingSample) -> int:
    """Position t trains on token t + 1; its number of positions when none trains."""
    mask = sample.loss_mask
    return mask.index(1, 1) - 1 if 1 in mask[1:] else len(mask) - 1


def _common_prefix_length(lists: list[list[int]]) -> int:
    """How many leading elements all `lists` share (the lexicographic least and greatest share
    exactly those); compared a slice at a time."""
    low, high = min(lists), max(lists)
    length = min(len(low), len(high))
    at = 0
    while at < length and low[at : at + 64] == high[at : at + 64]:
        at += 64
    while at < length and low[at] == high[at]:
        at += 1
    return min(at, length)


def _leaf_chains(nodes: list[_Node], above: tuple[_Node, ...] = ()) -> Iterator[tuple[_Node, ...]]:
    """Every leaf with the nodes above it (top first), depth first."""
    for node in nodes:
        chain = (*above, node)
        if node.leaf:
            yield chain
        else:
            yield from _leaf_chains(node.children, chain)


def prefix_units(samples: Sequence[TrainingSample], token_budget: int, position_cost: float) -> list[Unit]:
    """The samples' positions as units (see the module docstring), every trained position in
    exactly one of them."""
    units: list[Unit] = []
    placed: dict[int, int] = {}  # id(node) -> its index in the last unit's segments
    for chain in _leaf_chains(_prefix_tree(samples)):
        # The sample alone, kept as its chain's segments so that later samples can join below them.
        alone = Unit(
            [
                Segment(node.sample, node.start, node.end, depth - 1 if depth else None)
                for depth, node in enumerate(chain)
            ],
            1,
        )
        unit = units[-1] if units else None
        if unit is not None:
            grown, grown_placed = _joined(unit, placed, chain)
            apart = unit_cost(unit, position_cost) + unit_cost(alone, position_cost)
            if grown.length <= token_budget and unit_cost(grown, position_cost) < apart:
                units[-1], placed = grown, grown_placed
                continue
        units.append(alone)
        placed = {id(node): depth for depth, node in enumerate(chain)}
    # A unit of one sample is that sample from its first position, as one segment: no layout.
    for unit in units:
        if unit.samples == 1:
            last = unit.segments[-1]
            unit.segments = [Segment(last.sample, 0, last.end, None)]
    return units


def _joined(unit: Unit, placed: dict[int, int], chain: tuple[_Node, ...]) -> tuple[Unit, dict[int, int]]:
    """`unit` with the leaf of `chain` (and the nodes above it not yet in the unit) added below the
    segments it shares, and where each node now is."""
    segments, placed = list(unit.segments), dict(placed)
    for depth, node in enumerate(chain):
        if id(node) in placed:
            continue
        parent = placed[id(chain[depth - 1])] if depth else None
        placed[id(node)] = len(segments)
        segments.append(Segment(node.sample, node.start, node.end, parent))
    return Unit(segments, unit.samples + 1), placed
