"""A judge for any OpenAI-compatible chat endpoint that reports token log-probabilities.

Each candidate is one ``/v1/chat/completions`` call asking a yes/no question with
``max_tokens: 1`` and ``top_logprobs: 20``; the score is the probability of "yes" normalised
against "no". The server must return log-probabilities for chat completions:

- vLLM: supported out of the box; ``top_logprobs`` may not exceed the server's
  ``--max-logprobs`` (default 20).
- llama.cpp ``llama-server``: supported by builds from 2025 on, no flag needed.
- Ollama: supported from version 0.12.11 on its ``/v1`` endpoint.

Reasoning ("thinking") models must have thinking disabled, or their first token is not an answer.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import math
import os
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import httpx

from ..errors import InvalidInputError, JudgeError
from ._http import (
    DEFAULT_MAX_REPLY_BYTES,
    Endpoint,
    ReplyLimits,
    RetryPolicy,
    Secret,
    check_base_url,
    finite_number,
    gather_or_cancel,
    new_client,
    post_json,
)
from .base import Candidate, ContextPassage, Judge, JudgeRequest

API_KEY_ENV = "SAG2_OPENAI_API_KEY"
TOP_LOGPROBS = 20
LOOPBACK_NAMES = frozenset({"localhost"})
_LINE_BREAKING = re.compile("[\x7f-\x9f\u2028\u2029]")
LOGPROBS_HELP = (
    "the judge needs token log-probabilities: use vLLM (top_logprobs up to --max-logprobs, "
    "default 20), a llama.cpp llama-server build from 2025 or later, or Ollama 0.12.11 or later"
)


@dataclass
class _LoopSession:
    """The HTTP client and concurrency slots of one event loop; neither may cross loops."""

    client: httpx.AsyncClient
    slots: asyncio.Semaphore


class OpenAICompatJudge(Judge):
    """Ask a self-hosted or remote OpenAI-compatible model one yes/no question per candidate.

    ``base_url`` is the server's root, with or without a trailing ``/v1`` (for example
    ``http://127.0.0.1:8000`` for vLLM or ``http://localhost:11434/v1`` for Ollama). The API key
    comes from ``api_key`` or the ``SAG2_OPENAI_API_KEY`` environment variable; local servers
    usually need none. ``sends_data_off_machine`` is False only when the host is a loopback
    address (127.0.0.0/8, ::1 or ``localhost``); any other host, including this machine's LAN
    address or 0.0.0.0, counts as off the machine. At most ``max_concurrency`` requests are in
    flight per event loop; 408, 429, 5xx, timeouts and connection errors are retried up to
    ``max_attempts`` times in all, honouring retry-after. ``retry_policy`` sets the waits
    between attempts (its own attempt count is replaced by ``max_attempts``). ``timeout``
    bounds each attempt from connecting to the reply's last byte, ``deadline`` (optional) one
    candidate's request with its retries; a reply over ``max_reply_bytes`` fails unretried.
    Proxy variables (HTTP_PROXY, ALL_PROXY, ...) are ignored, so loopback traffic stays on the
    machine; pass ``proxy`` to use one (a non-loopback proxy makes the judge count as
    off-machine).
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        max_concurrency: int = 8,
        timeout: float = 120.0,
        max_attempts: int = 4,
        transport: httpx.AsyncBaseTransport | None = None,
        retry_policy: RetryPolicy | None = None,
        proxy: str | None = None,
        deadline: float | None = None,
        max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES,
    ) -> None:
        super().__init__()
        _check_settings(base_url, model, max_concurrency, timeout)
        if proxy is not None:
            check_base_url(proxy, API_KEY_ENV)
        self._proxy = proxy
        self._base_url = base_url.rstrip("/")
        self._model = model
        self._max_concurrency = max_concurrency
        self._timeout = timeout
        self._transport = transport
        self._limits = ReplyLimits(timeout, deadline, max_reply_bytes)
        self._policy = replace(retry_policy or RetryPolicy(), max_attempts=max_attempts)
        key = api_key or os.environ.get(API_KEY_ENV)
        self._endpoint = Endpoint(
            url=chat_completions_url(self._base_url),
            service=f"OpenAI-compatible judge at {self._base_url}",
            key_source=f"the api_key argument or {API_KEY_ENV}",
            key=Secret(key) if key else None,
        )
        self.sends_data_off_machine = not is_loopback_url(self._base_url) or (
            proxy is not None and not is_loopback_url(proxy)
        )
        self._sessions: dict[asyncio.AbstractEventLoop, _LoopSession] = {}
        self._sessions_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"OpenAICompatJudge(model={self._model!r}, base_url={self._base_url!r})"

    @property
    def identity(self) -> str:
        """``openai-compat:<model>@<base_url>``."""
        return f"openai-compat:{self._model}@{self._base_url}"

    async def _score(self, request: JudgeRequest) -> list[float]:
        """Ask about every candidate concurrently, within the concurrency cap."""
        session = self._session()
        return await gather_or_cancel(
            self._judge_one(session, request, candidate) for candidate in request.candidates
        )

    async def aclose(self) -> None:
        """Close the HTTP client of the running event loop."""
        with self._sessions_lock:
            session = self._sessions.pop(asyncio.get_running_loop(), None)
        if session is not None:
            await session.client.aclose()

    async def _judge_one(
        self, session: _LoopSession, request: JudgeRequest, candidate: Candidate
    ) -> float:
        """One chat completion for one candidate; returns its yes-probability."""
        payload = {
            "model": self._model,
            "messages": build_messages(request, candidate),
            "max_tokens": 1,
            "temperature": 0,
            "logprobs": True,
            "top_logprobs": TOP_LOGPROBS,
        }
        async with session.slots:
            reply = await post_json(
                session.client, self._endpoint, payload, self._policy, self._limits
            )
        self._add_token_usage(reply)
        try:
            return yes_probability(reply)
        except JudgeError as error:
            raise JudgeError(self._endpoint.describe(f"model {self._model!r}: {error}")) from None

    def _session(self) -> _LoopSession:
        """This event loop's client and semaphore, created on first use in the loop."""
        loop = asyncio.get_running_loop()
        with self._sessions_lock:
            session = self._sessions.get(loop)
            if session is None:
                # Sessions of ended loops (one per asyncio.run, say) can only be dropped.
                for ended in [other for other in self._sessions if other.is_closed()]:
                    del self._sessions[ended]
                session = _LoopSession(self._new_client(), asyncio.Semaphore(self._max_concurrency))
                self._sessions[loop] = session
        return session

    def _new_client(self) -> httpx.AsyncClient:
        """An HTTP client that sends the key, if any, and counts every request it sends."""
        key = self._endpoint.key
        headers = {"Authorization": f"Bearer {key.reveal()}"} if key else {}

        async def count_call(_: httpx.Request) -> None:
            self.usage.add(http_calls=1)

        return new_client(
            headers=headers,
            timeout=self._timeout,
            transport=self._transport,
            proxy=self._proxy,
            event_hooks={"request": [count_call]},
        )

    def _add_token_usage(self, reply: Any) -> None:
        """Add the tokens (and cost, when a gateway reports one) of a reply to ``usage``."""
        usage = reply.get("usage") if isinstance(reply, Mapping) else None
        if not isinstance(usage, Mapping):
            return
        self.usage.add(
            input_tokens=_count(usage.get("prompt_tokens")),
            output_tokens=_count(usage.get("completion_tokens")),
            cost_usd=finite_number(usage.get("cost")) or 0.0,
        )


