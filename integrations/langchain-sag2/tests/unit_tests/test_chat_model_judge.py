"""LangChainJudge over LangChain chat models, judge=chat_model, strict fields, live round events."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path
from typing import Any
from uuid import UUID

import httpx
import pytest
from langchain_core.callbacks import (
    AsyncCallbackManagerForLLMRun,
    BaseCallbackHandler,
    CallbackManagerForLLMRun,
)
from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_sag2 import LangChainJudge, SAG2Retriever
from pydantic import Field, ValidationError

from sag2_retrievers import JudgeError, RemoteJudgeRefusedError
from sag2_retrievers.judges import Candidate, ContextPassage, JudgeRequest, ScriptedJudge
from sag2_retrievers.judges.llm.prompts import build_messages

QUESTION = "Where was the designer of the Eiffel Tower born?"
EVIDENCE = "Gustave Eiffel was born in Dijon in 1832."


def request(*texts: str) -> JudgeRequest:
    """A request for the Eiffel question over candidates with the given texts."""
    context = (ContextPassage("Eiffel Tower", "Designed by Gustave Eiffel.", 0.9),)
    return JudgeRequest(
        QUESTION, tuple(Candidate(f"t{i}", t) for i, t in enumerate(texts)), context
    )


def candidate_part(messages: list[BaseMessage]) -> str:
    """The candidate's section of the judge's user message."""
    return str(messages[-1].content).rpartition("Candidate passage to judge:")[2]


class LogprobChat(BaseChatModel):
    """A chat model that, like ChatOpenAI, has logprobs fields and returns logprobs metadata."""

    base_url: str | None = None
    logprobs: bool | None = None
    top_logprobs: int | None = None
    calls: list[dict[str, Any]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "logprob-chat"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.calls.append({"messages": messages, **kwargs})
        yes, no = (-0.1, -2.4) if "born in Dijon" in candidate_part(messages) else (-3.0, -0.05)
        top = [{"token": "Yes", "logprob": yes}, {"token": " No", "logprob": no}]
        message = AIMessage(
            content="Yes" if yes > no else "No",
            response_metadata={"logprobs": {"content": [{"token": "Yes", "top_logprobs": top}]}},
            usage_metadata={"input_tokens": 30, "output_tokens": 1, "total_tokens": 31},
        )
        return ChatResult(generations=[ChatGeneration(message=message)])

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        await asyncio.sleep(0)
        return self._generate(messages, stop, None, **kwargs)


def logprob_chat(base_url: str | None = "http://127.0.0.1:8000/v1") -> LogprobChat:
    """A fresh logprob chat model with its own call log."""
    return LogprobChat(base_url=base_url, calls=[])


def test_binds_logprobs_and_scores_yes_against_no() -> None:
    """A model with logprobs fields is asked for them; P(yes) is normalised against P(no)."""
    model = logprob_chat()
    scores = asyncio.run(LangChainJudge(model).score(request(EVIDENCE, "Paris is a city.")))
    assert scores == pytest.approx(
        [1 / (1 + math.exp(-2.4 + 0.1)), 1 / (1 + math.exp(-0.05 + 3.0))]
    )
    assert all(call["logprobs"] is True and call["top_logprobs"] == 20 for call in model.calls)


def test_sends_the_same_messages_as_the_other_judges() -> None:
    """System and human messages carry exactly build_messages' texts."""
    model = logprob_chat()
    sent = request(EVIDENCE)
    asyncio.run(LangChainJudge(model).score(sent))
    expected = [m["content"] for m in build_messages(sent, sent.candidates[0])]
    messages = model.calls[0]["messages"]
    assert [m.type for m in messages] == ["system", "human"]
    assert [m.content for m in messages] == expected


def test_generic_fake_chat_model_one_word_answers() -> None:
    """Without logprobs, a one-word "Yes" / "no." is a coarse 1.0 / 0.0."""
    model = GenericFakeChatModel(messages=iter([AIMessage("Yes"), AIMessage("no.")]))
    judge = LangChainJudge(model, max_concurrency=1, graded=False)
    assert asyncio.run(judge.score(request(EVIDENCE, "Paris is a city."))) == [1.0, 0.0]


