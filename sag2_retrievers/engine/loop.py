"""The engine's private event loop thread: the blocking API's bridge to the async one."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class LoopThread:
    """A daemon thread running one event loop, so blocking calls reuse the judge's clients."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True, name="sag2-loop")
        self.thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine on the loop and wait for its result."""
        if threading.current_thread() is self.thread:
            coroutine.close()
            raise RuntimeError("a blocking SAG2 call cannot run inside the engine's own loop")
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    def stop(self, join_workers: bool = True) -> None:
        """Stop and close the loop (a no-op when already stopped); with ``join_workers``, first
        wait for its worker threads to end, so their index connections are finished threads'
        connections, which closing the index closes at once (SQLite then checkpoints its WAL).

        A garbage-collection finalizer passes False: it may run on one of those workers.
        """
        if self.loop.is_closed():
            return
        if threading.current_thread() is self.thread:
            raise RuntimeError("cannot stop the engine's loop from inside it")
        if join_workers:
            joined = self.loop.shutdown_default_executor()
            asyncio.run_coroutine_threadsafe(joined, self.loop).result()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()
