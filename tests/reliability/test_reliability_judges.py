"""Judge faults end to end: SAG2Engine over real HTTP to a fault-injecting server on 127.0.0.1.

Transient faults (429, 5xx, timeouts, cut connections) must be retried until the retrieval
equals a fault-free run; permanent faults (4xx, malformed or out-of-range answers) must raise
one JudgeError and leave no task behind; cancelling a retrieval must drop its HTTP calls.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
import warnings
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from sag2_retrievers import (
    Document,
    JudgeError,
    RetrievalResult,
    SAG2Config,
    SAG2Engine,
    SQLiteIndex,
)
from sag2_retrievers.judges import JEVJudge, OpenAICompatJudge, ScriptedJudge
from sag2_retrievers.judges.base import Candidate, JudgeRequest
from sag2_retrievers.judges.llm._http import RetryPolicy
from sag2_retrievers.judges.llm.openai_compat import build_user_message
from tests.fault_server import (
    Fault,
    FaultPlan,
    FaultServer,
    candidate_score,
    message_score,
)

QUESTION = "w1 w2 w3 w4 w5"
OTHER_QUESTIONS = ("w10 w11 w12", "w20 w30 w40 w50", "w7 w8 w60")
GUARD_SECONDS = 30.0
FAST_RETRY = RetryPolicy(initial_wait=0.0, max_wait=0.01)
TRANSIENT_FAULTS = {
    "429 with retry-after": Fault("status", 429, retry_after="1"),
    "500": Fault("status", 500),
    "502": Fault("status", 502),
    "503": Fault("status", 503),
    "connection cut mid-body": Fault("cut_connection"),
    "timeout": Fault(delay=5.0),
}
PERMANENT_FAULTS = {
    "400": Fault("status", 400),
    "401": Fault("status", 401),
    "403": Fault("status", 403),
    "truncated JSON": Fault("truncated_json"),
    "missing answer": Fault("missing_answer"),
    "out-of-range value": Fault("out_of_range"),
    "answer of the wrong type": Fault("not_noul"),
}


def synthetic_documents(count: int = 150, seed: int = 3) -> list[Document]:
    """Short documents over a small vocabulary, so every round has a full pool to judge."""
    rng = random.Random(seed)
    vocabulary = [f"w{number}" for number in range(80)]
    return [
        Document(
            f"doc-{number}",
            " ".join(rng.sample(vocabulary, 12))
            + ". "
            + " ".join(rng.sample(vocabulary, 12))
            + ".",
            f"Entry {number}",
        )
        for number in range(count)
    ]


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SQLiteIndex]:
    """150 synthetic documents, one unit each."""
    with SQLiteIndex(tmp_path_factory.mktemp("judges") / "index.sqlite") as opened:
        opened.add_documents(synthetic_documents(), parallel=False)
        yield opened


@pytest.fixture
def server() -> Iterator[FaultServer]:
    """A fault-free decision server; tests switch it to their fault plan."""
    with FaultServer() as running:
        yield running


@pytest.fixture
async def jev(server: FaultServer) -> AsyncIterator[JEVJudge]:
    """A JEV judge on the server: small requests (several per round), fast retries."""
    async with jev_judge(server) as judge:
        yield judge


def jev_judge(server: FaultServer, **options: Any) -> JEVJudge:
    """A JEV judge pointed at the server, with test-sized budgets, timeouts and retry waits."""
    settings: dict[str, Any] = {
        "base_url": server.url,
        "token_budget": 4_000,
        "timeout": 10.0,
        "max_retry_wait": 0.01,
    }
    settings.update(options)
    return JEVJudge("test-key", **settings)


def server_scores(_: JudgeRequest, candidate: Candidate) -> float:
    """The JEV server's correct score, computed without the server."""
    return candidate_score(candidate.title, candidate.text)


def chat_scores(request: JudgeRequest, candidate: Candidate) -> float:
    """The chat route's correct yes-probability, computed without the server."""
    return message_score(build_user_message(request, candidate))


