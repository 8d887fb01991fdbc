"""Shared HTTP plumbing for remote judges: retries, retry-after, refusal messages, secret keys."""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import logging
import math
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import httpx
import tenacity

from ...errors import InvalidInputError, JudgeError
from ._concurrency import AdaptiveLimit
from ._connect import connect_failure
from ._secrets import Secret, redact

logger = logging.getLogger(__name__)

TRANSIENT_STATUSES = frozenset({408, 429})
# Statuses that say the server is busy; any other status that repeats is the server refusing
# this request, and its own words say why better than a guess about load.
BUSY_STATUSES = frozenset({408, 429, 502, 503, 504})
# A connection that closes mid-request (a keep-alive race, a restarting server) may work on a
# retry; a connection never made (ConnectError: no such host, nothing listening) will not.
# Timeouts are retried too, as failures by deadline (caught before these).
TRANSIENT_TRANSPORT_ERRORS = (httpx.NetworkError, httpx.RemoteProtocolError)
BODY_EXCERPT_CHARS = 300
DEFAULT_MAX_REPLY_BYTES = 16 * 1024 * 1024

_STATUS_HINTS = {
    400: "the service rejected the request as malformed; check the model name and request size",
    401: "the API key was rejected; check that {key_source} holds a valid key",
    402: "the account cannot pay for the request; check its credits",
    403: "the API key may not use this model or endpoint; check the account's permissions",
    404: "the endpoint or model was not found; check the base URL and the model name",
    413: "the request is too large; lower the judge's token budget",
    422: "the service could not process the request body; check the model name and limits",
}
_DEFAULT_HINT = "check the base URL, the model name and the service's status"


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds to wait from a retry-after header (delay-seconds or HTTP date); None if unusable."""
    if value is None:
        return None
    seconds: float | None
    try:
        seconds = float(value.strip())
    except ValueError:
        seconds = _seconds_until_http_date(value, now or datetime.now(timezone.utc))
    if seconds is None or not math.isfinite(seconds):
        return None
    return max(0.0, seconds)


def _seconds_until_http_date(value: str, now: datetime) -> float | None:
    """Seconds from now until an HTTP date, or None when the text is not a date."""
    try:
        when = email.utils.parsedate_to_datetime(value.strip())
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return (when - now).total_seconds()


def is_transient_status(status: int) -> bool:
    """Whether an HTTP status is worth retrying: timeouts, rate limits and server errors."""
    return status in TRANSIENT_STATUSES or 500 <= status <= 599


class TransientHTTPFailure(Exception):
    """One attempt failed in a way worth retrying; carries the delay the server asked for,
    and the HTTP status and the start of the body when the server answered."""

    def __init__(
        self,
        reason: str,
        retry_after: float | None = None,
        status: int | None = None,
        body: str = "",
        timed_out: bool = False,
    ) -> None:
        super().__init__(reason)
        self.retry_after = retry_after
        self.status = status
        self.body = body
        self.timed_out = timed_out  # a failure by deadline, the one that load explains


class RefusedRequest(JudgeError):
    """A request that failed for good: ``status`` is the last HTTP status (None when the
    server never answered), ``transient`` whether the failures were of a retryable kind."""

    def __init__(self, message: str, status: int | None, *, transient: bool) -> None:
        super().__init__(message)
        self.status = status
        self.transient = transient


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to retry transient failures; `sleep` is injectable for tests."""

    max_attempts: int = 6
    initial_wait: float = 0.5
    max_wait: float = 60.0
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise InvalidInputError(f"max_attempts must be at least 1, got {self.max_attempts}")
        if not (self.initial_wait >= 0 and self.max_wait >= 0):
            raise InvalidInputError(
                f"retry waits must be non-negative seconds, got initial_wait={self.initial_wait} "
                f"and max_wait={self.max_wait}"
            )

    def wait_before_retry(self, retry_state: tenacity.RetryCallState) -> float:
        """Exponential backoff with jitter, lengthened to the server's retry-after, capped."""
        exponent = retry_state.attempt_number - 1
        backoff = self.initial_wait * 2.0**exponent + random.uniform(0.0, self.initial_wait)
        failure = retry_state.outcome.exception() if retry_state.outcome else None
        if isinstance(failure, TransientHTTPFailure) and failure.retry_after is not None:
            backoff = max(backoff, failure.retry_after)
        return min(self.max_wait, backoff)