def build_messages(request: JudgeRequest, candidate: Candidate) -> list[dict[str, str]]:
    """The system instruction and a user message quoting question, context and candidate."""
    return [
        {"role": "system", "content": request.instruction},
        {"role": "user", "content": build_user_message(request, candidate)},
    ]


def build_user_message(request: JudgeRequest, candidate: Candidate) -> str:
    """Quote every piece of data as a JSON string so passages cannot break out of their place."""
    sections = [f"Question: {_quote(request.question)}"]
    if request.context:
        sections.append(_context_section(request.context))
    if request.note:
        sections.append(f"Note: {request.note}")
    sections.append(
        "Candidate passage to judge:\n"
        f"Title: {_quote(candidate.title)}\n"
        f"Text: {_quote(candidate.text)}"
    )
    sections.append("Answer yes or no.")
    return "\n\n".join(sections)


def _context_section(context: Sequence[ContextPassage]) -> str:
    """The shared context as numbered quoted passages, with previous scores when known."""
    lines = ["Shared context (quoted passages):"]
    for number, passage in enumerate(context, start=1):
        score = ""
        if passage.previous_score is not None:
            score = f" (previous score {passage.previous_score:.2f})"
        lines.append(f"[{number}] Title: {_quote(passage.title)}{score}")
        lines.append(f"Text: {_quote(passage.text)}")
    return "\n".join(lines)


def _quote(text: str) -> str:
    """A JSON string literal: delimited, with quotes and every line break escaped.

    JSON escapes only C0 controls; U+0085, U+2028 and U+2029 (and the other C1 controls)
    also end a line for many readers, so they are escaped too and a passage stays one line.
    """
    return _LINE_BREAKING.sub(_escape, json.dumps(text, ensure_ascii=False))