def expected(
    index: SQLiteIndex,
    question: str = QUESTION,
    scores: Any = server_scores,
    config: SAG2Config | None = None,
) -> Any:
    """The fault-free retrieval, judged in-process with the server's scoring rule."""
    engine = SAG2Engine(index, ScriptedJudge(scores), config)
    try:
        return signature(engine.retrieve(question))
    finally:
        engine.close()


def signature(result: RetrievalResult) -> tuple[Any, ...]:
    """Everything about a result except timings and usage (floats to 9 places: the chat route
    returns a probability through log-probabilities, exact only to the last bit)."""
    trace = [
        (
            r.round,
            r.seeds,
            tuple((term, round(priority, 9)) for term, priority in r.terms),
            r.new_candidates,
            r.pool_size,
            r.context_size,
            r.judgments,
        )
        for r in result.trace
    ]
    units = [(u.unit_id, u.doc_id, round(u.score, 9), u.round_found, u.rank) for u in result.units]
    hits = [(h.unit_id, h.doc_id, round(h.score, 9)) for h in result.hits]
    return (hits, units, trace, result.stop_reason, result.degraded)


async def retrieve(engine: SAG2Engine, question: str = QUESTION) -> RetrievalResult:
    """aretrieve under a guard, so a hang fails the test instead of stalling the run."""
    return await asyncio.wait_for(engine.aretrieve(question), GUARD_SECONDS)


def other_tasks() -> list[asyncio.Task[Any]]:
    """Unfinished tasks other than the running test."""
    current = asyncio.current_task()
    return [task for task in asyncio.all_tasks() if task is not current and not task.done()]