@dataclass(frozen=True)
class ReplyLimits:
    """Bounds on one judge request, so a slow or huge reply cannot hold a retrieval hostage.

    ``attempt_seconds`` covers one attempt from connecting to the last byte (a server
    dripping bytes cannot extend it); ``total_seconds`` covers every attempt and the waits
    between them (None: only the attempts bound it); ``max_bytes`` is the largest reply body
    read, and a larger one fails at once, without retry.
    """

    attempt_seconds: float
    total_seconds: float | None = None
    max_bytes: int = DEFAULT_MAX_REPLY_BYTES

    def __post_init__(self) -> None:
        for name in ("attempt_seconds", "total_seconds"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, (int, float)) and value > 0):
                raise InvalidInputError(f"{name} must be a positive number of seconds, got {value}")
        if not isinstance(self.max_bytes, int) or self.max_bytes < 1:
            raise InvalidInputError(
                f"max_reply_bytes must be a positive integer, got {self.max_bytes}"
            )


@dataclass(frozen=True)
class Endpoint:
    """Where to send requests and how to talk about the service in errors, without its key."""

    url: str
    service: str
    key_source: str = "the API key setting"
    key: Secret | None = None

    def describe(self, text: str) -> str:
        """Prefix text with the service name and strip the key from it."""
        return redact(f"{self.service}: {text}", [self.key] if self.key else [])

    def excerpt(self, value: object, limit: int = BODY_EXCERPT_CHARS) -> str:
        """The start of a reply (text as is, other values as repr) with the key removed first,
        so a key cut in two by the limit cannot leak its first characters."""
        text = value if isinstance(value, str) else repr(value)
        return redact(text, [self.key] if self.key else [])[:limit]


def check_base_url(base_url: str, key_variable: str) -> None:
    """Raise InvalidInputError unless base_url is an http(s) URL with a host and no credentials."""
    try:
        url = httpx.URL(base_url)
    except httpx.InvalidURL:
        raise InvalidInputError(
            "base_url is not a valid URL; expected one like 'http://127.0.0.1:8000'"
        ) from None
    if url.scheme not in ("http", "https") or not url.host:
        raise InvalidInputError(
            "base_url must be an http:// or https:// URL with a host, such as "
            "'http://127.0.0.1:8000'"
        )
    if url.userinfo:
        raise InvalidInputError(
            f"base_url must not carry credentials; pass api_key or set {key_variable} instead"
        )


def new_client(
    *,
    timeout: float,
    headers: Mapping[str, str],
    transport: httpx.AsyncBaseTransport | None = None,
    proxy: str | None = None,
    event_hooks: Mapping[str, list[Callable[..., Any]]] | None = None,
) -> httpx.AsyncClient:
    """An HTTP client that never reads proxies (or other settings) from the environment.

    With ``trust_env`` on, HTTP_PROXY/HTTPS_PROXY/ALL_PROXY would route a loopback judge's
    questions and passages to another host; a proxy is used only when passed explicitly.
    """
    return httpx.AsyncClient(
        headers=dict(headers),
        timeout=timeout,
        transport=transport,
        proxy=proxy,
        trust_env=False,
        event_hooks={name: list(hooks) for name, hooks in (event_hooks or {}).items()},
    )


async def post_json(
    client: httpx.AsyncClient,
    endpoint: Endpoint,
    payload: Mapping[str, Any],
    policy: RetryPolicy,
    limits: ReplyLimits,
    gate: AdaptiveLimit | None = None,
) -> Any:
    """POST a JSON payload, retrying transient failures, and return the decoded JSON reply;
    a request that fails for good is a plain JudgeError (see `send_json`)."""
    try:
        return await send_json(client, endpoint, payload, policy, limits, gate)
    except RefusedRequest as refusal:
        raise JudgeError(str(refusal)) from refusal.__cause__


