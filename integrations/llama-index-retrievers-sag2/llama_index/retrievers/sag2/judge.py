"""LlamaIndexLLMJudge: any LlamaIndex LLM (Ollama, vLLM, llama.cpp, OpenAI, ...) as the judge."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llama_index.core.base.llms.types import (
    CacheControl,
    CachePoint,
    ChatMessage,
    ChatResponse,
    LogProb,
    MessageRole,
    TextBlock,
)
from llama_index.core.llms import LLM

from sag2_retrievers import InvalidInputError, Judge
from sag2_retrievers.judges.llm.chat import (
    ChatAnswer,
    ChatMessages,
    ChatModelJudge,
    runs_on_this_machine,
    valid_alternatives,
)
from sag2_retrievers.judges.llm.prompts import JudgePrompt
from sag2_retrievers.judges.llm.tokens import TokenCounts, field_of, read_token_counts, token_count

ROLES = {"system": MessageRole.SYSTEM, "user": MessageRole.USER}


class LlamaIndexLLMJudge(ChatModelJudge):
    """Ask a LlamaIndex LLM, through its own ``achat``, whether each candidate is evidence.

    The messages are the same evidence instruction, question, context and candidate the other
    judges send. When the reply carries ``ChatResponse.logprobs`` with "yes" or "no" among the
    first token's alternatives the score is P(yes) normalised against P(no); a model that
    returns none is asked for a 0-4 grade (``graded``; with ``graded=False`` a one-word yes or
    no scores 1.0 / 0.0). An unreadable answer is asked once more, then the candidate keeps
    its previous score or a BM25 prior and ``usage.degraded`` counts it. Ask the model for
    log-probabilities where it supports them, e.g. ``OpenAILike(..., logprobs=True,
    top_logprobs=20)``; ``chat_kwargs`` are passed to every ``achat`` call. Because the judge
    calls the LLM's own methods, its calls show up as LLM events and spans in LlamaIndex
    instrumentation. The judge counts as on this machine only when the LLM's endpoint
    (``api_base``, ``base_url``, ...) is a loopback address. An ``Anthropic`` LLM receives the
    round's shared block as its own text block followed by a ``CachePoint`` (Anthropic caches
    only marked prefixes), the candidate in the next block; the text is unchanged. Cached
    prompt tokens are read from the raw reply's usage (OpenAI's ``prompt_tokens_details`` or
    Anthropic's ``cache_read_input_tokens``). ``warm_first`` and ``graded`` are
    `ChatModelJudge`'s.
    """

    def __init__(
        self,
        llm: LLM,
        *,
        max_concurrency: int = 8,
        chat_kwargs: Mapping[str, Any] | None = None,
        warm_first: bool = True,
        graded: bool | None = None,
    ) -> None:
        super().__init__(max_concurrency=max_concurrency, warm_first=warm_first, graded=graded)
        if not isinstance(llm, LLM):
            raise InvalidInputError(
                f"LlamaIndexLLMJudge needs a llama_index.core.llms.LLM, got {type(llm).__name__}"
            )
        self.llm = llm
        self._chat_kwargs = dict(chat_kwargs or {})
        self.sends_data_off_machine = not runs_on_this_machine(llm)

    def __repr__(self) -> str:
        return f"LlamaIndexLLMJudge(llm={type(self.llm).__name__}, model={self._model_name()!r})"

    @property
    def identity(self) -> str:
        """``llama-index:<LLM class>:<model name>``, then its endpoint and a fixed scoring
        mode (`ChatModelJudge.identity_details`): caches never mix their scores."""
        name = f"llama-index:{self.llm.class_name()}:{self._model_name()}"
        return name + self.identity_details(self.llm)

    async def _ask_prompt(self, prompt: JudgePrompt) -> ChatAnswer:
        """An Anthropic LLM's prompt with a cache point after its shared block; others as is."""
        if not is_anthropic(self.llm):
            return await self._ask(prompt.messages())
        user = ChatMessage(
            role=MessageRole.USER,
            blocks=[
                TextBlock(text=prompt.shared),
                CachePoint(cache_control=CacheControl(type="ephemeral")),
                TextBlock(text=prompt.specific),
            ],
        )
        return await self._chat(
            [ChatMessage(role=MessageRole.SYSTEM, content=prompt.instruction), user]
        )

    async def _ask(self, messages: ChatMessages) -> ChatAnswer:
        """One ``achat`` call of the conversation."""
        return await self._chat(
            [ChatMessage(role=ROLES[m["role"]], content=m["content"]) for m in messages]
        )

    async def _chat(self, chat: list[ChatMessage]) -> ChatAnswer:
        """One ``achat`` call; the reply's text, first-token alternatives and token counts."""
        response = await self.llm.achat(chat, **self._chat_kwargs)
        counts = _reported_tokens(response)
        return ChatAnswer(
            response.message.content or "",
            _first_token_alternatives(response.logprobs),
            counts.input_tokens,
            counts.output_tokens,
            counts.cached_input_tokens,
        )

    def _model_name(self) -> str:
        """The model name the LLM reports in its metadata ("unknown" when it reports none)."""
        try:
            return str(self.llm.metadata.model_name)
        except Exception:  # metadata is informative only: never fail a judge on it
            return "unknown"


def _first_token_alternatives(
    logprobs: list[list[LogProb]] | None,
) -> tuple[tuple[str, float], ...] | None:
    """The first generated token's (token, logprob) alternatives, when the LLM returned them."""
    if not logprobs or not logprobs[0]:
        return None
    return valid_alternatives([(entry.token, entry.logprob) for entry in logprobs[0]])


def _reported_tokens(response: ChatResponse) -> TokenCounts:
    """Token counts from wherever common LLM classes report them (0 when absent)."""
    extra = response.additional_kwargs or {}
    raw = response.raw
    for usage in (extra, field_of(raw, "usage")):
        counts = read_token_counts(usage)
        if counts.input_tokens or counts.output_tokens:
            return counts
    # Ollama's native reply.
    return TokenCounts(
        token_count(field_of(raw, "prompt_eval_count")),
        0,
        token_count(field_of(raw, "eval_count")),
    )


def is_anthropic(llm: object) -> bool:
    """Whether an LLM is llama-index-llms-anthropic's Anthropic (or a subclass), by module."""
    return any(
        kind.__module__.startswith("llama_index.llms.anthropic") for kind in type(llm).__mro__
    )


def as_judge(judge: Judge | LLM | None) -> Judge | None:
    """A judge as given, a LlamaIndex LLM wrapped in `LlamaIndexLLMJudge`, or None."""
    if judge is None or isinstance(judge, Judge):
        return judge
    if isinstance(judge, LLM):
        return LlamaIndexLLMJudge(judge)
    raise TypeError(
        f"judge must be a sag2_retrievers Judge (JEVJudge, OpenAICompatJudge, LocalJudge, "
        f"CachedJudge, ...), a LlamaIndexLLMJudge, or a LlamaIndex LLM to wrap in one; "
        f"got {type(judge).__name__}"
    )