def _escape(match: re.Match[str]) -> str:
    """The JSON escape of one character."""
    return f"\\u{ord(match.group()):04x}"


def yes_probability(reply: Any) -> float:
    """P(yes) normalised against P(no) over the first token's top log-probabilities.

    Tokens count as yes or no when their stripped, lowercased text is exactly that word. When
    neither appears, the sampled token decides (yes 1.0, no 0.0).
    """
    first = _first_token(reply)
    alternatives = _alternatives(first)
    log_yes = _log_total(alternatives, "yes")
    log_no = _log_total(alternatives, "no")
    if log_yes is None and log_no is None:
        return _sampled_answer(first)
    if log_no is None:
        return 1.0
    if log_yes is None:
        return 0.0
    return _sigmoid(log_yes - log_no)


def _first_token(reply: Any) -> Mapping[str, Any]:
    """The log-probability record of the reply's first generated token."""
    choices = reply.get("choices") if isinstance(reply, Mapping) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        raise JudgeError("the reply has no choices; the server may not be OpenAI-compatible")
    logprobs = choices[0].get("logprobs")
    content = logprobs.get("content") if isinstance(logprobs, Mapping) else None
    if not isinstance(content, list) or not content or not isinstance(content[0], Mapping):
        raise JudgeError(f"the reply carries no log-probabilities; {LOGPROBS_HELP}")
    return content[0]


def _alternatives(first: Mapping[str, Any]) -> list[tuple[str, float]]:
    """The (token, logprob) pairs of a token record's top log-probabilities, all checked.

    An entry that is not a token with a finite log-probability <= 0 is refused rather than
    skipped: skipping it could leave the sampled token to decide with a score of 0 or 1.
    """
    entries = first.get("top_logprobs") or []
    if not isinstance(entries, list):
        raise JudgeError(f"the reply's top log-probabilities are not a list: {entries!r:.80}")
    pairs = []
    for entry in entries:
        token = entry.get("token") if isinstance(entry, Mapping) else None
        logprob = finite_number(entry.get("logprob")) if isinstance(entry, Mapping) else None
        if not isinstance(token, str) or logprob is None or logprob > 0.0:
            raise JudgeError(
                f"the reply holds an impossible log-probability entry {entry!r:.80}; "
                "expected a token with a finite log-probability <= 0"
            )
        pairs.append((token, logprob))
    return pairs


def _log_total(alternatives: Sequence[tuple[str, float]], word: str) -> float | None:
    """log of the summed probability of the tokens spelling `word`, or None if none does."""
    logprobs = [lp for token, lp in alternatives if token.strip().lower() == word]
    if not logprobs:
        return None
    peak = max(logprobs)
    return peak + math.log(sum(math.exp(lp - peak) for lp in logprobs))


def _sigmoid(x: float) -> float:
    """1 / (1 + e^-x) without overflow for large |x|."""
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    shrink = math.exp(x)
    return shrink / (1.0 + shrink)


def _sampled_answer(first: Mapping[str, Any]) -> float:
    """1.0 or 0.0 from the sampled token when it is yes or no; otherwise a JudgeError."""
    token = first.get("token")
    answer = token.strip().lower() if isinstance(token, str) else None
    if answer == "yes":
        return 1.0
    if answer == "no":
        return 0.0
    raise JudgeError(
        f"the model answered {token!r} and neither yes nor no is among its top "
        f"{TOP_LOGPROBS} tokens; use an instruction-following model and disable thinking"
    )


def _count(value: object) -> int:
    """A reported token count, or 0 when missing or malformed."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return 0


def chat_completions_url(base_url: str) -> str:
    """The chat completions URL under a base URL given with or without ``/v1``."""
    root = base_url.rstrip("/")
    return f"{root}/chat/completions" if root.endswith("/v1") else f"{root}/v1/chat/completions"


def is_loopback_url(url: str) -> bool:
    """Whether the URL's host is this machine's loopback: 127.0.0.0/8, ::1 or localhost."""
    host = httpx.URL(url).host.lower()
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _check_settings(base_url: str, model: str, max_concurrency: int, timeout: float) -> None:
    """Raise InvalidInputError for a malformed base URL, an empty model or bad limits."""
    check_base_url(base_url, API_KEY_ENV)
    if not model.strip():
        raise InvalidInputError("model must name the model the server serves, got ''")
    if max_concurrency < 1:
        raise InvalidInputError(f"max_concurrency must be at least 1, got {max_concurrency}")
    if not timeout > 0:
        raise InvalidInputError(f"timeout must be a positive number of seconds, got {timeout}")
