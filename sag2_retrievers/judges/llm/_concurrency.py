"""Requests in flight to a model server: a limit that backs off when the server falls behind,
awaiting a round's calls together (the first alone to warm the cache), and batch planning.

A server with fewer slots than the judge's concurrency queues the extra requests, and the
judge's timeout counts that queueing; a request abandoned at its timeout is still computed
by the server, so re-sending it at the same concurrency only lengthens the queue (a retry
storm). On a timeout (or a 429/503) the limit halves; each success then widens it by about
one request per round trip, back up to the ceiling, as TCP's congestion window does.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator, Awaitable, Iterable, Sequence
from contextlib import asynccontextmanager
from typing import TypeVar

T = TypeVar("T")


class AdaptiveLimit:
    """At most ``limit`` attempts in flight on one event loop, ``1 <= limit <= ceiling``."""

    def __init__(self, ceiling: int) -> None:
        self.ceiling = ceiling
        self._window = float(ceiling)
        self._in_flight = 0
        self._changed = asyncio.Condition()

    @property
    def limit(self) -> int:
        """The attempts allowed in flight now."""
        return max(1, math.floor(self._window))

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold one slot for one attempt, waiting while the limit is reached."""
        async with self._changed:
            await self._changed.wait_for(lambda: self._in_flight < self.limit)
            self._in_flight += 1
        try:
            yield
        finally:
            async with self._changed:
                self._in_flight -= 1
                self._changed.notify_all()

    def overloaded(self) -> None:
        """An attempt timed out or was turned away: halve the limit (never below one)."""
        self._window = max(1.0, self._window / 2.0)

    def succeeded(self) -> None:
        """An attempt got its reply: widen the limit by 1/limit, up to the ceiling."""
        self._window = min(float(self.ceiling), self._window + 1.0 / self._window)


async def gather_or_cancel(coroutines: Iterable[Awaitable[T]]) -> list[T]:
    """Run awaitables concurrently; on any failure or cancellation, cancel and await the rest."""
    tasks = [asyncio.ensure_future(coroutine) for coroutine in coroutines]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


async def gather_warm_first(coroutines: Iterable[Awaitable[T]], warm_first: bool) -> list[T]:
    """Like `gather_or_cancel`, but with ``warm_first`` the first awaitable runs alone.

    The calls of a round share their prompt's opening; awaiting the first before starting
    the rest lets the server's prefix cache hold that opening for all of them.
    """
    pending = iter(coroutines)
    if not warm_first:
        return await gather_or_cancel(pending)
    first = next(pending, None)
    if first is None:
        return []
    try:
        opened = await first
    except BaseException:
        for rest in pending:
            _discard(rest)
        raise
    return [opened, *await gather_or_cancel(pending)]


def _discard(awaitable: Awaitable[object]) -> None:
    """Close an awaitable that will never run, so no 'never awaited' warning is raised."""
    close = getattr(awaitable, "close", None)
    if close is not None:
        close()


def plan_batches(
    shared_size: int, sizes: Sequence[int], budget: int, max_items: int | None = None
) -> list[list[int]]:
    """Group positions, in order, so each group plus the shared size stays within budget
    and holds at most ``max_items`` positions."""
    batches: list[list[int]] = []
    current: list[int] = []
    used = shared_size
    for position, size in enumerate(sizes):
        if current and (used + size > budget or len(current) == max_items):
            batches.append(current)
            current, used = [], shared_size
        current.append(position)
        used += size
    if current:
        batches.append(current)
    return batches
