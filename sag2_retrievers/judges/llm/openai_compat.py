"""A judge for any OpenAI-compatible endpoint that reports token log-probabilities.

With the default ``chat`` transport each candidate is one ``/v1/chat/completions`` call
asking a yes/no question with ``max_tokens: 1`` and ``top_logprobs: 20``; the score is the
probability of "yes" normalised against "no". The ``completions`` transport renders the same
conversations with a chat template and sends many of them in one ``/v1/completions``
request (see `transports`), for the same score. The server must return log-probabilities:

- vLLM: supported out of the box; ``top_logprobs`` may not exceed the server's
  ``--max-logprobs`` (default 20). Both transports.
- llama.cpp ``llama-server``: supported by builds from 2025 on, no flag needed.
- Ollama: supported from version 0.12.11 on its ``/v1`` endpoint.

Reasoning ("thinking") models must have thinking disabled, or their first token is not an answer.
An answer that is neither yes nor no is asked once more, strictly; if it stays unreadable the
candidate is left unscored (see `unreadable`), and only systematically unreadable answers stop
the judge. Every request caps the output under both names servers read (``max_tokens`` and
``max_completion_tokens``) and carries stop sequences.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, TypeVar

import httpx

from ...errors import JudgeError
from ..base import CallEstimate, Candidate, Judge, JudgeRequest
from ._concurrency import gather_or_cancel, gather_warm_first, plan_batches
from ._http import (
    DEFAULT_MAX_REPLY_BYTES,
    Endpoint,
    RefusedRequest,
    ReplyLimits,
    RetryPolicy,
    check_base_url,
    new_client,
    post_json,
    send_json,
)
from ._secrets import read_key
from .endpoints import (
    API_KEY_ENV,
    Transport,
    api_transport,
    chat_completions_url,
    check_settings,
    completions_url,
    is_loopback_url,
)
from .grading import UnreadableAnswer, answer_positions
from .prompts import (
    STRICT_QUESTION,
    JudgePrompt,
    candidate_groups,
    grouped_prompt,
    pointwise_prompt,
)
from .prompts import build_messages as build_messages
from .prompts import build_user_message as build_user_message
from .replies import (
    TOP_LOGPROBS,
    add_reply_usage,
    line_probability,
    record_or_unreadable,
    token_records,
    yes_probability,
)
from .sessions import LoopSession, LoopSessions
from .transports import (
    CHATML,
    RenderChat,
    check_batch_limits,
    first_token_records,
    template_name,
)
from .unreadable import AnswerPolicy, attempt

logger = logging.getLogger(__name__)

_T = TypeVar("_T")
DEFAULT_MAX_BATCH_SIZE = 128
DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024
# Output tokens allowed per line of a grouped answer ("12: yes" and a line break) and overall.
GROUP_TOKENS_PER_LINE = 6
GROUP_SPARE_TOKENS = 8
# One answer token ends at a line break; a grouped answer (one line each) at a blank line.
POINTWISE_STOP = ["\n"]
GROUPED_STOP = ["\n\n"]
# Statuses with which servers refuse a list of prompts they would take one at a time
# (llama-cpp-python answers HTTP 500 from an assertion).
LIST_REFUSALS = frozenset({400, 413, 422, 500, 501})


class OpenAICompatJudge(Judge):
    """Ask a self-hosted or remote OpenAI-compatible model whether each candidate is evidence.

    ``base_url`` is the server's root, with or without a trailing ``/v1`` (for example
    ``http://127.0.0.1:8000`` for vLLM or ``http://localhost:11434/v1`` for Ollama). The API key
    comes from ``api_key`` or the ``SAG2_OPENAI_API_KEY`` environment variable; local servers
    usually need none. ``sends_data_off_machine`` is False only when the host is a loopback
    address (127.0.0.0/8, ::1 or ``localhost``); any other host, including this machine's LAN
    address or 0.0.0.0, counts as off the machine. At most ``max_concurrency`` requests are in
    flight per event loop, fewer after timeouts: each halves the limit, which successes widen
    again, so a server with fewer slots is not flooded with re-sent requests. 408, 429, 5xx,
    timeouts and connection errors are retried up to ``max_attempts`` times in all, honouring
    retry-after; a 4xx/5xx that repeats is reported with the server's own words.
    ``retry_policy`` sets the waits between attempts (its own attempt count is replaced by
    ``max_attempts``). ``timeout`` bounds each attempt from connecting to the reply's last
    byte, ``deadline`` (optional) one request with its retries; a reply over
    ``max_reply_bytes`` fails unretried.
    Proxy variables (HTTP_PROXY, ALL_PROXY, ...) are ignored, so loopback traffic stays on the
    machine; pass ``proxy`` to use one (a non-loopback proxy makes the judge count as
    off-machine).

    Cost: with ``warm_first`` (default) one call of a request is sent alone and the others
    once it has returned, so the round's shared block is in the server's prefix cache for
    them; ``cache_hints`` (default) adds a ``prompt_cache_key`` naming the question's round,
    which routes OpenAI's cache and is ignored by servers that do not know it. Neither
    changes a prompt (a gateway that rejects unknown fields needs ``cache_hints=False``).
    ``transport`` is ``"chat"`` (default) or ``"completions"``; an httpx transport given there
    (as tests do) means chat over it, and ``http_transport`` carries one for either.
    ``transport="completions"`` sends the prompts, rendered with
    ``chat_template`` (default ChatML; pass the model's own, e.g. ``chat_template("gemma")``
    from `transports`), in ``/v1/completions`` requests of at most ``max_batch_size`` prompts
    and ``max_body_bytes`` bytes; a server that refuses a list of prompts is sent one prompt
    per request from then on (logged once). ``group_size=K`` (chat transport, opt-in) asks
    about K candidates per call, one numbered line each, reading P(yes) from each line's
    answer token; a line missing or unreadable is asked again alone, and a reply with a line
    numbered outside 1..K (numbered from 0, say) is not read at all: all K are asked alone.
    Grouping means a candidate is no longer judged in isolation, and its recall against one
    call per candidate has not been measured here. ``fold_system=True`` (chat transport) sends
    the instruction at the start of the user message instead of as a system message, for chat
    formats without a system turn that drop it (llama-cpp-python's ``gemma``).
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
        transport: httpx.AsyncBaseTransport | Transport | None = None,
        retry_policy: RetryPolicy | None = None,
        proxy: str | None = None,
        deadline: float | None = None,
        max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES,
        warm_first: bool = True,
        cache_hints: bool = True,
        chat_template: RenderChat = CHATML,
        max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        group_size: int = 1,
        http_transport: httpx.AsyncBaseTransport | None = None,
        fold_system: bool = False,
    ) -> None:
        super().__init__()
        check_settings(base_url, model, max_concurrency, timeout)
        check_batch_limits(max_batch_size, max_body_bytes)
        if proxy is not None:
            check_base_url(proxy, API_KEY_ENV)
        self._proxy = proxy
        self._base_url = base_url.rstrip("/")
        self._model = model
        self._max_concurrency = max_concurrency
        self._timeout = timeout
        self._api = api_transport(transport, group_size)
        self._http_transport = http_transport or (None if isinstance(transport, str) else transport)
        self._warm_first = warm_first
        self._cache_hints = cache_hints
        self._chat_template = chat_template
        self._max_batch_size = max_batch_size
        self._max_body_bytes = max_body_bytes
        self._group_size = group_size
        self._fold_system = fold_system
        self.scores_whole_request = group_size > 1
        self._limits = ReplyLimits(timeout, deadline, max_reply_bytes)
        # Whether the server takes a list of prompts: None until a list has been sent.
        self._takes_lists: bool | None = None
        self._policy = replace(retry_policy or RetryPolicy(), max_attempts=max_attempts)
        key_source = f"the api_key argument or {API_KEY_ENV}"
        key = (api_key or os.environ.get(API_KEY_ENV, "")).strip()
        self._endpoint = Endpoint(
            url=chat_completions_url(self._base_url),
            service=f"OpenAI-compatible judge at {self._base_url}",
            key_source=key_source,
            key=read_key(key, key_source) if key else None,
        )
        self._completions = replace(self._endpoint, url=completions_url(self._base_url))
        self.sends_data_off_machine = not is_loopback_url(self._base_url) or (
            proxy is not None and not is_loopback_url(proxy)
        )
        self._sessions = LoopSessions(self._new_client, max_concurrency)
        self._answers = AnswerPolicy(
            self.usage, lambda text: self._endpoint.describe(f"model {model!r}: {text}")
        )

    def __repr__(self) -> str:
        return (
            f"OpenAICompatJudge(model={self._model!r}, base_url={self._base_url!r}, "
            f"transport={self._api!r}, group_size={self._group_size})"
        )

    @property
    def identity(self) -> str:
        """``openai-compat:<model>@<base_url>``, then the transport or grouping if not plain."""
        name = f"openai-compat:{self._model}@{self._base_url}"
        if self._api == "completions":
            name += f";completions:{template_name(self._chat_template)}"
        if self._group_size > 1:
            name += f";group={self._group_size}"
        if self._fold_system:
            name += ";fold-system"
        return name

    async def _score(self, request: JudgeRequest) -> list[float]:
        """Score every candidate through the chosen transport, within the concurrency cap."""
        session = self._sessions.current()
        if self._api == "completions":
            return await self._score_completions(session, request)
        if self._group_size > 1:
            return await self._score_grouped(session, request)
        return await gather_warm_first(
            (self._judge_one(session, request, candidate) for candidate in request.candidates),
            self._warm_first,
        )

    def estimate(self, request: JudgeRequest) -> CallEstimate:
        """The calls and (roughly counted) input tokens of scoring the request."""
        prompts = [pointwise_prompt(request, candidate) for candidate in request.candidates]
        if self._api == "completions":
            batches = self._completion_batches([self._render(p) for p in prompts])
            return CallEstimate(len(batches), sum(p.estimated_tokens() for p in prompts))
        if self._group_size > 1:
            groups = candidate_groups(request.candidates, self._group_size)
            tokens = sum(grouped_prompt(request, group).estimated_tokens() for group in groups)
            return CallEstimate(len(groups), tokens)
        return CallEstimate(len(prompts), sum(p.estimated_tokens() for p in prompts))

    async def aclose(self) -> None:
        """Close the HTTP client of the running event loop."""
        await self._sessions.aclose_current()

    async def _judge_one(
        self, session: LoopSession, request: JudgeRequest, candidate: Candidate
    ) -> float:
        """One chat completion for one candidate (a stricter second one when its answer is
        unreadable); returns its yes-probability or, failing both, its unscored stand-in."""
        first = await attempt(lambda: self._ask_chat(session, pointwise_prompt(request, candidate)))
        strict = pointwise_prompt(request, candidate, STRICT_QUESTION)
        return await self._answers.settle(
            candidate, request.candidates, first, lambda: self._ask_chat(session, strict)
        )

    async def _ask_chat(self, session: LoopSession, prompt: JudgePrompt) -> float:
        """One chat completion asking one yes/no question; returns P(yes)."""
        payload = self._chat_payload(prompt, max_tokens=1, stop=POINTWISE_STOP)
        reply = await self._post(session, self._endpoint, payload)
        return self._read(lambda: yes_probability(reply))

    async def _score_grouped(self, session: LoopSession, request: JudgeRequest) -> list[float]:
        """One chat completion per group of candidates, concatenated in candidate order."""
        groups = candidate_groups(request.candidates, self._group_size)
        scores = await gather_warm_first(
            (self._judge_group(session, request, group) for group in groups), self._warm_first
        )
        return [score for group_scores in scores for score in group_scores]

    async def _judge_group(
        self, session: LoopSession, request: JudgeRequest, group: Sequence[Candidate]
    ) -> list[float]:
        """Judge a group in one call; candidates whose line is unreadable are asked alone, and
        all of them when a line's number is outside the group (the reply is not trusted)."""
        max_tokens = GROUP_TOKENS_PER_LINE * len(group) + GROUP_SPARE_TOKENS
        payload = self._chat_payload(
            grouped_prompt(request, group), max_tokens=max_tokens, stop=GROUPED_STOP
        )
        reply = await self._post(session, self._endpoint, payload)
        # Never more tokens than asked for, whatever the server sent back.
        records = self._read(lambda: token_records(reply))[:max_tokens]
        tokens = [str(record.get("token", "")) for record in records]
        scores: dict[int, float] = {}
        for number, position in (answer_positions(tokens, len(group)) or {}).items():
            probability = line_probability(records[position])
            if probability is not None:
                scores[number] = probability
        unread = [n for n in range(1, len(group) + 1) if n not in scores]
        asked = await gather_or_cancel(
            self._judge_one(session, request, group[number - 1]) for number in unread
        )
        scores.update(zip(unread, asked, strict=True))
        return [scores[number] for number in range(1, len(group) + 1)]

    async def _score_completions(self, session: LoopSession, request: JudgeRequest) -> list[float]:
        """Send the rendered prompts in batched completions requests; scores in order."""
        prompts = [self._render(pointwise_prompt(request, c)) for c in request.candidates]
        batches = self._completion_batches(prompts)
        batch_scores = await gather_warm_first(
            (self._judge_batch(session, [prompts[p] for p in batch]) for batch in batches),
            self._warm_first and len(batches) > 1,
        )
        firsts: list[float | UnreadableAnswer] = [0.0] * len(prompts)
        for batch, values in zip(batches, batch_scores, strict=True):
            for position, value in zip(batch, values, strict=True):
                firsts[position] = value
        return await gather_or_cancel(
            self._answers.settle(
                candidate,
                request.candidates,
                first,
                self._strict_completion(session, request, candidate),
            )
            for candidate, first in zip(request.candidates, firsts, strict=True)
        )

    def _strict_completion(
        self, session: LoopSession, request: JudgeRequest, candidate: Candidate
    ) -> Callable[[], Awaitable[float]]:
        """The stricter re-ask of one candidate, as one completions prompt (rendered only if
        it is asked)."""

        async def ask() -> float:
            prompt = self._render(pointwise_prompt(request, candidate, STRICT_QUESTION))
            value = (await self._judge_batch(session, [prompt]))[0]
            if isinstance(value, UnreadableAnswer):
                raise value
            return value

        return ask

    async def _judge_batch(
        self, session: LoopSession, prompts: list[str]
    ) -> list[float | UnreadableAnswer]:
        """The first-token scores of a batch of rendered prompts, an UnreadableAnswer for a
        prompt whose answer is neither yes nor no."""
        records = await self._prompt_records(session, prompts)
        return self._read(lambda: [record_or_unreadable(record) for record in records])

    async def _prompt_records(
        self, session: LoopSession, prompts: list[str]
    ) -> list[Mapping[str, Any]]:
        """The prompts' first-token records: in one request while the server takes lists,
        one prompt per request once it has refused one. The first list is tried once: a
        refusal with a list status is checked with one prompt alone, a busy server or a
        timeout gets the usual retries, any other refusal is final."""
        if len(prompts) == 1 or self._takes_lists:
            return await self._records_of(session, prompts)
        if self._takes_lists is False:
            return await self._one_by_one(session, prompts)
        try:
            records = await self._records_of(session, prompts, attempts=1)
        except RefusedRequest as refusal:
            if refusal.status not in LIST_REFUSALS and not refusal.transient:
                raise JudgeError(str(refusal)) from refusal.__cause__
            if refusal.status not in LIST_REFUSALS:
                return await self._records_of(session, prompts)
            first = await self._records_of(session, prompts[:1])
            self._refuse_lists(refusal, len(prompts))
            return first + await self._one_by_one(session, prompts[1:])
        self._takes_lists = True
        return records

    async def _one_by_one(
        self, session: LoopSession, prompts: list[str]
    ) -> list[Mapping[str, Any]]:
        """One completions request per prompt, concurrently within the limit."""
        singles = await gather_or_cancel(self._records_of(session, [p]) for p in prompts)
        return [record for single in singles for record in single]

    async def _records_of(
        self, session: LoopSession, prompts: list[str], attempts: int | None = None
    ) -> list[Mapping[str, Any]]:
        """One completions request for the prompts; their first-token records in order."""
        payload = self._completions_payload(prompts)
        reply = await self._post(session, self._completions, payload, attempts)
        return self._read(lambda: first_token_records(reply, len(prompts)))

    def _refuse_lists(self, refusal: RefusedRequest, count: int) -> None:
        """Remember that the server refuses lists of prompts, and say so once."""
        if self._takes_lists is False:
            return
        self._takes_lists = False
        logger.warning(
            self._endpoint.describe(
                f"the server refused a list of {count} prompts (HTTP {refusal.status}) but "
                "answers one; sending one prompt per request from now on (the server said: "
                f"{refusal})"
            )
        )

    def _completion_batches(self, prompts: Sequence[str]) -> list[list[int]]:
        """Prompt positions grouped into requests within the count and body-size limits;
        with ``warm_first`` the first prompt goes alone, ahead of the rest."""
        envelope = len(json.dumps(self._completions_payload([])).encode())
        sizes = [len(json.dumps(prompt, ensure_ascii=False).encode()) + 2 for prompt in prompts]
        for position, size in enumerate(sizes):
            if envelope + size > self._max_body_bytes:
                raise JudgeError(
                    f"judge {self.identity!r}: the prompt of candidate {position} takes "
                    f"{envelope + size:,} bytes, over max_body_bytes={self._max_body_bytes:,}; "
                    "raise max_body_bytes or shorten the passages"
                )
        head = [[0]] if self._warm_first and len(prompts) > 1 else []
        most = 1 if self._takes_lists is False else self._max_batch_size
        rest = plan_batches(envelope, sizes[len(head) :], self._max_body_bytes, most)
        return head + [[position + len(head) for position in batch] for batch in rest]

    def _render(self, prompt: JudgePrompt) -> str:
        """The prompt as the chat template renders its conversation."""
        return self._chat_template(prompt.messages())

    def _chat_payload(
        self, prompt: JudgePrompt, *, max_tokens: int, stop: list[str]
    ) -> dict[str, Any]:
        """A chat completions request for a prompt, its output capped under both names servers
        read, with its cache key when hints are on."""
        payload: dict[str, Any] = {
            "model": self._model,
            "messages": prompt.folded_messages() if self._fold_system else prompt.messages(),
            "max_tokens": max_tokens,
            "max_completion_tokens": max_tokens,
            "stop": stop,
            "temperature": 0,
            "logprobs": True,
            "top_logprobs": TOP_LOGPROBS,
        }
        if self._cache_hints:
            payload["prompt_cache_key"] = prompt.cache_key()
        return payload

    def _completions_payload(self, prompts: list[str]) -> dict[str, Any]:
        """A completions request for rendered prompts, one answer token each."""
        return {
            "model": self._model,
            "prompt": prompts,
            "max_tokens": 1,
            "stop": POINTWISE_STOP,
            "temperature": 0,
            "logprobs": TOP_LOGPROBS,
        }

    async def _post(
        self,
        session: LoopSession,
        endpoint: Endpoint,
        payload: Mapping[str, Any],
        attempts: int | None = None,
    ) -> Any:
        """Send one request within the adaptive concurrency limit and count the reply's tokens;
        with ``attempts`` (a probe) it is tried that often and a failure is a RefusedRequest."""
        policy = self._policy if attempts is None else replace(self._policy, max_attempts=attempts)
        send = post_json if attempts is None else send_json
        reply = await send(session.client, endpoint, payload, policy, self._limits, session.gate)
        add_reply_usage(self.usage, reply)
        return reply

    def _read(self, parse: Callable[[], _T]) -> _T:
        """Run a reply parser, naming the server and model in its JudgeError (an unreadable
        answer passes as it is, for the answer policy)."""
        try:
            return parse()
        except UnreadableAnswer:
            raise
        except JudgeError as error:
            raise JudgeError(self._endpoint.describe(f"model {self._model!r}: {error}")) from None

    def _new_client(self) -> httpx.AsyncClient:
        """An HTTP client that sends the key, if any, and counts every request it sends."""
        key = self._endpoint.key
        headers = {"Authorization": f"Bearer {key.reveal()}"} if key else {}

        async def count_call(_: httpx.Request) -> None:
            self.usage.add(http_calls=1)

        return new_client(
            headers=headers,
            timeout=self._timeout,
            transport=self._http_transport,
            proxy=self._proxy,
            event_hooks={"request": [count_call]},
        )
