"""A fault-injecting decision server on 127.0.0.1: JEV and OpenAI-style answers, with failures.

Tests and the load benchmark point `JEVJudge` (``POST /v1/systemone``) or `OpenAICompatJudge`
(``POST /v1/chat/completions``) at it. Correct answers are a deterministic function of the
candidate, so a run with faults can be compared with a fault-free run. Before answering, the
server may inject a `Fault`: an HTTP error status (with retry-after), a delay that outlasts the
client's timeout, a connection cut mid-body, truncated JSON, missing or out-of-range answers,
or an error body echoing the caller's Authorization header. It records every request body, the
faults it injected, connections the client dropped, and the peak number of requests in flight.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import select
import socket
import sys
import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

JEV_PATH = "/v1/systemone"
CHAT_PATH = "/v1/chat/completions"
POLL_SECONDS = 0.01

FaultKind = Literal[
    "ok",
    "status",
    "echo_key",
    "cut_connection",
    "truncated_json",
    "missing_answer",
    "out_of_range",
    "not_noul",
    "deep_json",
    "literal_score",
    "drip",
    "oversized",
]
LITERAL_MARK = "__literal_score__"


@dataclass(frozen=True)
class Fault:
    """One injected behaviour; ``delay`` holds the request first (a timeout when long enough).

    ``status`` is the HTTP status of a ``"status"`` or ``"echo_key"`` fault, ``retry_after``
    the header sent with it, and ``echo_offset`` the characters of padding an ``"echo_key"``
    body puts before the echoed Authorization header. ``"deep_json"`` answers JSON nested far
    deeper than a decoder's recursion limit; ``"literal_score"`` puts the raw JSON text
    ``literal`` (``NaN``, ``1e999``, a 400-digit integer, ...) where the first score goes (the
    Noul probability, or the chat reply's "yes" log-probability); ``"drip"`` sends the correct
    reply one byte every ``drip_seconds``; ``"oversized"`` pads a correct reply to ``size`` bytes.
    """

    kind: FaultKind = "ok"
    status: int = 200
    delay: float = 0.0
    retry_after: str | None = None
    echo_offset: int = 0
    literal: str = ""
    drip_seconds: float = 0.0
    size: int = 0

    @property
    def label(self) -> str:
        """A short name for counting: the kind, its status if any, and its delay if any."""
        label = f"{self.kind} {self.status}" if self.kind in ("status", "echo_key") else self.kind
        return f"{label} after {self.delay:g} s" if self.delay else label


OK = Fault()


@dataclass(frozen=True)
class FaultPlan:
    """Which fault each request gets: the script in order, then draws from ``rates``.

    ``rates`` pairs a probability with a fault; what is left over answers correctly. Every
    request also waits a uniform random latency in ``latency`` (seconds) before acting.
    """

    script: Sequence[Fault] = ()
    rates: Sequence[tuple[float, Fault]] = ()
    latency: tuple[float, float] = (0.0, 0.0)
    seed: int = 0


@dataclass
class ServerStats:
    """What the server saw: requests, injected faults, dropped connections, peak concurrency.

    ``dropped`` counts requests whose client left before the answer; ``cut_uploads`` counts
    connections closed before a request body had fully arrived (not counted as requests).
    """

    requests: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    dropped: int = 0
    cut_uploads: int = 0
    in_flight: int = 0
    peak_in_flight: int = 0
    bodies: list[dict[str, Any]] = field(default_factory=list)
    authorizations: list[str] = field(default_factory=list)

    @property
    def fault_count(self) -> int:
        """Requests that did not get a correct answer."""
        return sum(count for label, count in self.faults.items() if label != "ok")


def candidate_score(title: str, text: str) -> float:
    """The correct score of a candidate: a hash of its title and text spread over [0, 1]."""
    digest = hashlib.sha256(f"{title}\n{text}".encode("utf-8", "surrogatepass")).digest()
    return round(int.from_bytes(digest[:4], "big") / 0xFFFFFFFF, 4)


def message_score(content: str) -> float:
    """The correct yes-probability of a chat request, kept away from 0 and 1 for logprobs."""
    return min(0.99, max(0.01, candidate_score("chat", content)))


class FaultServer:
    """A threaded HTTP server on 127.0.0.1 (a free port) that answers or misbehaves per plan."""

    def __init__(self, plan: FaultPlan | None = None) -> None:
        self.stats = ServerStats()
        self._lock = threading.Lock()
        self._set_plan_locked(plan or FaultPlan())
        self._http = _Server(("127.0.0.1", 0), _Handler, owner=self)
        self.url = f"http://127.0.0.1:{self._http.server_address[1]}"
        self._thread = threading.Thread(
            target=self._http.serve_forever, args=(POLL_SECONDS,), daemon=True
        )

    def __enter__(self) -> FaultServer:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def start(self) -> None:
        """Serve in a background thread."""
        self._thread.start()

    def stop(self) -> None:
        """Stop serving and close the listening socket."""
        self._http.shutdown()
        self._http.server_close()

    def set_plan(self, plan: FaultPlan) -> None:
        """Switch to another plan; its script starts with the next request."""
        with self._lock:
            self._set_plan_locked(plan)

    def _set_plan_locked(self, plan: FaultPlan) -> None:
        """Install a plan and its random source; the caller holds the lock (or is __init__)."""
        self._plan = plan
        self._script = list(plan.script)
        self._random = random.Random(plan.seed)

    def begin(self, body: Mapping[str, Any], authorization: str) -> tuple[Fault, float]:
        """Count a request as in flight and choose its fault and latency."""
        with self._lock:
            stats = self.stats
            stats.requests += 1
            stats.in_flight += 1
            stats.peak_in_flight = max(stats.peak_in_flight, stats.in_flight)
            stats.bodies.append(dict(body))
            stats.authorizations.append(authorization)
            fault = self._script.pop(0) if self._script else self._draw()
            stats.faults[fault.label] += 1
            low, high = self._plan.latency
            return fault, self._random.uniform(low, high)

    def end(self, *, dropped: bool) -> None:
        """Count a request as answered, or as abandoned by the client."""
        with self._lock:
            self.stats.in_flight -= 1
            if dropped:
                self.stats.dropped += 1

    def note_cut_upload(self) -> None:
        """Count a client that closed the connection before its request body arrived."""
        with self._lock:
            self.stats.cut_uploads += 1

    def _draw(self) -> Fault:
        """A fault drawn from the plan's rates; the correct answer otherwise."""
        roll = self._random.random()
        for probability, fault in self._plan.rates:
            if roll < probability:
                return fault
            roll -= probability
        return OK


class _Server(ThreadingHTTPServer):
    """The HTTP server, knowing its `FaultServer`; one daemon thread per connection."""

    daemon_threads = True
    request_queue_size = 128  # a burst of concurrent connections must not overflow the backlog

    def __init__(self, address: tuple[str, int], handler: type[_Handler], owner: FaultServer):
        super().__init__(address, handler)
        self.owner = owner

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Ignore clients that vanish (tests drop connections on purpose); report the rest."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    """Answers one connection's requests (HTTP/1.1 keep-alive), injecting the chosen faults."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out at once, not 40 ms apart
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Stay quiet: the tests read the stats, not a log."""

    def do_POST(self) -> None:
        """Read the JSON body, wait the latency and delay, then answer or misbehave."""
        length = int(self.headers.get("Content-Length", "0"))
        raw = self.rfile.read(length)
        owner = self.server.owner
        if self.path not in (JEV_PATH, CHAT_PATH):
            self._write(404, b'{"error": {"message": "no such endpoint"}}', None)
            return
        if len(raw) < length:
            self.close_connection = True
            owner.note_cut_upload()
            return
        body = json.loads(raw)
        fault, latency = owner.begin(body, self.headers.get("Authorization", ""))
        if not self._client_waits(latency + fault.delay):
            self.close_connection = True
            owner.end(dropped=True)
            return
        reply = self._reply(body, fault)
        # Leave the in-flight count before writing: a client may reuse its concurrency slot
        # the moment the reply arrives, and must not be counted twice.
        owner.end(dropped=False)
        self._send(fault, reply)

    def _client_waits(self, seconds: float) -> bool:
        """Wait, watching the socket; False as soon as the client closes the connection."""
        remaining = seconds
        while remaining > 0:
            step = min(POLL_SECONDS, remaining)
            readable, _, _ = select.select([self.connection], [], [], step)
            if readable and self._peer_closed():
                return False
            remaining -= step
        return True

    def _peer_closed(self) -> bool:
        """Whether the client has closed its end (end of stream or a reset)."""
        try:
            return bool(self.connection.recv(1, socket.MSG_PEEK) == b"")
        except OSError:
            return True

    def _reply(self, body: Mapping[str, Any], fault: Fault) -> dict[str, Any]:
        """The correct reply for the route, bent by answer-level faults."""
        if self.path == CHAT_PATH:
            return _chat_reply(body, fault)
        return _jev_reply(body, fault)

    def _send(self, fault: Fault, reply: Mapping[str, Any]) -> None:
        """Write the reply, or the fault's status, broken body or echo in its place."""
        payload = json.dumps(reply).encode()
        if fault.kind == "status":
            error = json.dumps({"error": {"message": f"injected HTTP {fault.status}"}})
            self._write(fault.status, error.encode(), fault.retry_after)
        elif fault.kind == "echo_key":
            echo = "x" * fault.echo_offset + self.headers.get("Authorization", "")
            self._write(fault.status, echo.encode(), None)
        elif fault.kind == "truncated_json":
            self._write(200, payload[: len(payload) // 2], None)
        elif fault.kind == "cut_connection":
            self._write_cut(payload)
        elif fault.kind == "deep_json":
            self._write(200, b"[" * 100_000 + b"]" * 100_000, None)
        elif fault.kind == "literal_score":
            literal = fault.literal.encode()
            self._write(200, payload.replace(f'"{LITERAL_MARK}"'.encode(), literal, 1), None)
        elif fault.kind == "drip":
            self._write_drip(payload, fault.drip_seconds)
        elif fault.kind == "oversized":
            padding = b" " * max(0, fault.size - len(payload))
            self._write(200, payload[:-1] + padding + payload[-1:], None)
        else:
            self._write(200, payload, None)

    def _write(self, status: int, payload: bytes, retry_after: str | None) -> None:
        """A complete response with a JSON content type."""
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            if retry_after is not None:
                self.send_header("Retry-After", retry_after)
            self.end_headers()
            self.wfile.write(payload)
        except OSError:
            self.close_connection = True

    def _write_drip(self, payload: bytes, seconds: float) -> None:
        """A complete response whose body arrives one byte at a time, ``seconds`` apart."""
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.flush()
            for position in range(len(payload)):
                time.sleep(seconds)
                self.wfile.write(payload[position : position + 1])
                self.wfile.flush()
        except OSError:
            self.close_connection = True

    def _write_cut(self, payload: bytes) -> None:
        """Promise the whole body, send half of it, and close the connection."""
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload[: len(payload) // 2])
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.close_connection = True


def _jev_reply(body: Mapping[str, Any], fault: Fault) -> dict[str, Any]:
    """One Noul answer per question, scored from its candidate, then bent by the fault."""
    answers: dict[str, Any] = {}
    for qid, question in body["questions"].items():
        candidate = question["instructions"]["candidate"]
        answers[qid] = {
            "type": "noul",
            "noul": candidate_score(candidate["title"], candidate["text"]),
        }
    first = next(iter(answers))
    if fault.kind == "missing_answer":
        del answers[first]
    elif fault.kind == "out_of_range":
        answers[first] = {"type": "noul", "noul": 1.5}
    elif fault.kind == "not_noul":
        answers[first] = {"type": "yes_no", "answer": True}
    elif fault.kind == "literal_score":
        answers[first] = {"type": "noul", "noul": LITERAL_MARK}
    size = len(json.dumps(body))
    return {
        "model": f"{body.get('model', '')}-fault-server",
        "answers": answers,
        "usage": {"input_tokens": size // 4, "output_tokens": len(answers)},
    }


def _chat_reply(body: Mapping[str, Any], fault: Fault) -> dict[str, Any]:
    """A one-token yes/no completion with log-probabilities; malformed for answer faults."""
    if fault.kind in ("missing_answer", "out_of_range", "not_noul"):
        return {"choices": []}
    probability = message_score(body["messages"][-1]["content"])
    token = "yes" if probability >= 0.5 else "no"
    alternatives: list[dict[str, Any]] = [
        {"token": "yes", "logprob": math.log(probability)},
        {"token": "no", "logprob": math.log(1.0 - probability)},
    ]
    if fault.kind == "literal_score":
        alternatives[0]["logprob"] = LITERAL_MARK
    first = {"token": token, "logprob": math.log(max(probability, 1.0 - probability))}
    return {
        "choices": [{"logprobs": {"content": [{**first, "top_logprobs": alternatives}]}}],
        "usage": {"prompt_tokens": len(json.dumps(body)) // 4, "completion_tokens": 1},
    }
