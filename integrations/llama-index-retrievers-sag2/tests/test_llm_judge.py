"""LlamaIndexLLMJudge over LlamaIndex LLMs, and SAG2's rounds as instrumentation events."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Iterator, Sequence
from typing import Any

import httpx
import pytest
from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    CompletionResponse,
    CompletionResponseGen,
    LLMMetadata,
    LogProb,
    MessageRole,
)
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.instrumentation.events.llm import LLMChatEndEvent
from llama_index.core.llms import CustomLLM, MockLLM
from llama_index.core.llms.callbacks import llm_chat_callback
from llama_index.core.schema import Document
from llama_index.retrievers.sag2 import LlamaIndexLLMJudge, SAG2Retriever, SAG2RoundEvent
from pydantic import Field, PrivateAttr

from sag2_retrievers import JudgeError, RemoteJudgeRefusedError
from sag2_retrievers.judges import Candidate, ContextPassage, JudgeRequest, ScriptedJudge
from sag2_retrievers.judges.llm.openai_compat import build_messages

QUESTION = "Where was the engineer who designed the Eiffel Tower born?"
EVIDENCE = "Gustave Eiffel was born in Dijon in 1832."


def corpus() -> list[Document]:
    """Tower -> engineer -> birthplace, and one distractor."""
    texts = {
        "tower": ("Eiffel Tower", "The Eiffel Tower was designed by the engineer Gustave Eiffel."),
        "eiffel": ("Gustave Eiffel", EVIDENCE),
        "dijon": ("Dijon", "Dijon is a city in Burgundy, famous for its mustard."),
        "paris": ("Paris", "Paris is the capital of France and home to many towers."),
    }
    return [
        Document(id_=key, text=text, metadata={"title": title})
        for key, (title, text) in texts.items()
    ]


def candidate_part(user_message: str) -> str:
    """The candidate's section of a judge message (the context may quote other passages)."""
    return user_message.rpartition("Candidate passage to judge:")[2]


def request(*texts: str) -> JudgeRequest:
    """A request for the Eiffel question over candidates with the given texts."""
    context = (ContextPassage("Eiffel Tower", "Designed by Gustave Eiffel.", 0.9),)
    return JudgeRequest(
        QUESTION, tuple(Candidate(f"t{i}", t) for i, t in enumerate(texts)), context
    )


class ScriptedLLM(CustomLLM):
    """A chat LLM answering from a function of the conversation, optionally with logprobs."""

    api_base: str | None = None
    _answer: Any = PrivateAttr()
    seen: list[list[ChatMessage]] = Field(default_factory=list)
    in_flight: int = 0
    most_in_flight: int = 0

    def __init__(self, answer: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._answer = answer

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="scripted", is_chat_model=True)

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        raise NotImplementedError("the judge calls achat")

    def stream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseGen:
        raise NotImplementedError("the judge calls achat")

    @llm_chat_callback()
    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        self.seen.append(list(messages))
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        await asyncio.sleep(0.001)
        self.in_flight -= 1
        response: ChatResponse = self._answer(messages)
        return response


def reply(text: str, logprobs: list[list[LogProb]] | None = None) -> ChatResponse:
    """A chat response with text, optional first-token alternatives and token counts."""
    return ChatResponse(
        message=ChatMessage(role=MessageRole.ASSISTANT, content=text),
        logprobs=logprobs,
        additional_kwargs={"prompt_tokens": 50, "completion_tokens": 1},
    )


def evidence_logprobs(messages: Sequence[ChatMessage]) -> ChatResponse:
    """Likely yes for the Dijon passage, likely no for everything else."""
    yes, no = (
        (-0.1, -2.4)
        if "born in Dijon" in candidate_part(messages[-1].content or "")
        else (-3.0, -0.05)
    )
    return reply("Yes", [[LogProb(token="Yes", logprob=yes), LogProb(token=" no", logprob=no)]])


def test_scores_from_first_token_logprobs_normalised_between_yes_and_no() -> None:
    """P(yes) / (P(yes) + P(no)) from ChatResponse.logprobs, as the HTTP judge computes it."""
    judge = LlamaIndexLLMJudge(ScriptedLLM(evidence_logprobs))
    scores = asyncio.run(judge.score(request(EVIDENCE, "Paris is a city.")))
    expected_yes = math.exp(-0.1) / (math.exp(-0.1) + math.exp(-2.4))
    expected_no = math.exp(-3.0) / (math.exp(-3.0) + math.exp(-0.05))
    assert scores == pytest.approx([expected_yes, expected_no])