async def send_json(
    client: httpx.AsyncClient,
    endpoint: Endpoint,
    payload: Mapping[str, Any],
    policy: RetryPolicy,
    limits: ReplyLimits,
    gate: AdaptiveLimit | None = None,
) -> Any:
    """`post_json`, with a request that fails for good raised as a RefusedRequest carrying
    the last HTTP status, for callers that act on it.

    With a ``gate`` each attempt (not the whole request) holds one of its slots, so a retry
    waits for the limit the timeouts have lowered instead of re-sending at once.
    """
    retrying = tenacity.AsyncRetrying(
        stop=tenacity.stop_after_attempt(policy.max_attempts),
        wait=policy.wait_before_retry,
        retry=tenacity.retry_if_exception_type(TransientHTTPFailure),
        sleep=policy.sleep,
        before_sleep=lambda state: _log_retry(endpoint, policy, state),
        reraise=True,
    )
    try:
        response: httpx.Response = await asyncio.wait_for(
            retrying(_attempt_post, client, endpoint, payload, limits, gate),
            limits.total_seconds,
        )
    except TransientHTTPFailure as failure:
        raise RefusedRequest(
            _gave_up_message(endpoint, policy, failure), failure.status, transient=True
        ) from failure
    except asyncio.TimeoutError as error:
        raise RefusedRequest(
            endpoint.describe(
                f"no usable reply within the request deadline of {limits.total_seconds} s "
                "(retries included); raise the judge's deadline or check the service"
            ),
            None,
            transient=True,
        ) from error
    if not response.is_success:
        raise RefusedRequest(
            refusal_message(endpoint, response), response.status_code, transient=False
        )
    return _decode_json(endpoint, response)


def _gave_up_message(endpoint: Endpoint, policy: RetryPolicy, failure: TransientHTTPFailure) -> str:
    """Why retrying stopped: load advice for timeouts and busy statuses, else the server's
    own words, since a 4xx/5xx that repeats will not go away by waiting."""
    attempts = f"gave up after {policy.max_attempts} attempts"
    last = str(failure).rstrip(". ")
    if failure.timed_out or failure.status in BUSY_STATUSES:
        return endpoint.describe(
            f"{attempts}; last failure: {last}. The service may be overloaded: try again "
            "later or lower the judge's concurrency"
        )
    if failure.status is None:
        return endpoint.describe(
            f"{attempts}; the connection closed without a complete reply each time (last: "
            f"{last}); check that the base URL names the model server and read its log"
        )
    return endpoint.describe(
        f"{attempts}; the server answered HTTP {failure.status} each time and said: "
        f"{endpoint.excerpt(failure.body)!r}. An error that repeats is the server refusing "
        "this request, not load: check the model name, the server's options and its log"
    )


async def _attempt_post(
    client: httpx.AsyncClient,
    endpoint: Endpoint,
    payload: Mapping[str, Any],
    limits: ReplyLimits,
    gate: AdaptiveLimit | None = None,
) -> httpx.Response:
    """Send once (holding a slot of the gate, if any) and read the reply within the attempt's
    deadline and size limit; raise TransientHTTPFailure for failures a retry may cure."""
    async with gate.slot() if gate is not None else contextlib.nullcontext():
        try:
            response = await asyncio.wait_for(
                _send_and_read(client, endpoint, payload, limits.max_bytes),
                limits.attempt_seconds,
            )
        except TransientHTTPFailure as failure:
            if gate is not None and failure.status in BUSY_STATUSES:
                gate.overloaded()
            raise
        except asyncio.TimeoutError as exc:
            if gate is not None:
                gate.overloaded()
            raise TransientHTTPFailure(
                f"no complete reply within {limits.attempt_seconds} s (the judge's timeout)",
                timed_out=True,
            ) from exc
        except httpx.ConnectError as exc:
            raise JudgeError(endpoint.describe(connect_failure(endpoint.url, exc))) from exc
        except httpx.TimeoutException as exc:
            raise TransientHTTPFailure(f"{type(exc).__name__}: {exc}", timed_out=True) from exc
        except TRANSIENT_TRANSPORT_ERRORS as exc:
            raise TransientHTTPFailure(f"{type(exc).__name__}: {exc}") from exc
        except httpx.HTTPError as exc:
            raise JudgeError(
                endpoint.describe(
                    f"could not send the request ({type(exc).__name__}: {exc}); check the base URL"
                )
            ) from exc
    if gate is not None:
        gate.succeeded()
    return response


