"""LlamaIndexLLMJudge and provider caches: Anthropic's cache point, cached tokens."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from llama_index.core.base.llms.types import (
    CachePoint,
    ChatMessage,
    ChatResponse,
    CompletionResponse,
    CompletionResponseGen,
    LLMMetadata,
    MessageRole,
    TextBlock,
)
from llama_index.core.llms import CustomLLM
from llama_index.retrievers.sag2 import LlamaIndexLLMJudge
from pydantic import Field

from sag2_retrievers.judges import Candidate, ContextPassage, JudgeRequest
from sag2_retrievers.judges.llm.openai_compat import build_messages

REQUEST = JudgeRequest(
    "Where was the designer of the Eiffel Tower born?",
    (Candidate("Gustave Eiffel", "Eiffel was born in Dijon."), Candidate("Paris", "A city.")),
    (ContextPassage("Eiffel Tower", "Designed by Gustave Eiffel.", 0.9),),
)
ANTHROPIC_USAGE = {
    "input_tokens": 12,
    "output_tokens": 1,
    "cache_read_input_tokens": 380,
    "cache_creation_input_tokens": 0,
}


class RecordingLLM(CustomLLM):
    """An LLM recording the messages it is sent; answers yes with Anthropic-shaped usage."""

    seen: list[list[ChatMessage]] = Field(default_factory=list)

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="recording", is_chat_model=True)

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        raise NotImplementedError("the judge calls achat")

    def stream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseGen:
        raise NotImplementedError("the judge calls achat")

    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        self.seen.append(list(messages))
        return ChatResponse(
            message=ChatMessage(role=MessageRole.ASSISTANT, content="Yes"),
            raw={"usage": ANTHROPIC_USAGE},
        )


class Anthropic(RecordingLLM):
    """Stands in for llama_index.llms.anthropic.Anthropic, recognised by its module."""


Anthropic.__module__ = "llama_index.llms.anthropic.base"


def test_anthropic_gets_a_cache_point_after_the_shared_block() -> None:
    """Text block, cache point, text block; the two texts make the usual user message."""
    llm = Anthropic()
    asyncio.run(LlamaIndexLLMJudge(llm, graded=False).score(REQUEST))
    for messages, candidate in zip(llm.seen, REQUEST.candidates, strict=True):
        expected = build_messages(REQUEST, candidate)
        system, user = messages
        assert system.content == expected[0]["content"]
        shared, point, specific = user.blocks
        assert isinstance(shared, TextBlock) and isinstance(specific, TextBlock)
        assert isinstance(point, CachePoint) and point.cache_control.type == "ephemeral"
        assert candidate.text in specific.text and candidate.text not in shared.text
        assert shared.text + specific.text == expected[1]["content"]


def test_other_llms_get_plain_text_messages() -> None:
    """No blocks beyond the one text of each message."""
    llm = RecordingLLM()
    asyncio.run(LlamaIndexLLMJudge(llm, graded=False).score(REQUEST))
    expected = build_messages(REQUEST, REQUEST.candidates[0])
    assert [m.content for m in llm.seen[0]] == [m["content"] for m in expected]
    assert all(len(m.blocks) == 1 for m in llm.seen[0])


def test_cached_tokens_are_read_from_anthropic_raw_usage() -> None:
    """Anthropic's input_tokens exclude cache reads: the prompt is 12 + 380 tokens."""
    judge = LlamaIndexLLMJudge(Anthropic(), graded=False)
    asyncio.run(judge.score(REQUEST))
    usage = judge.usage.snapshot()
    assert (usage.input_tokens, usage.cached_input_tokens, usage.output_tokens) == (784, 760, 2)
