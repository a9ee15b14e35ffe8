"""The repeat guard: tokens that would extend a back-to-back loop of a short span are not sampled.

A small policy that samples one repeat too many can fall into a loop (`total total total …`,
`initinitinit…`) that an induction head keeps going until the token budget runs out. With
`SamplingParams.max_repeats = R`, a token is never sampled if, with it, the completion would end
in more than R back-to-back copies of one span of at most `repeat_span` tokens; the row's
distribution is renormalised over the other tokens, and the logprob reported is that one, so the
trainer's importance weights correct for the guard like for any other behaviour policy. Copying
from the prompt is untouched: only the completion's own tokens are looked at.
"""

from __future__ import annotations

from collections.abc import Sequence


def banned_continuations(tokens: Sequence[int], max_repeats: int, repeat_span: int) -> set[int]:
    """Tokens that would make `tokens` end in `max_repeats` + 1 back-to-back copies of a span of
    1..`repeat_span` tokens (none when `max_repeats` is 0)."""
    banned: set[int] = set()
    if max_repeats < 1:
        return banned
    copies = max_repeats + 1
    n = len(tokens)
    for span in range(1, repeat_span + 1):
        window = copies * span - 1  # the tokens before the one that would complete the last copy
        if window > n:
            break
        start = n - window
        if all(tokens[i] == tokens[i + span] for i in range(start, n - span)):
            banned.add(tokens[n - span])
    return banned
