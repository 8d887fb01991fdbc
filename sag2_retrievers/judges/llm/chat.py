"""A judge over any chat model object: one yes/no question per candidate, read as P(yes).

The framework adapters (LlamaIndex LLMs, LangChain chat models) subclass `ChatModelJudge`
and only convert messages and replies; prompts, concurrency, usage counting and reading the
answer live here, so every chat-model judge asks the same question and scores it one way.

A reply is read in two ways. When the model returns the first token's top log-probabilities
and "yes" or "no" is among them, the score is P(yes) normalised against P(no), as in
`OpenAICompatJudge`: the preferred path. A model that returns no log-probabilities (many
hosted APIs) is asked instead for a graded verdict, one digit from 0 (not evidence) to 4 (a
necessary fact of the chain), read as probability grade / 4: five levels rather than the
1.0 / 0.0 of a bare yes or no, so seed weights and the last round's sort keep some signal.
The first such reply is asked again graded, and the judge asks graded from then on.

An answer that cannot be read (prose, a thinking block) is asked once more, strictly, as a
0-4 grade; if that is unreadable too the candidate is left unscored and counted in
``usage.degraded`` (see `unreadable`, the policy every LLM judge shares), and only answers
unreadable systematically stop the judge.

Within a request, with ``warm_first`` (default), one candidate is asked first and the others
once it has returned, so the round's shared block (sent first, byte-identical for every
candidate) is in the provider's prefix cache for them.
"""

from __future__ import annotations

import abc
import asyncio
import math
import re
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from ...errors import InvalidInputError, JudgeError
from ..base import CallEstimate, Candidate, Judge, JudgeRequest
from ._concurrency import gather_warm_first
from .endpoints import is_loopback_url
from .grading import LONGEST_SHORT_ANSWER, UnreadableAnswer, graded_probability, unreadable_answer
from .prompts import (
    GRADED_QUESTION,
    STRICT_GRADED_QUESTION,
    STRICT_QUESTION,
    JudgePrompt,
    pointwise_prompt,
)
from .prompts import ChatMessages as ChatMessages
from .tokens import token_count as token_count
from .unreadable import AnswerPolicy, attempt

# Attributes under which common model classes keep their server's address (LlamaIndex
# OpenAI/OpenAILike: api_base; Ollama: base_url; LangChain ChatOpenAI: openai_api_base; vLLM
# clients: api_url; others: host, endpoint, server_url).
ENDPOINT_ATTRIBUTES = (
    "base_url",
    "api_base",
    "openai_api_base",
    "api_url",
    "host",
    "endpoint",
    "server_url",
)
_ONE_WORD = re.compile(r"^[\W_]*(yes|no)[\W_]*$", re.IGNORECASE)


@dataclass(frozen=True)
class ChatAnswer:
    """What a chat model said: its text, the first token's alternatives if any, its tokens
    (``input_tokens`` all of the prompt, ``cached_input_tokens`` the part served from cache)."""

    text: str
    alternatives: tuple[tuple[str, float], ...] | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0