async def _send_and_read(
    client: httpx.AsyncClient, endpoint: Endpoint, payload: Mapping[str, Any], max_bytes: int
) -> httpx.Response:
    """One request with its reply read in full (within the size limit), as a plain Response."""
    async with client.stream("POST", endpoint.url, json=payload) as streamed:
        if is_transient_status(streamed.status_code):
            retry_after = parse_retry_after(streamed.headers.get("retry-after"))
            said = await _body_start(streamed)
            raise TransientHTTPFailure(
                f"HTTP {streamed.status_code}", retry_after, streamed.status_code, said
            )
        body = await _read_limited(endpoint, streamed, max_bytes)
    # The body is already decoded, so the encoding headers must not make httpx decode it again.
    headers = [
        (name, value)
        for name, value in streamed.headers.multi_items()
        if name.lower() not in ("content-encoding", "content-length", "transfer-encoding")
    ]
    return httpx.Response(
        streamed.status_code, headers=headers, content=body, request=streamed.request
    )


async def _body_start(response: httpx.Response) -> str:
    """The first few hundred characters of an error reply's body (what the server said)."""
    received = b""
    async for chunk in response.aiter_bytes():
        received += chunk
        if len(received) >= BODY_EXCERPT_CHARS * 4:
            break
    return received.decode("utf-8", errors="replace")


async def _read_limited(endpoint: Endpoint, response: httpx.Response, max_bytes: int) -> bytes:
    """The reply body, refused (JudgeError, no retry) as soon as it exceeds ``max_bytes``."""
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise _too_large(endpoint, max_bytes)
    chunks: list[bytes] = []
    received = 0
    # Counting decoded bytes also bounds a compressed reply that inflates past the limit.
    async for chunk in response.aiter_bytes():
        received += len(chunk)
        if received > max_bytes:
            raise _too_large(endpoint, max_bytes)
        chunks.append(chunk)
    return b"".join(chunks)


def _too_large(endpoint: Endpoint, max_bytes: int) -> JudgeError:
    """The error for a reply over the size limit."""
    return JudgeError(
        endpoint.describe(
            f"reply is larger than the limit of {max_bytes:,} bytes; the service is "
            "misbehaving, or raise max_reply_bytes"
        )
    )


def _log_retry(endpoint: Endpoint, policy: RetryPolicy, state: tenacity.RetryCallState) -> None:
    """Log one scheduled retry with its reason and delay, never the key."""
    failure = state.outcome.exception() if state.outcome else None
    delay = state.next_action.sleep if state.next_action else 0.0
    logger.warning(
        endpoint.describe(
            f"{failure}; retrying in {delay:.1f} s "
            f"(attempt {state.attempt_number + 1} of {policy.max_attempts})"
        )
    )


def refusal_message(endpoint: Endpoint, response: httpx.Response) -> str:
    """Explain a non-retryable HTTP status: the status, what to check, and the server's words."""
    hint = _STATUS_HINTS.get(response.status_code, _DEFAULT_HINT).format(
        key_source=endpoint.key_source
    )
    excerpt = endpoint.excerpt(response.text)
    return endpoint.describe(
        f"HTTP {response.status_code} from {endpoint.url}: {hint}. Server said: {excerpt!r}"
    )


def finite_number(value: object) -> float | None:
    """A JSON number (not a boolean) as a finite float, or None for anything else.

    JSON integers are unbounded, so one too large for a float is not a usable number either.
    """
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _decode_json(endpoint: Endpoint, response: httpx.Response) -> Any:
    """Decode a successful reply's JSON body, or raise JudgeError quoting its start."""
    try:
        return response.json()
    except RecursionError as exc:
        raise JudgeError(
            endpoint.describe(
                f"HTTP {response.status_code} reply nests JSON too deeply to decode; the "
                "service may be misbehaving"
            )
        ) from exc
    except ValueError as exc:
        excerpt = endpoint.excerpt(response.text)
        raise JudgeError(
            endpoint.describe(
                f"HTTP {response.status_code} reply is not JSON ({excerpt!r}); the service may "
                "be misconfigured or the base URL may point elsewhere"
            )
        ) from exc
