"""Requests in flight to a model server: a limit that backs off when the server falls behind.

A server with fewer slots than the judge's concurrency queues the extra requests, and the
judge's timeout counts that queueing; a request abandoned at its timeout is still computed
by the server, so re-sending it at the same concurrency only lengthens the queue (a retry
storm). On a timeout (or a 429/503) the limit halves; each success then widens it by about
one request per round trip, back up to the ceiling, as TCP's congestion window does.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


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