class ChatModelJudge(Judge):
    """Ask a chat model whether each candidate is evidence; subclasses implement `_ask`.

    At most ``max_concurrency`` model calls are in flight per event loop. Each call counts as
    one entry of ``usage.http_calls``, with the tokens the model reports. ``warm_first``
    sends one candidate of a request before the others. ``graded``: None (default) asks for
    a 0-4 grade once the model has returned no log-probabilities, True always asks for a
    grade, False never does (a bare yes or no then scores 1.0 or 0.0). An unreadable answer
    is asked once more (as a 0-4 grade, or a strict yes/no with ``graded=False``); then the
    candidate keeps its previous score or a BM25 prior and ``usage.degraded`` counts it.
    ``cached_input_tokens`` in usage are only what the model reports (``cache_reports``
    counts the replies that reported any).
    """

    def __init__(
        self, *, max_concurrency: int = 8, warm_first: bool = True, graded: bool | None = None
    ) -> None:
        super().__init__()
        if not isinstance(max_concurrency, int) or max_concurrency < 1:
            raise InvalidInputError(f"max_concurrency must be at least 1, got {max_concurrency!r}")
        self._max_concurrency = max_concurrency
        self._warm_first = warm_first
        self._graded = graded
        self._scoring = {None: "", True: ";graded", False: ";yes-no"}[graded]
        self._slots: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
            weakref.WeakKeyDictionary()
        )
        self._slots_lock = threading.Lock()
        self._answers = AnswerPolicy(self.usage, lambda text: f"judge {self.identity!r}: {text}")

    def identity_details(self, model: object) -> str:
        """What besides the model's name changes its scores, for a subclass's `identity`: the
        endpoints the model declares (``@http://127.0.0.1:8080/v1``, no credentials or query)
        and a fixed scoring mode (``;graded``, ``;yes-no``)."""
        endpoints = ",".join(endpoint_name(e) for e in model_endpoints(model))
        return (f"@{endpoints}" if endpoints else "") + self._scoring

    @abc.abstractmethod
    async def _ask(self, messages: ChatMessages) -> ChatAnswer:
        """Send one system + user conversation to the model and return its answer."""

    async def _ask_prompt(self, prompt: JudgePrompt) -> ChatAnswer:
        """Send one prompt; adapters whose provider caches marked blocks override this."""
        return await self._ask(prompt.messages())

    async def _score(self, request: JudgeRequest) -> list[float]:
        """Ask about every candidate concurrently, within the concurrency cap."""
        slots = self._loop_slots()
        return await gather_warm_first(
            (self._judge_one(slots, request, candidate) for candidate in request.candidates),
            self._warm_first,
        )

    def estimate(self, request: JudgeRequest) -> CallEstimate:
        """One call per candidate, with its prompt's (roughly counted) tokens."""
        prompts = [pointwise_prompt(request, candidate) for candidate in request.candidates]
        return CallEstimate(len(prompts), sum(prompt.estimated_tokens() for prompt in prompts))

    async def _judge_one(
        self, slots: asyncio.Semaphore, request: JudgeRequest, candidate: Candidate
    ) -> float:
        """The candidate's yes-probability; asked once more when the answer is unreadable,
        then left unscored (its stand-in score) if it still is."""
        first = await attempt(lambda: self._first_answer(slots, request, candidate))
        return await self._answers.settle(
            candidate, request.candidates, first, lambda: self._ask_again(slots, request, candidate)
        )

    async def _ask_again(
        self, slots: asyncio.Semaphore, request: JudgeRequest, candidate: Candidate
    ) -> float:
        """The stricter second question: a bare 0-4 grade, or yes/no when grades are off."""
        if self._graded is False:
            answer = await self._call(slots, pointwise_prompt(request, candidate, STRICT_QUESTION))
            return self._read(lambda _: answer_probability(answer), answer.text)
        strict = pointwise_prompt(request, candidate, STRICT_GRADED_QUESTION)
        answer = await self._call(slots, strict)
        return self._read(lambda text: graded_probability(text, answer.alternatives), answer.text)

    async def _first_answer(
        self, slots: asyncio.Semaphore, request: JudgeRequest, candidate: Candidate
    ) -> float:
        """One model call for one candidate (two when it reveals a model without
        log-probabilities); returns its yes-probability."""
        if self._graded:
            return await self._graded_score(slots, request, candidate)
        answer = await self._call(slots, pointwise_prompt(request, candidate))
        alternatives = answer.alternatives or ()
        if self._graded is None and _normalised_yes(alternatives) is None:
            self._graded = True
            return await self._graded_score(slots, request, candidate)
        return self._read(lambda _: answer_probability(answer), answer.text)

    async def _graded_score(
        self, slots: asyncio.Semaphore, request: JudgeRequest, candidate: Candidate
    ) -> float:
        """The candidate's 0-4 grade as a probability."""
        answer = await self._call(slots, pointwise_prompt(request, candidate, GRADED_QUESTION))
        return self._read(lambda text: graded_probability(text, answer.alternatives), answer.text)

    async def _call(self, slots: asyncio.Semaphore, prompt: JudgePrompt) -> ChatAnswer:
        """One model call within the concurrency cap, counted with its tokens."""
        async with slots:
            try:
                answer = await self._ask_prompt(prompt)
            except JudgeError:
                raise
            except Exception as error:
                # Only the exception's type: framework errors may quote URLs or headers.
                raise JudgeError(
                    f"judge {self.identity!r}: the model call failed ({type(error).__name__}); "
                    "see the chained exception"
                ) from error
        self.usage.add(
            http_calls=1,
            input_tokens=answer.input_tokens,
            cached_input_tokens=answer.cached_input_tokens,
            output_tokens=answer.output_tokens,
        )
        return answer

    def _read(self, parse: Callable[[str], float], text: str) -> float:
        """Read a reply's text, naming this judge in the JudgeError (an unreadable answer
        passes as it is, for the answer policy)."""
        try:
            return parse(text)
        except UnreadableAnswer:
            raise
        except JudgeError as error:
            raise JudgeError(f"judge {self.identity!r}: {error}") from None

    def _loop_slots(self) -> asyncio.Semaphore:
        """This event loop's semaphore (a semaphore may not cross event loops)."""
        loop = asyncio.get_running_loop()
        with self._slots_lock:
            slots = self._slots.get(loop)
            if slots is None:
                slots = asyncio.Semaphore(self._max_concurrency)
                self._slots[loop] = slots
        return slots


