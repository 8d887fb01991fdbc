"""`sag2_retrievers.testing.FakeOpenAIServer`: the real OpenAI-compatible judge scores against
it on 127.0.0.1 by every transport (chat, grouped chat, completions prompt lists), copes with
its scripted failures, and `sag2 query --judge openai` runs against it (issue 33, item 15)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sag2_retrievers import Document, SQLiteIndex
from sag2_retrievers.cli import main
from sag2_retrievers.errors import JudgeError
from sag2_retrievers.judges.base import Candidate, ContextPassage, JudgeRequest
from sag2_retrievers.judges.llm._http import RetryPolicy
from sag2_retrievers.testing import FakeOpenAIServer, NoulQuestion, OpenAIFailure


def ostrel(asked: NoulQuestion) -> float:
    """Yes to a candidate naming the province, no otherwise."""
    return 0.9 if "Ostrel" in asked.text else 0.2


REQUEST = JudgeRequest(
    question="Which province holds the port of the lantern festival?",
    candidates=(
        Candidate("Port Varna", "Port Varna lies in Ostrel."),
        Candidate("Festival", "The lantern festival is held at Port Varna."),
        Candidate("Ostrel", "Ostrel is a coastal province."),
    ),
    context=(ContextPassage("Lanterns", "Lanterns are lit at night."),),
)
EXPECTED = [0.9, 0.2, 0.9]
INSTANT = RetryPolicy(initial_wait=0.0, max_wait=0.0)


async def test_chat_transport_scores_each_candidate_with_the_score_function() -> None:
    seen: list[NoulQuestion] = []

    def recording(asked: NoulQuestion) -> float:
        seen.append(asked)
        return ostrel(asked)

    with FakeOpenAIServer(recording) as server:
        scores = await server.judge().score(REQUEST)
    assert scores == pytest.approx(EXPECTED)
    assert len(server.requests) == 3
    assert {asked.question for asked in seen} == {REQUEST.question}
    assert all(asked.context_titles == ("Lanterns",) for asked in seen)


async def test_grouped_chat_answers_every_candidate_in_one_call() -> None:
    with FakeOpenAIServer(ostrel) as server:
        scores = await server.judge(group_size=3).score(REQUEST)
    assert scores == pytest.approx(EXPECTED)
    assert len(server.requests) == 1


async def test_completions_transport_sends_the_prompts_as_one_list() -> None:
    with FakeOpenAIServer(ostrel) as server:
        judge = server.judge(transport="completions", warm_first=False)
        scores = await judge.score(REQUEST)
    assert scores == pytest.approx(EXPECTED)
    assert [path for path, _ in server.requests] == ["/v1/completions"]
    assert len(server.requests[0][1]["prompt"]) == 3


async def test_a_server_refusing_prompt_lists_is_asked_one_prompt_at_a_time() -> None:
    with FakeOpenAIServer(ostrel, takes_lists=False) as server:
        judge = server.judge(transport="completions", warm_first=False)
        scores = await judge.score(REQUEST)
    assert scores == pytest.approx(EXPECTED)
    sizes = [len(body["prompt"]) for _, body in server.requests]
    assert sizes[0] == 3 and set(sizes[1:]) == {1}


async def test_scripted_busy_statuses_and_a_dropped_connection_are_retried() -> None:
    failures = [OpenAIFailure(429, retry_after="0"), OpenAIFailure(503), OpenAIFailure(drop=True)]
    with FakeOpenAIServer(ostrel, failures=failures) as server:
        judge = server.judge(max_concurrency=1, retry_policy=INSTANT, warm_first=False)
        scores = await judge.score(JudgeRequest(REQUEST.question, REQUEST.candidates[:1]))
    assert scores == pytest.approx([0.9])
    assert len(server.requests) == 4


async def test_a_server_without_logprobs_is_named_as_the_problem() -> None:
    with (
        FakeOpenAIServer(ostrel, logprobs=False) as server,
        pytest.raises(JudgeError, match="log-probabilities"),
    ):
        await server.judge().score(REQUEST)


def test_sag2_query_with_the_openai_judge_runs_against_the_fake(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "i.sqlite"
    with SQLiteIndex(db) as index:
        index.add_documents(
            [
                Document("varna", "Port Varna lies in Ostrel.", "Port Varna"),
                Document("festival", "The lantern festival is held at Port Varna.", "Festival"),
            ]
        )
    question = "Which province holds the port of the lantern festival?"
    with FakeOpenAIServer(ostrel) as server:
        argv = ["query", question, "--db", str(db), "--judge", "openai", "--base-url", server.url]
        code = main([*argv, "--model", "fake-judge", "-q"])
    out = capsys.readouterr().out
    assert code == 0 and "Port Varna" in out
    assert server.requests and all(path == "/v1/chat/completions" for path, _ in server.requests)