def test_sends_the_same_messages_as_the_other_judges() -> None:
    """System instruction and user message are exactly build_messages' (question, context...)."""
    llm = ScriptedLLM(evidence_logprobs)
    sent = request(EVIDENCE)
    asyncio.run(LlamaIndexLLMJudge(llm).score(sent))
    expected = build_messages(sent, sent.candidates[0])
    assert [(m.role.value, m.content) for m in llm.seen[0]] == [
        (m["role"], m["content"]) for m in expected
    ]


def test_one_word_answers_give_a_coarse_zero_or_one() -> None:
    """Without logprobs, "Yes." scores 1.0 and "no" 0.0."""
    llm = ScriptedLLM(
        lambda m: reply(
            "Yes." if "born in Dijon" in candidate_part(m[-1].content or "") else " no\n"
        )
    )
    judge = LlamaIndexLLMJudge(llm, graded=False)
    scores = asyncio.run(judge.score(request(EVIDENCE, "Paris is a city.")))
    assert scores == [1.0, 0.0]


def test_logprobs_without_yes_or_no_fall_back_to_the_answer_text() -> None:
    """Alternatives naming neither word do not decide; the one-word answer does."""
    llm = ScriptedLLM(lambda m: reply("no", [[LogProb(token="maybe", logprob=-0.2)]]))
    assert asyncio.run(LlamaIndexLLMJudge(llm, graded=False).score(request(EVIDENCE))) == [0.0]


def test_one_unreadable_echo_leaves_the_candidate_unscored() -> None:
    """MockLLM echoes the prompt, no yes/no answer: asked again, then left unscored (no
    previous score, no BM25 score: 0.0) and counted as degraded, without an error."""
    judge = LlamaIndexLLMJudge(MockLLM(), graded=False)
    assert asyncio.run(judge.score(request(EVIDENCE))) == [0.0]
    assert judge.usage.snapshot().degraded == 1


def test_echoes_every_time_stop_the_judge_with_the_likely_cause() -> None:
    """Answers unreadable systematically are a JudgeError naming the judge and the cause."""
    judge = LlamaIndexLLMJudge(MockLLM(), graded=False, max_concurrency=1)
    with pytest.raises(JudgeError, match=r"llama-index:MockLLM.*likely cause"):
        asyncio.run(judge.score(request(EVIDENCE, "a", "b", "c")))


def test_counts_calls_and_reported_tokens() -> None:
    """Each candidate is one model call; prompt and completion tokens are added up."""
    judge = LlamaIndexLLMJudge(ScriptedLLM(evidence_logprobs))
    asyncio.run(judge.score(request(EVIDENCE, "a", "b")))
    usage = judge.usage.snapshot()
    assert (usage.judgments, usage.http_calls) == (3, 3)
    assert (usage.input_tokens, usage.output_tokens) == (150, 3)


def test_concurrent_calls_stay_within_the_cap() -> None:
    """Candidates are asked concurrently, never more than max_concurrency at once."""
    llm = ScriptedLLM(evidence_logprobs)
    judge = LlamaIndexLLMJudge(llm, max_concurrency=3)
    asyncio.run(judge.score(request(*[f"passage {i}" for i in range(12)])))
    assert llm.most_in_flight == 3


def test_only_a_loopback_endpoint_counts_as_on_this_machine() -> None:
    """api_base on 127.0.0.1 is local; a remote host or no declared endpoint is remote."""
    assert not LlamaIndexLLMJudge(
        ScriptedLLM(evidence_logprobs, api_base="http://127.0.0.1:8000/v1")
    ).sends_data_off_machine
    assert LlamaIndexLLMJudge(
        ScriptedLLM(evidence_logprobs, api_base="https://api.example.com/v1")
    ).sends_data_off_machine
    assert LlamaIndexLLMJudge(MockLLM()).sends_data_off_machine