async def wait_until(condition: Any, seconds: float = 5.0) -> None:
    """Poll a condition until it holds, failing after ``seconds``."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.005)


async def settled(server: FaultServer, quiet: float = 0.2) -> None:
    """Wait until the server has nothing in flight and no new request for ``quiet`` seconds.

    Requests the client had already written before it was cancelled may still be accepted
    from the listen backlog; the server finds each of them abandoned at once.
    """
    seen = -1
    while seen != server.stats.requests:
        seen = server.stats.requests
        await wait_until(lambda: server.stats.in_flight == 0, seconds=2.0)
        await asyncio.sleep(quiet)


# -- fault-free baseline -----------------------------------------------------------------------


async def test_fault_free_server_run_equals_the_same_scores_judged_in_process(
    index: SQLiteIndex, server: FaultServer, jev: JEVJudge
) -> None:
    result = await retrieve(SAG2Engine(index, jev))
    assert signature(result) == expected(index)
    assert result.judgments == result.usage.judgments > 100
    assert server.stats.requests == result.usage.http_calls > len(result.trace)


# -- transient faults --------------------------------------------------------------------------


@pytest.mark.parametrize("fault", TRANSIENT_FAULTS.values(), ids=TRANSIENT_FAULTS.keys())
async def test_transient_faults_are_retried_until_the_result_equals_a_fault_free_run(
    index: SQLiteIndex, server: FaultServer, fault: Fault
) -> None:
    server.set_plan(FaultPlan(script=[fault] * 3))
    async with jev_judge(server, timeout=1.0) as judge:
        result = await retrieve(SAG2Engine(index, judge))
    assert signature(result) == expected(index)
    assert server.stats.faults[fault.label] == 3
    assert server.stats.requests == result.usage.http_calls + 3


async def test_random_transient_faults_on_concurrent_questions_change_no_result(
    index: SQLiteIndex, server: FaultServer
) -> None:
    rates = [(0.05, fault) for fault in TRANSIENT_FAULTS.values() if fault.delay == 0]
    server.set_plan(FaultPlan(rates=rates, latency=(0.002, 0.01), seed=11))
    questions = (QUESTION, *OTHER_QUESTIONS)
    # A 25% fault rate exhausts 12 attempts with probability 0.25**12, about 6e-8 per request.
    async with jev_judge(server, max_concurrency=4, max_attempts=12) as judge:
        engine = SAG2Engine(index, judge)
        results = await asyncio.gather(*(retrieve(engine, q) for q in questions))
    assert [signature(r) for r in results] == [expected(index, q) for q in questions]
    assert server.stats.fault_count > 0
    assert 1 < server.stats.peak_in_flight <= 4


async def test_retries_that_never_succeed_raise_one_judge_error_after_max_attempts(
    index: SQLiteIndex, server: FaultServer
) -> None:
    server.set_plan(FaultPlan(rates=[(1.0, Fault("status", 503))]))
    async with jev_judge(server, max_attempts=3, token_budget=100_000) as judge:
        with pytest.raises(JudgeError, match="gave up after 3 attempts"):
            await retrieve(SAG2Engine(index, judge))
        assert other_tasks() == []
    assert server.stats.requests == 3


# -- permanent faults --------------------------------------------------------------------------


@pytest.mark.parametrize("fault", PERMANENT_FAULTS.values(), ids=PERMANENT_FAULTS.keys())
async def test_permanent_faults_raise_one_judge_error_without_retry_or_leftover_tasks(
    index: SQLiteIndex, server: FaultServer, jev: JEVJudge, fault: Fault
) -> None:
    server.set_plan(FaultPlan(script=[fault]))
    with pytest.raises(JudgeError, match="JEV") as caught:
        await retrieve(SAG2Engine(index, jev))
    assert type(caught.value) is JudgeError
    assert other_tasks() == []
    assert server.stats.faults[fault.label] == 1


async def test_failure_of_every_concurrent_request_still_raises_a_single_judge_error(
    index: SQLiteIndex, server: FaultServer, jev: JEVJudge
) -> None:
    server.set_plan(FaultPlan(rates=[(1.0, Fault("status", 401))], latency=(0.01, 0.02)))
    with pytest.raises(JudgeError, match="HTTP 401") as caught:
        await retrieve(SAG2Engine(index, jev))
    assert type(caught.value) is JudgeError
    assert other_tasks() == []


async def test_judge_fails_cleanly_in_a_later_round_and_serves_the_next_question(
    index: SQLiteIndex, server: FaultServer, jev: JEVJudge
) -> None:
    engine = SAG2Engine(index, jev)
    await retrieve(engine)
    first_round = sum("context" not in body["state"] for body in server.stats.bodies)
    server.set_plan(FaultPlan(script=[Fault()] * first_round + [Fault("out_of_range")]))
    with pytest.raises(JudgeError, match="expected a number in \\[0, 1\\]"):
        await retrieve(engine)
    assert other_tasks() == []
    assert server.stats.bodies[first_round]["state"]["context"]
    server.set_plan(FaultPlan())
    assert signature(await retrieve(engine)) == expected(index)


# -- cancellation ------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["task.cancel()", "asyncio.wait_for timeout"])
async def test_cancelling_a_retrieval_drops_its_http_calls_and_leaves_no_task(
    index: SQLiteIndex, server: FaultServer, jev: JEVJudge, how: str
) -> None:
    server.set_plan(FaultPlan(rates=[(1.0, Fault(delay=10.0))]))
    engine = SAG2Engine(index, jev)
    if how == "task.cancel()":
        task = asyncio.ensure_future(engine.aretrieve(QUESTION))
        await wait_until(lambda: server.stats.in_flight >= 2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    else:
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(engine.aretrieve(QUESTION), 0.3)
    await settled(server)
    assert server.stats.dropped == server.stats.requests > 0
    assert all("context" not in body["state"] for body in server.stats.bodies)
    assert len({json.dumps(body["questions"]) for body in server.stats.bodies}) == len(
        server.stats.bodies
    )
    assert other_tasks() == []


async def test_cancellation_is_not_turned_into_a_degraded_result(
    index: SQLiteIndex, server: FaultServer, jev: JEVJudge
) -> None:
    server.set_plan(FaultPlan(rates=[(1.0, Fault(delay=10.0))]))
    engine = SAG2Engine(index, jev, SAG2Config(on_judge_error="bm25"))
    task = asyncio.ensure_future(engine.aretrieve(QUESTION))
    await wait_until(lambda: server.stats.in_flight >= 1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert other_tasks() == []


async def test_judge_is_usable_again_after_a_cancelled_retrieval(
    index: SQLiteIndex, server: FaultServer, jev: JEVJudge
) -> None:
    server.set_plan(FaultPlan(rates=[(1.0, Fault(delay=10.0))]))
    engine = SAG2Engine(index, jev)
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(engine.aretrieve(QUESTION), 0.2)
    server.set_plan(FaultPlan())
    assert signature(await retrieve(engine)) == expected(index)


# -- degraded mode -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fault",
    [Fault("status", 401), Fault("status", 503), Fault("missing_answer")],
    ids=["401", "503 until retries run out", "missing answer"],
)
async def test_bm25_fallback_returns_lexical_order_with_a_warning(
    index: SQLiteIndex, server: FaultServer, fault: Fault
) -> None:
    server.set_plan(FaultPlan(rates=[(1.0, fault)]))
    async with jev_judge(server, max_attempts=2) as judge:
        engine = SAG2Engine(index, judge, SAG2Config(on_judge_error="bm25"))
        with pytest.warns(UserWarning, match="judge failed, returning lexical order"):
            result = await retrieve(engine)
    assert result.degraded is True
    assert result.stop_reason == "judge failed; lexical order"
    lexical = list(dict.fromkeys(hit.doc_id for hit in index.search(QUESTION, 100)))[:10]
    assert [hit.doc_id for hit in result.hits] == lexical
    assert [unit.unit_id for unit in result.units] == [
        hit.unit_id for hit in index.search(QUESTION, 100)
    ]
    assert other_tasks() == []


async def test_bm25_fallback_after_a_failure_in_the_last_round_still_returns_lexical_order(
    index: SQLiteIndex, server: FaultServer, jev: JEVJudge
) -> None:
    engine = SAG2Engine(index, jev, SAG2Config(on_judge_error="bm25"))
    requests_per_run = (await retrieve(engine)).usage.http_calls
    server.set_plan(FaultPlan(script=[Fault()] * (requests_per_run - 1) + [Fault("status", 400)]))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = await retrieve(engine)
    assert result.degraded and len(caught) == 1
    assert [unit.unit_id for unit in result.units] == [
        hit.unit_id for hit in index.search(QUESTION, 100)
    ]


# -- concurrency cap ---------------------------------------------------------------------------


async def test_shared_concurrency_cap_holds_across_concurrent_questions(
    index: SQLiteIndex, server: FaultServer
) -> None:
    server.set_plan(FaultPlan(latency=(0.01, 0.02)))
    async with jev_judge(server, max_concurrency=3, token_budget=2_000) as judge:
        engine = SAG2Engine(index, judge)
        await asyncio.gather(*(retrieve(engine, q) for q in (QUESTION, OTHER_QUESTIONS[0])))
    assert server.stats.peak_in_flight == 3


# -- OpenAI-compatible judge on loopback ---------------------------------------------------------


@pytest.mark.parametrize(
    "fault",
    [Fault("status", 429, retry_after="1"), Fault("status", 502), Fault("cut_connection")],
    ids=["429", "502", "cut connection"],
)
async def test_openai_compatible_judge_retries_transient_faults_to_the_same_result(
    index: SQLiteIndex, server: FaultServer, fault: Fault
) -> None:
    server.set_plan(FaultPlan(script=[fault] * 3))
    config = SAG2Config(hops=1)
    judge = OpenAICompatJudge(server.url, "fault-model", max_concurrency=8, retry_policy=FAST_RETRY)
    try:
        result = await retrieve(SAG2Engine(index, judge, config))
    finally:
        await judge.aclose()
    assert signature(result) == expected(index, scores=chat_scores, config=config)
    assert server.stats.faults[fault.label] == 3


async def test_openai_compatible_judge_raises_one_judge_error_for_a_reply_without_choices(
    index: SQLiteIndex, server: FaultServer
) -> None:
    server.set_plan(FaultPlan(script=[Fault("missing_answer")]))
    judge = OpenAICompatJudge(server.url, "fault-model")
    try:
        with pytest.raises(JudgeError, match="no choices"):
            await retrieve(SAG2Engine(index, judge))
        assert other_tasks() == []
    finally:
        await judge.aclose()
