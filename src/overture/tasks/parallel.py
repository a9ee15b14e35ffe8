"""Running one coroutine per item with a bound on how many run at once, results in item order."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


async def map_bounded(
    items: Sequence[Item],
    work: Callable[[Item], Awaitable[Result]],
    limit: int,
    on_done: Callable[[Result], None] | None = None,
) -> list[Result]:
    """`await work(item)` for every item, at most `limit` at a time; `on_done` sees each result."""
    if limit < 1:
        raise ValueError(f"at least one item must run at a time (got limit {limit})")
    gate = asyncio.Semaphore(limit)

    async def one(item: Item) -> Result:
        async with gate:
            result = await work(item)
        if on_done is not None:
            on_done(result)
        return result

    return list(await asyncio.gather(*(one(item) for item in items)))
