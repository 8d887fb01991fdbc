"""LangChainJudge and provider caches: ChatAnthropic's marked shared block, cached tokens."""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_sag2 import LangChainJudge
from pydantic import Field

from sag2_retrievers.judges import Candidate, ContextPassage, JudgeRequest
from sag2_retrievers.judges.llm.prompts import build_messages

REQUEST = JudgeRequest(
    "Where was the designer of the Eiffel Tower born?",
    (Candidate("Gustave Eiffel", "Eiffel was born in Dijon."), Candidate("Paris", "A city.")),
    (ContextPassage("Eiffel Tower", "Designed by Gustave Eiffel.", 0.9),),
)


class RecordingChat(BaseChatModel):
    """A chat model recording the messages it is sent; answers yes with cache usage."""

    calls: list[list[BaseMessage]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "recording"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.calls.append(messages)
        usage = {
            "input_tokens": 400,
            "output_tokens": 1,
            "total_tokens": 401,
            "input_token_details": {"cache_read": 350},
        }
        message = AIMessage(content="Yes", usage_metadata=usage)  # type: ignore[arg-type]
        return ChatResult(generations=[ChatGeneration(message=message)])

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return self._generate(messages, stop, None, **kwargs)


class ChatAnthropic(RecordingChat):
    """Stands in for langchain_anthropic.ChatAnthropic, recognised by its class name."""


def test_chat_anthropic_gets_the_shared_block_marked_for_caching() -> None:
    """Two content blocks: the shared block with cache_control, then the candidate."""
    model = ChatAnthropic()
    asyncio.run(LangChainJudge(model, graded=False).score(REQUEST))
    for call, candidate in zip(model.calls, REQUEST.candidates, strict=True):
        system, user = call
        expected = build_messages(REQUEST, candidate)
        assert system.content == expected[0]["content"]
        shared, specific = user.content
        assert isinstance(shared, dict) and isinstance(specific, dict)
        assert shared["cache_control"] == {"type": "ephemeral"}
        assert "cache_control" not in specific
        assert candidate.text not in shared["text"] and candidate.text in specific["text"]
        assert shared["text"] + specific["text"] == expected[1]["content"]


def test_other_chat_models_get_plain_text_messages() -> None:
    """No content blocks and no cache markers for models that do not need them."""
    model = RecordingChat()
    asyncio.run(LangChainJudge(model, graded=False).score(REQUEST))
    assert [m.content for m in model.calls[0]] == [
        m["content"] for m in build_messages(REQUEST, REQUEST.candidates[0])
    ]


def test_cached_tokens_are_read_from_usage_metadata() -> None:
    """input_token_details.cache_read is counted as cached input tokens."""
    judge = LangChainJudge(ChatAnthropic(), graded=False)
    asyncio.run(judge.score(REQUEST))
    usage = judge.usage.snapshot()
    assert (usage.http_calls, usage.input_tokens, usage.cached_input_tokens) == (2, 800, 700)
