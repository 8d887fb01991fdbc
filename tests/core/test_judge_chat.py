"""The chat-model judge base: reading answers, endpoint locality, and the engine's round hook."""

from __future__ import annotations

import asyncio
import math

import pytest

from sag2_retrievers import InvalidInputError, JudgeError, RoundTrace, SAG2Engine, SQLiteIndex
from sag2_retrievers.judges.base import Candidate, JudgeRequest
from sag2_retrievers.judges.fakes import OverlapJudge
from sag2_retrievers.judges.llm.chat import (
    ChatAnswer,
    ChatMessages,
    ChatModelJudge,
    answer_probability,
    openai_alternatives,
    runs_on_this_machine,
)

QUESTION = "Who painted the portrait?"


class EchoJudge(ChatModelJudge):
    """Answers with a fixed reply, recording the messages it was sent."""

    def __init__(
        self, answer: ChatAnswer, max_concurrency: int = 2, graded: bool | None = False
    ) -> None:
        super().__init__(max_concurrency=max_concurrency, graded=graded)
        self.answer = answer
        self.sent: list[ChatMessages] = []

    @property
    def identity(self) -> str:
        return "echo"

    async def _ask(self, messages: ChatMessages) -> ChatAnswer:
        self.sent.append(messages)
        return self.answer


@pytest.mark.parametrize(
    ("reply", "score"),
    [("Yes", 1.0), ("yes.", 1.0), ("**No**", 0.0), (" no\n", 0.0), ("NO!", 0.0)],
)
def test_a_one_word_reply_is_a_coarse_score(reply: str, score: float) -> None:
    """Case, whitespace and punctuation around the single word are ignored."""
    assert answer_probability(ChatAnswer(reply)) == score


@pytest.mark.parametrize("reply", ["", "Maybe", "Yes, because the text says so", "yes no"])
def test_anything_but_one_yes_or_no_is_a_judge_error(reply: str) -> None:
    """An empty, hedged or explained answer cannot be read as a score."""
    with pytest.raises(JudgeError, match="not yes or no"):
        answer_probability(ChatAnswer(reply))


def test_logprobs_are_normalised_between_yes_and_no_token_spellings() -> None:
    """ " Yes" and "yes" add up; the reply text does not matter when logprobs decide."""
    alternatives = (("Yes", math.log(0.3)), (" yes", math.log(0.1)), ("No", math.log(0.4)))
    assert answer_probability(ChatAnswer("No", alternatives)) == pytest.approx(0.5)


def test_openai_records_drop_malformed_or_positive_logprobs() -> None:
    """Only string tokens with finite logprobs <= 0 are trusted."""
    record = {
        "top_logprobs": [
            {"token": "Yes", "logprob": -0.5},
            {"token": "No", "logprob": 3.0},
            {"token": 7, "logprob": -0.1},
            {"token": "no", "logprob": float("nan")},
            "junk",
        ]
    }
    assert openai_alternatives(record) == (("Yes", -0.5),)
    assert openai_alternatives({"top_logprobs": "x"}) is None


class Endpoint:
    """A stand-in model object declaring its server under the given attributes."""

    def __init__(self, **attributes: object) -> None:
        self.__dict__.update(attributes)


@pytest.mark.parametrize(
    ("attributes", "local"),
    [
        ({"base_url": "http://127.0.0.1:8000/v1"}, True),
        ({"api_base": "http://localhost:11434"}, True),
        ({"host": "[::1]:8080"}, True),
        ({"base_url": "localhost:11434", "api_base": "https://api.example.com"}, False),
        ({"openai_api_base": "http://192.168.1.5:8000"}, False),
        ({"base_url": "http://0.0.0.0:8000"}, False),
        ({"base_url": "http://[::1"}, False),
        ({"base_url": None}, False),
        ({}, False),
    ],
)
def test_only_declared_loopback_endpoints_are_on_this_machine(
    attributes: dict[str, object], local: bool
) -> None:
    """Unknown, unparseable or any non-loopback endpoint means the data leaves the machine."""
    assert runs_on_this_machine(Endpoint(**attributes)) is local


def test_chat_judge_sends_one_conversation_per_candidate_and_counts_calls() -> None:
    """Two candidates, two conversations ending in the candidate; two calls counted."""
    judge = EchoJudge(ChatAnswer("yes", input_tokens=12, output_tokens=1))
    request = JudgeRequest(QUESTION, (Candidate("A", "first"), Candidate("B", "second")))
    assert asyncio.run(judge.score(request)) == [1.0, 1.0]
    assert [messages[0]["role"] for messages in judge.sent] == ["system", "system"]
    assert {messages[1]["content"].count("first") for messages in judge.sent} == {0, 1}
    usage = judge.usage.snapshot()
    assert (usage.http_calls, usage.input_tokens, usage.output_tokens) == (2, 24, 2)


def test_max_concurrency_must_be_positive() -> None:
    """A zero cap would deadlock; it is refused up front."""
    with pytest.raises(InvalidInputError, match="max_concurrency must be at least 1, got 0"):
        EchoJudge(ChatAnswer("yes"), max_concurrency=0)


@pytest.mark.parametrize("asynchronous", [False, True])
def test_on_round_receives_each_round_as_it_is_scored(
    tiny_index: SQLiteIndex, asynchronous: bool
) -> None:
    """The callback sees round r before round r+1 is judged; async callbacks are awaited."""
    judge = OverlapJudge()
    received: list[RoundTrace] = []
    judgments_at_report: list[int] = []

    def record(trace: RoundTrace) -> None:
        received.append(trace)
        judgments_at_report.append(judge.usage.judgments)

    async def record_async(trace: RoundTrace) -> None:
        await asyncio.sleep(0)
        record(trace)

    engine = SAG2Engine(tiny_index, judge)
    question = "Where did the author of The Hobbit teach?"
    if asynchronous:
        result = asyncio.run(engine.aretrieve(question, on_round=record_async))
    else:
        result = engine.retrieve(question, on_round=record)
    engine.close()
    assert tuple(received) == result.trace and len(received) >= 2
    cumulative = [sum(t.judgments for t in received[: i + 1]) for i in range(len(received))]
    assert judgments_at_report == cumulative
    for trace in received:
        assert len(trace.pool) == len(trace.scores) == trace.pool_size


class FailingJudge(EchoJudge):
    """A chat judge whose model call raises a framework's own exception."""

    async def _ask(self, messages: ChatMessages) -> ChatAnswer:
        raise ConnectionError("connection refused by http://user:secret@10.0.0.1:8000")


def test_a_failing_model_call_is_a_judge_error_without_its_message() -> None:
    """The engine's lexical fallback sees a JudgeError; the cause's text is not repeated."""
    request = JudgeRequest(QUESTION, (Candidate("A", "first"),))
    with pytest.raises(JudgeError, match=r"model call failed \(ConnectionError\)") as raised:
        asyncio.run(FailingJudge(ChatAnswer("yes")).score(request))
    assert "secret" not in str(raised.value)
    assert isinstance(raised.value.__cause__, ConnectionError)