def test_identity_names_the_endpoint_and_scoring_mode_without_credentials() -> None:
    """Two servers, or graded and yes/no scoring, never share cached judgments; a key in the
    endpoint's URL never reaches the identity (it appears in logs and errors)."""
    local = ScriptedLLM(evidence_logprobs, api_base="http://127.0.0.1:8000/v1")
    other = ScriptedLLM(evidence_logprobs, api_base="http://u:secret@10.0.0.5:9000/v1?key=k")
    identities = {
        LlamaIndexLLMJudge(local).identity,
        LlamaIndexLLMJudge(local, graded=True).identity,
        LlamaIndexLLMJudge(local, graded=False).identity,
        LlamaIndexLLMJudge(other).identity,
    }
    assert len(identities) == 4
    assert "@http://127.0.0.1:8000/v1;graded" in LlamaIndexLLMJudge(local, graded=True).identity
    assert not any("secret" in i or "key=" in i for i in identities)


def test_remote_judge_policy_applies_to_a_wrapped_llm(monkeypatch: pytest.MonkeyPatch) -> None:
    """An LLM with no loopback endpoint is refused when remote judges are disallowed."""
    monkeypatch.setenv("SAG2_ALLOW_REMOTE_JUDGES", "0")
    with pytest.raises(RemoteJudgeRefusedError, match="llama-index:MockLLM"):
        SAG2Retriever.from_defaults(documents=corpus(), judge=MockLLM())


def test_an_llm_passed_as_judge_is_wrapped() -> None:
    """judge=llm makes a LlamaIndexLLMJudge over that LLM and retrieves with it."""
    llm = ScriptedLLM(evidence_logprobs, api_base="http://localhost:11434")
    with SAG2Retriever.from_defaults(documents=corpus(), judge=llm, similarity_top_k=2) as r:
        assert isinstance(r.judge, LlamaIndexLLMJudge) and r.judge.llm is llm
        results = r.retrieve(QUESTION)
    assert results[0].node.node_id == "eiffel"
    assert llm.seen


def test_anything_else_as_judge_is_a_type_error_naming_the_judges() -> None:
    """A string or a random object is neither a Judge nor an LLM."""
    with pytest.raises(TypeError, match=r"LlamaIndexLLMJudge.*LlamaIndex LLM.*got str"):
        SAG2Retriever.from_defaults(documents=corpus(), judge="gpt-4o")  # type: ignore[arg-type]


# -- an OpenAI-compatible server behind httpx.MockTransport --------------------------------


def openai_server(request: httpx.Request) -> httpx.Response:
    """Chat completions with first-token top_logprobs, as vLLM or llama-server reply."""
    body = json.loads(request.content)
    assert body["logprobs"] is True and body["top_logprobs"] == 20
    yes, no = (
        (-0.2, -1.8)
        if "born in Dijon" in candidate_part(body["messages"][-1]["content"])
        else (-4.0, -0.02)
    )
    top = [{"token": "Yes", "logprob": yes}, {"token": "No", "logprob": no}]
    choice = {
        "message": {"role": "assistant", "content": "Yes" if yes > no else "No"},
        "logprobs": {"content": [{"token": "Yes", "logprob": yes, "top_logprobs": top}]},
    }
    usage = {"prompt_tokens": 40, "completion_tokens": 1}
    return httpx.Response(200, json={"choices": [choice], "usage": usage})


class OpenAIShapedLLM(CustomLLM):
    """A minimal LlamaIndex LLM over an OpenAI-compatible /v1/chat/completions endpoint."""

    api_base: str
    _transport: httpx.AsyncBaseTransport = PrivateAttr()

    def __init__(self, api_base: str, transport: httpx.AsyncBaseTransport) -> None:
        super().__init__(api_base=api_base)
        self._transport = transport

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="stand-in", is_chat_model=True)

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        raise NotImplementedError("the judge calls achat")

    def stream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseGen:
        raise NotImplementedError("the judge calls achat")

    @llm_chat_callback()
    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        payload = {
            "model": "stand-in",
            "messages": [{"role": m.role.value, "content": m.content} for m in messages],
            **kwargs,
        }
        async with httpx.AsyncClient(transport=self._transport) as client:
            response = await client.post(f"{self.api_base}/chat/completions", json=payload)
        body = response.json()
        choice = body["choices"][0]
        return ChatResponse(
            message=ChatMessage(role=MessageRole.ASSISTANT, content=choice["message"]["content"]),
            logprobs=[
                [LogProb(token=t["token"], logprob=t["logprob"]) for t in position["top_logprobs"]]
                for position in choice["logprobs"]["content"]
            ],
            raw=body,
        )


