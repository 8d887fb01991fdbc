"""The thread and socket every fake server of the testing kit runs on: 127.0.0.1, a free port."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import TypeVar

Server = TypeVar("Server", bound="LoopbackServer")


class LoopbackServer:
    """Serves ``handler`` on a free port of 127.0.0.1 while used as a context manager; the
    port is bound at construction, so `origin` is known before the server starts."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    @property
    def origin(self) -> str:
        """``http://127.0.0.1:PORT``."""
        host, port = self._http.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self: Server) -> Server:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._http.shutdown()
        self._http.server_close()
        self._thread.join()