def test_an_unparseable_reply_is_asked_again_then_left_unscored() -> None:
    """A sentence instead of yes or no, twice: the candidate is left unscored and counted."""
    replies = iter([AIMessage("It depends on the context"), AIMessage("It depends.")])
    judge = LangChainJudge(GenericFakeChatModel(messages=replies), graded=False)
    assert asyncio.run(judge.score(request(EVIDENCE))) == [0.0]
    assert judge.usage.snapshot().degraded == 1


def test_systematically_unparseable_replies_are_a_judge_error_quoting_them() -> None:
    """Every reply a sentence: a JudgeError quoting the replies and the likely cause."""
    replies = iter([AIMessage("It depends on the context")] * 8)
    judge = LangChainJudge(GenericFakeChatModel(messages=replies), graded=False, max_concurrency=1)
    with pytest.raises(JudgeError, match=r"It depends on the context.*likely cause"):
        asyncio.run(judge.score(request(EVIDENCE, "a", "b")))


def test_counts_calls_and_reported_tokens() -> None:
    """Each candidate is one model call; usage_metadata tokens are added up."""
    judge = LangChainJudge(logprob_chat())
    asyncio.run(judge.score(request(EVIDENCE, "a")))
    usage = judge.usage.snapshot()
    assert (usage.judgments, usage.http_calls, usage.input_tokens, usage.output_tokens) == (
        2,
        2,
        60,
        2,
    )


def test_only_a_loopback_endpoint_counts_as_on_this_machine() -> None:
    """base_url on localhost is local; another host or no endpoint is remote."""
    assert not LangChainJudge(logprob_chat("http://localhost:11434")).sends_data_off_machine
    assert LangChainJudge(logprob_chat("https://llm.example.com/v1")).sends_data_off_machine
    assert LangChainJudge(logprob_chat(None)).sends_data_off_machine
    assert LangChainJudge(GenericFakeChatModel(messages=iter([]))).sends_data_off_machine


def test_identity_names_the_endpoint_and_scoring_mode_without_credentials() -> None:
    """Two servers, or graded and yes/no scoring, never share cached judgments; a key in the
    endpoint's URL never reaches the identity."""
    identities = {
        LangChainJudge(logprob_chat("http://localhost:11434")).identity,
        LangChainJudge(logprob_chat("http://localhost:11434"), graded=False).identity,
        LangChainJudge(logprob_chat("https://u:secret@llm.example.com/v1?key=k")).identity,
    }
    assert len(identities) == 3
    assert not any("secret" in i or "key=" in i for i in identities)


def test_remote_judge_policy_applies_to_a_wrapped_model(
    monkeypatch: pytest.MonkeyPatch, eiffel_documents: list[Document]
) -> None:
    """A chat model with no loopback endpoint is refused when remote judges are disallowed."""
    monkeypatch.setenv("SAG2_ALLOW_REMOTE_JUDGES", "0")
    with pytest.raises(RemoteJudgeRefusedError, match="langchain:logprob-chat"):
        SAG2Retriever.from_documents(eiffel_documents, judge=logprob_chat("https://x.example"))


def test_a_chat_model_passed_as_judge_is_wrapped(eiffel_documents: list[Document]) -> None:
    """judge=chat_model makes a LangChainJudge and retrieves with it."""
    model = logprob_chat()
    with SAG2Retriever.from_documents(eiffel_documents, judge=model, k=2) as retriever:
        assert isinstance(retriever.judge, LangChainJudge)
        assert retriever.judge.chat_model is model
        assert retriever.invoke(QUESTION)[0].id == "eiffel"
    with SAG2Retriever(judge=model) as direct:
        assert isinstance(direct.judge, LangChainJudge)


def test_anything_else_as_judge_is_a_type_error_naming_the_judges() -> None:
    """A model name string is neither a Judge nor a chat model."""
    with pytest.raises(TypeError, match=r"LangChainJudge.*BaseChatModel.*got str"):
        SAG2Retriever(judge="gpt-4o")


@pytest.mark.parametrize("field", ["search_kwargs", "llm", "top_k"])
def test_unknown_constructor_fields_are_refused_by_name(field: str, tmp_path: Path) -> None:
    """Arguments from other retrievers, or typos, are an error instead of being ignored."""
    with pytest.raises(ValidationError, match=rf"unknown argument\(s\) {field}; it accepts"):
        SAG2Retriever(db_path=tmp_path / "x.sqlite", judge=ScriptedJudge({}), **{field: 3})
    assert not (tmp_path / "x.sqlite").exists()


