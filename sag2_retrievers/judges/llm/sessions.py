"""One HTTP client and concurrency limit per event loop, for judges that may be used from
several loops (each ``asyncio.run``, the engine's own thread): neither may cross loops."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from ._concurrency import AdaptiveLimit


@dataclass
class LoopSession:
    """The HTTP client and concurrency limit of one event loop."""

    client: httpx.AsyncClient
    gate: AdaptiveLimit


class LoopSessions:
    """The sessions of a judge, created on first use in each running loop."""

    def __init__(self, new_client: Callable[[], httpx.AsyncClient], max_concurrency: int):
        self._new_client = new_client
        self._max_concurrency = max_concurrency
        self._sessions: dict[asyncio.AbstractEventLoop, LoopSession] = {}
        self._lock = threading.Lock()

    def current(self) -> LoopSession:
        """This event loop's client and limit, created on first use in the loop."""
        loop = asyncio.get_running_loop()
        with self._lock:
            session = self._sessions.get(loop)
            if session is None:
                # Sessions of ended loops (one per asyncio.run, say) can only be dropped.
                for ended in [other for other in self._sessions if other.is_closed()]:
                    del self._sessions[ended]
                session = LoopSession(self._new_client(), AdaptiveLimit(self._max_concurrency))
                self._sessions[loop] = session
        return session

    async def aclose_current(self) -> None:
        """Close the HTTP client of the running event loop, if it has one."""
        with self._lock:
            session = self._sessions.pop(asyncio.get_running_loop(), None)
        if session is not None:
            await session.client.aclose()