def answer_probability(answer: ChatAnswer) -> float:
    """P(yes) from the first token's log-probabilities, else 1.0/0.0 from a one-word answer."""
    if answer.alternatives:
        probability = _normalised_yes(answer.alternatives)
        if probability is not None:
            return probability
    return one_word_answer(answer.text)


def one_word_answer(text: str) -> float:
    """1.0 for a reply that is just "yes", 0.0 for just "no" (case and punctuation ignored)."""
    match = _ONE_WORD.match(text.strip()) if len(text) <= LONGEST_SHORT_ANSWER else None
    if match is None:
        raise unreadable_answer(text, "yes or no", ", or one that returns token log-probabilities")
    return 1.0 if match.group(1).lower() == "yes" else 0.0


def _normalised_yes(alternatives: Sequence[tuple[str, float]]) -> float | None:
    """P(yes) / (P(yes) + P(no)) over the alternatives; None when neither word is there."""
    yes = _word_probability(alternatives, "yes")
    no = _word_probability(alternatives, "no")
    if yes == 0.0 and no == 0.0:
        return None
    return yes / (yes + no)


def _word_probability(alternatives: Sequence[tuple[str, float]], word: str) -> float:
    """Summed probability of the tokens spelling ``word`` (whitespace and case ignored)."""
    return sum(math.exp(lp) for token, lp in alternatives if token.strip().lower() == word)


def openai_alternatives(token_record: object) -> tuple[tuple[str, float], ...] | None:
    """The (token, logprob) pairs of an OpenAI-style first-token record, or None if absent.

    Malformed entries (non-string tokens, non-finite or positive log-probabilities) are
    dropped rather than trusted.
    """
    if not isinstance(token_record, Mapping):
        return None
    entries = token_record.get("top_logprobs")
    if not isinstance(entries, list):
        return None
    pairs = [
        (entry.get("token"), entry.get("logprob"))
        for entry in entries
        if isinstance(entry, Mapping)
    ]
    return valid_alternatives(pairs)


def valid_alternatives(pairs: Sequence[tuple[Any, Any]]) -> tuple[tuple[str, float], ...] | None:
    """Keep well-formed (token, logprob) pairs; None when none is left."""
    kept = tuple(
        (token, float(logprob))
        for token, logprob in pairs
        if isinstance(token, str) and _is_logprob(logprob)
    )
    return kept or None


def _is_logprob(value: object) -> bool:
    """Whether a value is a finite number <= 0 (a log of a probability); booleans excluded."""
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value <= 0.0
    )


def endpoint_name(endpoint: str) -> str:
    """An endpoint as an identity may show it: scheme, host, port and path, never the
    credentials or query a URL may carry."""
    url = _endpoint_url(endpoint)
    if url is None:
        return "unparseable-endpoint"
    port = f":{url.port}" if url.port is not None else ""
    return f"{url.scheme}://{url.host}{port}{url.path.rstrip('/')}"


def _endpoint_url(endpoint: str) -> httpx.URL | None:
    """An endpoint, given as a URL or as a bare ``host:port``, parsed; None when it is not
    a URL."""
    try:
        return httpx.URL(endpoint if "://" in endpoint else f"http://{endpoint}")
    except (httpx.InvalidURL, ValueError, TypeError):
        return None


def model_endpoints(model: object) -> list[str]:
    """The server addresses a model object declares under the usual attribute names."""
    endpoints = []
    for name in ENDPOINT_ATTRIBUTES:
        try:
            value = getattr(model, name, None)
        except Exception:  # a property that fails to compute declares nothing
            continue
        text = str(value).strip() if isinstance(value, str) or _is_url_object(value) else ""
        if text:
            endpoints.append(text)
    return endpoints


def runs_on_this_machine(model: object) -> bool:
    """True only when the model declares an endpoint and every one it declares is loopback.

    A model that names no endpoint (hosted SDK defaults, in-process models, test doubles)
    counts as sending data off the machine: unknown means remote.
    """
    endpoints = model_endpoints(model)
    return bool(endpoints) and all(_is_loopback_endpoint(e) for e in endpoints)


def _is_loopback_endpoint(endpoint: str) -> bool:
    """Whether an endpoint, given as a URL or as a bare ``host:port``, is loopback (an
    unparseable address counts as remote)."""
    url = _endpoint_url(endpoint)
    return url is not None and is_loopback_url(str(url))


def _is_url_object(value: object) -> bool:
    """Whether a value is a URL object (httpx.URL, pydantic's URL types) rather than data."""
    return type(value).__name__ in {"URL", "AnyUrl", "HttpUrl", "AnyHttpUrl", "Url"}