# -- events during the retrieval -------------------------------------------------------------


class RunRecorder(BaseCallbackHandler):
    """Records custom events and chat model runs with their parents."""

    def __init__(self) -> None:
        self.retriever_runs: list[UUID] = []
        self.events: list[tuple[str, Any]] = []
        self.chat_parents: list[UUID | None] = []

    def on_retriever_start(self, serialized: Any, query: str, *, run_id: UUID, **_: Any) -> None:
        """Note the retriever run."""
        self.retriever_runs.append(run_id)

    def on_custom_event(self, name: str, data: Any, **_: Any) -> None:
        """Note a custom event."""
        self.events.append((name, data))

    def on_chat_model_start(
        self, serialized: Any, messages: Any, *, parent_run_id: UUID | None = None, **_: Any
    ) -> None:
        """Note which run a chat model call belongs to."""
        self.chat_parents.append(parent_run_id)


@pytest.mark.parametrize("asynchronous", [False, True])
def test_round_events_arrive_before_the_next_round_is_judged(
    eiffel_documents: list[Document], asynchronous: bool
) -> None:
    """Each sag2_round event is dispatched when its round completes, not after retrieval."""
    recorder = RunRecorder()
    rounds_seen: list[int] = []

    def score(request: JudgeRequest, candidate: Candidate) -> float:
        if candidate is request.candidates[0]:
            rounds_seen.append(sum(name == "sag2_round" for name, _ in recorder.events))
        return 0.9 if "Eiffel" in candidate.text else 0.1

    with SAG2Retriever.from_documents(eiffel_documents, judge=ScriptedJudge(score)) as retriever:
        config = {"callbacks": [recorder]}
        if asynchronous:
            asyncio.run(retriever.ainvoke(QUESTION, config=config))
        else:
            retriever.invoke(QUESTION, config=config)
    names = [name for name, _ in recorder.events]
    assert rounds_seen == list(range(len(rounds_seen))) and len(rounds_seen) >= 2
    assert names == ["sag2_round"] * len(rounds_seen) + ["sag2_result"]
    assert recorder.events[1][1]["seeds"] and recorder.events[1][1]["terms"]


@pytest.mark.parametrize("asynchronous", [False, True])
def test_judge_calls_are_child_runs_of_the_retrieval(
    eiffel_documents: list[Document], asynchronous: bool
) -> None:
    """Every chat model call made by the judge has the retriever's run as its parent."""
    recorder = RunRecorder()
    model = logprob_chat()
    with SAG2Retriever.from_documents(eiffel_documents, judge=model) as retriever:
        config = {"callbacks": [recorder]}
        if asynchronous:
            asyncio.run(retriever.ainvoke(QUESTION, config=config))
        else:
            retriever.invoke(QUESTION, config=config)
    assert len(recorder.chat_parents) == len(model.calls) > 0
    assert set(recorder.chat_parents) == set(recorder.retriever_runs)


def test_a_local_chat_openai_is_capped_in_a_way_llama_cpp_servers_honour() -> None:
    """ChatOpenAI(max_tokens=1) sends only max_completion_tokens; the judge adds max_tokens
    to the body and a line-break stop, so a server ignoring the first name stops anyway."""
    from langchain_openai import ChatOpenAI

    bodies: list[dict[str, Any]] = []

    def reply(http_request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(http_request.content))
        top = [{"token": "Yes", "logprob": -0.1, "bytes": None}]
        record = {"token": "Yes", "logprob": -0.1, "bytes": None, "top_logprobs": top}
        choice = {
            "index": 0,
            "finish_reason": "stop",
            "message": {"role": "assistant", "content": "Yes"},
            "logprobs": {"content": [record]},
        }
        return httpx.Response(
            200,
            json={
                "id": "1",
                "object": "chat.completion",
                "created": 0,
                "model": "g",
                "choices": [choice],
            },
        )

    model = ChatOpenAI(
        model="g",
        base_url="http://127.0.0.1:8080/v1",
        api_key="none",
        max_tokens=1,
        http_async_client=httpx.AsyncClient(transport=httpx.MockTransport(reply)),
    )
    assert asyncio.run(LangChainJudge(model).score(request(EVIDENCE))) == [1.0]
    assert bodies[0]["max_completion_tokens"] == 1
    assert bodies[0]["max_tokens"] == 1
    assert bodies[0]["stop"] == ["\n"]
