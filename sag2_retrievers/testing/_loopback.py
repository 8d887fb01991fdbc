"""The server every fake of the testing kit runs: JSON over HTTP on 127.0.0.1, a free port.

A fake says only what it answers (`LoopbackServer.answer`); reading the request, writing the
JSON reply and running the thread are done here once.
"""

from __future__ import annotations

import json
import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, TypeVar

Server = TypeVar("Server", bound="LoopbackServer")


@dataclass(frozen=True)
class Reply:
    """What a fake sends back: a status, a JSON body (None: the connection is closed without
    a reply) and extra headers."""

    status: int
    body: dict[str, Any] | None
    headers: dict[str, str] = field(default_factory=dict)


class LoopbackServer(ABC):
    """Serves `answer` to POSTed JSON on a free port of 127.0.0.1 while used as a context
    manager; the port is bound at construction, so `origin` is known before the server
    starts."""

    def __init__(self) -> None:
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    @abstractmethod
    def answer(self, path: str, body: dict[str, Any]) -> Reply:
        """The reply to one POST of ``body`` to ``path`` (each fake says what it answers)."""

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


def _handler_for(server: LoopbackServer) -> type[BaseHTTPRequestHandler]:
    """The request handler class that writes ``server``'s replies as JSON."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            """Read the JSON body, ask the server for its reply, and send it."""
            length = int(self.headers.get("Content-Length", "0"))
            reply = server.answer(self.path, json.loads(self.rfile.read(length)))
            if reply.body is None:
                self.close_connection = True
                return
            data = json.dumps(reply.body).encode("utf-8")
            self.send_response(reply.status)
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            """Silent: a test's output is not the place for access logs."""

    return Handler
