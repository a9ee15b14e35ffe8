"""Comparing weights trained two ways (sharded and in one process) after AdamW steps."""

from __future__ import annotations

from collections.abc import Mapping

import torch

# Share of a tensor's elements (at least one) allowed outside the float tolerance.
OUTLIER_SHARE = 1e-3


def assert_weights_match(
    got: torch.Tensor,
    expected: torch.Tensor,
    *,
    rtol: float,
    atol: float,
    lr: float,
    steps: int,
    name: str = "",
) -> None:
    """`got` is `expected` within (rtol, atol), but for a few elements that differ by less than
    two AdamW steps per optimizer step.

    AdamW moves an element by about lr·m/√v whatever the size of its gradient. Where the gradient
    is near zero, the rounding noise of sums taken in another order (another process layout,
    another CPU's kernels) is not small against it, so that element can land anywhere within the
    learning rate's reach. A sharding, layout or reduction bug moves many elements, or moves them
    further: at most one element in a thousand (one per tensor at least) may be outside the
    tolerance, and none by 2 × lr × steps or more.
    """
    assert got.shape == expected.shape, f"{name}: shape {tuple(got.shape)}, expected {tuple(expected.shape)}"
    outside = ~torch.isclose(got, expected, rtol=rtol, atol=atol)
    outliers = int(outside.sum())
    allowed = max(1, int(OUTLIER_SHARE * got.numel()))
    worst = float((got - expected).abs().max()) if got.numel() else 0.0
    bound = 2 * lr * steps
    if outliers > allowed or worst >= bound:
        raise AssertionError(
            f"{name}: {outliers} of {got.numel()} elements outside rtol={rtol:g}, atol={atol:g} "
            f"(at most {allowed} may be), largest difference {worst:.3g} (must stay under 2 x lr x "
            f"steps = {bound:g})"
        )


def assert_state_dicts_match(
    got: Mapping[str, torch.Tensor],
    expected: Mapping[str, torch.Tensor],
    *,
    rtol: float,
    atol: float,
    lr: float,
    steps: int,
) -> None:
    """`assert_weights_match` on every tensor of two state dicts with the same keys."""
    assert got.keys() == expected.keys()
    for name, value in expected.items():
        assert_weights_match(got[name], value, rtol=rtol, atol=atol, lr=lr, steps=steps, name=name)
