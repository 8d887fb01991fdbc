"""LlamaIndexLLMJudge: any LlamaIndex LLM (Ollama, vLLM, llama.cpp, OpenAI, ...) as the judge."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llama_index.core.base.llms.types import ChatMessage, ChatResponse, LogProb, MessageRole
from llama_index.core.llms import LLM

from sag2_retrievers import InvalidInputError, Judge
from sag2_retrievers.judges.chat import (
    ChatAnswer,
    ChatMessages,
    ChatModelJudge,
    runs_on_this_machine,
    token_count,
    valid_alternatives,
)

ROLES = {"system": MessageRole.SYSTEM, "user": MessageRole.USER}


class LlamaIndexLLMJudge(ChatModelJudge):
    """Ask a LlamaIndex LLM, through its own ``achat``, whether each candidate is evidence.

    The messages are the same evidence instruction, question, context and candidate the other
    judges send. When the reply carries ``ChatResponse.logprobs`` with "yes" or "no" among the
    first token's alternatives the score is P(yes) normalised against P(no); otherwise the
    reply must be the one word yes or no, a coarser 1.0 / 0.0 score. Ask the model for
    log-probabilities where it supports them, e.g. ``OpenAILike(..., logprobs=True,
    top_logprobs=20)``; ``chat_kwargs`` are passed to every ``achat`` call. Because the judge
    calls the LLM's own methods, its calls show up as LLM events and spans in LlamaIndex
    instrumentation. The judge counts as on this machine only when the LLM's endpoint
    (``api_base``, ``base_url``, ...) is a loopback address.
    """

    def __init__(
        self,
        llm: LLM,
        *,
        max_concurrency: int = 8,
        chat_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(max_concurrency=max_concurrency)
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
        """``llama-index:<LLM class>:<model name>``."""
        return f"llama-index:{self.llm.class_name()}:{self._model_name()}"

    async def _ask(self, messages: ChatMessages) -> ChatAnswer:
        """One ``achat`` call; the reply's text, first-token alternatives and token counts."""
        chat = [ChatMessage(role=ROLES[m["role"]], content=m["content"]) for m in messages]
        response = await self.llm.achat(chat, **self._chat_kwargs)
        input_tokens, output_tokens = _reported_tokens(response)
        return ChatAnswer(
            response.message.content or "",
            _first_token_alternatives(response.logprobs),
            input_tokens,
            output_tokens,
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


def _reported_tokens(response: ChatResponse) -> tuple[int, int]:
    """(input, output) tokens from wherever common LLM classes report them (0 when absent)."""
    extra = response.additional_kwargs or {}
    raw = response.raw
    usage = _field(raw, "usage")
    for source, prompt_key, completion_key in (
        (extra, "prompt_tokens", "completion_tokens"),
        (usage, "prompt_tokens", "completion_tokens"),
        (raw, "prompt_eval_count", "eval_count"),
    ):
        prompt = token_count(_field(source, prompt_key))
        completion = token_count(_field(source, completion_key))
        if prompt or completion:
            return prompt, completion
    return 0, 0


def _field(source: object, name: str) -> object:
    """A key of a mapping or an attribute of an object (OpenAI replies are objects)."""
    if isinstance(source, Mapping):
        return source.get(name)
    return getattr(source, name, None) if source is not None else None


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