def test_logprobs_from_an_openai_compatible_server() -> None:
    """Through an LLM pointed at the server: chat_kwargs ask for logprobs, raw usage counts."""
    llm = OpenAIShapedLLM("http://127.0.0.1:8000/v1", httpx.MockTransport(openai_server))
    judge = LlamaIndexLLMJudge(llm, chat_kwargs={"logprobs": True, "top_logprobs": 20})
    scores = asyncio.run(judge.score(request(EVIDENCE, "Paris is a city.")))
    assert scores == pytest.approx(
        [1 / (1 + math.exp(-1.8 + 0.2)), 1 / (1 + math.exp(-0.02 + 4.0))]
    )
    assert not judge.sends_data_off_machine
    assert judge.usage.snapshot().input_tokens == 80


# -- instrumentation ----------------------------------------------------------------------


class Collector(BaseEventHandler):
    """Keeps every instrumentation event it is given."""

    events: list[BaseEvent] = Field(default_factory=list)

    def handle(self, event: BaseEvent, **kwargs: Any) -> None:
        self.events.append(event)


@pytest.fixture
def collector() -> Iterator[Collector]:
    """An event handler attached to the root dispatcher for one test."""
    root = get_dispatcher()
    handler = Collector(events=[])
    root.add_event_handler(handler)
    yield handler
    root.event_handlers.remove(handler)


def rounds(handler: Collector) -> list[SAG2RoundEvent]:
    """The SAG2 round events the handler received."""
    return [e for e in handler.events if isinstance(e, SAG2RoundEvent)]


@pytest.mark.parametrize("asynchronous", [False, True])
def test_each_round_is_an_event_before_the_next_round_is_judged(
    collector: Collector, asynchronous: bool
) -> None:
    """When round r is being judged, the events of rounds 0..r-1 were already dispatched."""
    seen_before_judging: list[int] = []

    def score(request: JudgeRequest, candidate: Candidate) -> float:
        if candidate is request.candidates[0]:
            seen_before_judging.append(len(rounds(collector)))
        return 0.9 if "Eiffel" in candidate.text else 0.1

    with SAG2Retriever.from_defaults(documents=corpus(), judge=ScriptedJudge(score)) as r:
        if asynchronous:
            asyncio.run(r.aretrieve(QUESTION))
        else:
            r.retrieve(QUESTION)
    events = rounds(collector)
    assert seen_before_judging == list(range(len(events)))
    assert [e.round for e in events] == list(range(len(events))) and len(events) >= 2
    first, second = events[0], events[1]
    assert first.seeds == [] and first.pool_size == first.judgments == len(first.new_candidates)
    assert set(second.seeds) <= {"tower", "eiffel", "dijon", "paris"} and second.seeds
    assert second.terms and second.context_size > 0
    assert all(e.seconds >= e.judge_seconds >= 0 for e in events)
    assert len({e.span_id for e in events}) == 1 and first.span_id is not None


def test_llm_judge_calls_are_llm_events_in_the_retrieval(collector: Collector) -> None:
    """The judge calls the LLM's own achat, so each judgment is an LLM chat event."""
    llm = ScriptedLLM(evidence_logprobs, api_base="http://127.0.0.1:1")
    with SAG2Retriever.from_defaults(documents=corpus(), judge=llm) as r:
        r.retrieve(QUESTION)
    chats = [e for e in collector.events if isinstance(e, LLMChatEndEvent)]
    assert len(chats) == len(llm.seen) == sum(e.judgments for e in rounds(collector))


def test_verbose_prints_each_round(capsys: pytest.CaptureFixture[str]) -> None:
    """verbose=True prints one trace line per round with its seeds and terms."""
    judge = ScriptedJudge(lambda q, c: 0.9 if "Eiffel" in c.text else 0.1)
    with SAG2Retriever.from_defaults(documents=corpus(), judge=judge, verbose=True) as r:
        r.retrieve(QUESTION)
    lines = [line for line in capsys.readouterr().out.splitlines() if "SAG2 round" in line]
    assert lines[0].startswith("SAG2 round 0") and "judgments: 2" in lines[0]
    assert lines[1].startswith("SAG2 round 1") and "seeds from" in lines[1] and "terms:" in lines[1]
