"""LangChainJudge: any LangChain chat model (Ollama, vLLM, llama.cpp, OpenAI, ...) as the judge."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import Runnable, RunnableConfig

from sag2_retrievers import InvalidInputError
from sag2_retrievers.judges.llm.chat import (
    ChatAnswer,
    ChatMessages,
    ChatModelJudge,
    openai_alternatives,
    runs_on_this_machine,
)
from sag2_retrievers.judges.llm.prompts import JudgePrompt
from sag2_retrievers.judges.llm.tokens import read_token_counts

from .judge_choice import RUN_CALLBACKS

TOP_LOGPROBS = 20
# Output caps for a model on this machine: a yes/no or 0-4 answer, ended at a line break.
# ChatOpenAI sends only max_completion_tokens, which llama.cpp-style servers ignore, so
# max_tokens also goes in the body.
ANSWER_TOKENS = 4
ANSWER_STOP = ["\n"]
MESSAGE_TYPES = {"system": SystemMessage, "user": HumanMessage}
EPHEMERAL = {"type": "ephemeral"}


class LangChainJudge(ChatModelJudge):
    """Ask a LangChain chat model, through ``ainvoke``, whether each candidate is evidence.

    The messages are the same evidence instruction, question, context and candidate the other
    judges send. When the model declares a ``logprobs`` field (``ChatOpenAI`` and other
    OpenAI-compatible clients do) the judge binds ``logprobs=True, top_logprobs=20`` and scores
    P(yes) normalised against P(no) from ``response_metadata["logprobs"]``; otherwise, or when
    neither word is among the alternatives, it is asked for a 0-4 grade (``graded``, see
    `ChatModelJudge`); with ``graded=False`` a one-word yes or no scores 1.0 / 0.0. An
    unreadable answer is asked once more, then the candidate is left unscored (previous score
    or BM25 prior) and counted in ``usage.degraded``. A model on this machine that declares
    ``stop`` and ``extra_body`` fields (ChatOpenAI) is bound to stop at a line break and to
    ``max_tokens`` in the request body (the model's own, else 4), which local servers honour
    where they ignore ``max_completion_tokens``; hosted models are left
    to their own limits. ``logprobs=False`` never asks for them, ``True`` always does. Inside a
    `SAG2Retriever` run, the model calls appear as child runs of the retrieval. The judge
    counts as on this machine only when the model's endpoint (``base_url``,
    ``openai_api_base``, ...) is a loopback address. A ``ChatAnthropic`` model receives the
    round's shared block as its own content block marked ``cache_control`` (Anthropic caches
    only marked prefixes), the candidate in the next block; the text is unchanged. Cached
    prompt tokens are read from ``usage_metadata["input_token_details"]["cache_read"]``.
    ``warm_first`` and ``graded`` are `ChatModelJudge`'s.
    """

    def __init__(
        self,
        chat_model: BaseChatModel,
        *,
        max_concurrency: int = 8,
        logprobs: bool | None = None,
        warm_first: bool = True,
        graded: bool | None = None,
    ) -> None:
        super().__init__(max_concurrency=max_concurrency, warm_first=warm_first, graded=graded)
        if not isinstance(chat_model, BaseChatModel):
            raise InvalidInputError(
                "LangChainJudge needs a langchain_core BaseChatModel, "
                f"got {type(chat_model).__name__}"
            )
        self.chat_model = chat_model
        self.sends_data_off_machine = not runs_on_this_machine(chat_model)
        self._runnable = _bound(chat_model, logprobs, capped=not self.sends_data_off_machine)

    def __repr__(self) -> str:
        model_class = type(self.chat_model).__name__
        return f"LangChainJudge(chat_model={model_class}, model={self._model()!r})"

    @property
    def identity(self) -> str:
        """``langchain:<model type>:<model name>``, then its endpoint and a fixed scoring mode
        (`ChatModelJudge.identity_details`): caches never mix their scores."""
        name = f"langchain:{self.chat_model._llm_type}:{self._model()}"
        return name + self.identity_details(self.chat_model)

    async def _ask_prompt(self, prompt: JudgePrompt) -> ChatAnswer:
        """An Anthropic model's prompt with its shared block marked for caching; others as is."""
        if not is_anthropic(self.chat_model):
            return await self._ask(prompt.messages())
        blocks: list[str | dict[str, Any]] = [
            {"type": "text", "text": prompt.shared, "cache_control": EPHEMERAL},
            {"type": "text", "text": prompt.specific},
        ]
        return await self._invoke([SystemMessage(content=prompt.instruction), HumanMessage(blocks)])

    async def _ask(self, messages: ChatMessages) -> ChatAnswer:
        """One ``ainvoke`` call of the conversation."""
        return await self._invoke(
            [MESSAGE_TYPES[m["role"]](content=m["content"]) for m in messages]
        )

    async def _invoke(self, chat: list[BaseMessage]) -> ChatAnswer:
        """One ``ainvoke`` call, as a child of the retrieval run when there is one."""
        config: RunnableConfig = {"run_name": "sag2_judge", "callbacks": RUN_CALLBACKS.get()}
        reply = await self._runnable.ainvoke(chat, config=config)
        if not isinstance(reply, AIMessage):
            raise InvalidInputError(
                f"chat model {type(self.chat_model).__name__} returned {type(reply).__name__}, "
                "not an AIMessage"
            )
        counts = read_token_counts(reply.usage_metadata)
        return ChatAnswer(
            reply.text,
            _first_token_alternatives(reply.response_metadata.get("logprobs")),
            counts.input_tokens,
            counts.output_tokens,
            counts.cached_input_tokens,
        )

    def _model(self) -> str:
        """The model name the chat model declares ("unknown" when it declares none)."""
        for name in ("model_name", "model", "model_id"):
            value = getattr(self.chat_model, name, None)
            if isinstance(value, str) and value:
                return value
        return "unknown"


def is_anthropic(model: object) -> bool:
    """Whether a model is langchain-anthropic's ChatAnthropic (or a subclass), by name."""
    return any(
        kind.__name__ == "ChatAnthropic" or kind.__module__.startswith("langchain_anthropic")
        for kind in type(model).__mro__
    )


def _bound(
    chat_model: BaseChatModel, logprobs: bool | None, *, capped: bool
) -> Runnable[list[BaseMessage], BaseMessage]:
    """The model, bound to return top log-probabilities when it supports (or is told to),
    and, when ``capped``, to the output caps a local server honours."""
    fields = type(chat_model).model_fields
    options: dict[str, Any] = {}
    if logprobs or (logprobs is None and "logprobs" in fields):
        options["logprobs"] = True
        if logprobs or "top_logprobs" in fields:
            options["top_logprobs"] = TOP_LOGPROBS
    if capped and "stop" in fields:
        options["stop"] = ANSWER_STOP
    if capped and "extra_body" in fields and getattr(chat_model, "extra_body", None) is None:
        cap = getattr(chat_model, "max_tokens", None)
        options["extra_body"] = {"max_tokens": cap if isinstance(cap, int) else ANSWER_TOKENS}
    return chat_model.bind(**options) if options else chat_model


def _first_token_alternatives(logprobs: object) -> tuple[tuple[str, float], ...] | None:
    """The first token's alternatives from OpenAI-style logprobs metadata (dict or list)."""
    records = logprobs.get("content") if isinstance(logprobs, Mapping) else logprobs
    if not isinstance(records, list) or not records:
        return None
    return openai_alternatives(records[0])
