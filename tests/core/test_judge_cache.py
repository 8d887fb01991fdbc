"""CachedJudge: hits replay stored scores, misses go to the inner judge once, totals persist."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from sag2_retrievers.errors import JudgeError
from sag2_retrievers.judges.base import Candidate, ContextPassage, Judge, JudgeRequest
from sag2_retrievers.judges.cache import CachedJudge


class RecordingJudge(Judge):
    """Scores a candidate by its text length, records every request, and reports usage."""

    def __init__(self, name: str = "recording:v1", fail_on_call: int | None = None) -> None:
        super().__init__()
        self.name = name
        self.fail_on_call = fail_on_call
        self.requests: list[JudgeRequest] = []
        self.closed = False
        self._lock = threading.Lock()

    @property
    def identity(self) -> str:
        return self.name

    async def _score(self, request: JudgeRequest) -> list[float]:
        with self._lock:
            self.requests.append(request)
            if self.fail_on_call is not None and len(self.requests) >= self.fail_on_call:
                raise JudgeError("simulated outage")
        count = len(request.candidates)
        self.usage.add(
            http_calls=1, input_tokens=10 * count, output_tokens=count, cost_usd=0.5 * count
        )
        return [expected_score(candidate) for candidate in request.candidates]

    async def aclose(self) -> None:
        self.closed = True


def expected_score(candidate: Candidate) -> float:
    """The score RecordingJudge gives a candidate."""
    return (len(candidate.text) % 10) / 10


def candidates(*texts: str) -> tuple[Candidate, ...]:
    """Candidates titled after their text."""
    return tuple(Candidate(title=f"T {text}", text=text) for text in texts)


def request(*texts: str, question: str = "Who?") -> JudgeRequest:
    """A request with empty context for the given candidate texts."""
    return JudgeRequest(question=question, candidates=candidates(*texts))


def asked(judge: RecordingJudge) -> list[list[str]]:
    """The candidate texts of every request the inner judge received, in order."""
    return [[candidate.text for candidate in req.candidates] for req in judge.requests]


@pytest.fixture
def cache_path(tmp_path: Path) -> Path:
    return tmp_path / "index.sqlite"


async def test_hit_returns_stored_score_without_calling_inner(cache_path: Path) -> None:
    inner = RecordingJudge()
    judge = CachedJudge(inner, cache_path)
    first = await judge.score(request("a", "bbb"))
    second = await judge.score(request("a", "bbb"))
    assert first == second == [0.1, 0.3]
    assert len(inner.requests) == 1


async def test_misses_go_to_inner_in_one_request_in_candidate_order(cache_path: Path) -> None:
    inner = RecordingJudge()
    judge = CachedJudge(inner, cache_path)
    await judge.score(request("aa"))
    scores = await judge.score(request("ccccc", "aa", "ddd"))
    assert asked(inner) == [["aa"], ["ccccc", "ddd"]]
    assert scores == [0.5, 0.2, 0.3]


async def test_duplicate_candidates_are_judged_once(cache_path: Path) -> None:
    inner = RecordingJudge()
    judge = CachedJudge(inner, cache_path)
    scores = await judge.score(request("xy", "xy"))
    assert scores == [0.2, 0.2]
    assert asked(inner) == [["xy"]]


@pytest.mark.parametrize(
    "changed",
    [
        {"question": "Where?"},
        {"context": (ContextPassage("Other", "other text"),)},
        {"context": (ContextPassage("Ctx", "context text", previous_score=0.9),)},
        {"note": "Reassess."},
        {"instruction": "Is it relevant?"},
    ],
)
async def test_any_change_to_question_context_note_or_instruction_is_a_miss(
    cache_path: Path, changed: dict[str, object]
) -> None:
    inner = RecordingJudge()
    judge = CachedJudge(inner, cache_path)
    base = replace(request("a"), context=(ContextPassage("Ctx", "context text", 0.4),))
    await judge.score(base)
    await judge.score(replace(base, **changed))  # type: ignore[arg-type]
    assert len(inner.requests) == 2


async def test_different_judge_identity_is_a_miss(cache_path: Path) -> None:
    first_inner, second_inner = RecordingJudge("model-a"), RecordingJudge("model-b")
    await CachedJudge(first_inner, cache_path).score(request("a"))
    await CachedJudge(second_inner, cache_path).score(request("a"))
    assert len(first_inner.requests) == len(second_inner.requests) == 1


async def test_identity_and_data_policy_are_the_inner_judges(cache_path: Path) -> None:
    inner = RecordingJudge("remote:x")
    inner.sends_data_off_machine = True
    judge = CachedJudge(inner, cache_path)
    assert judge.identity == "remote:x"
    assert judge.sends_data_off_machine is True


async def test_hits_count_as_judgments_but_add_no_calls_or_cost(cache_path: Path) -> None:
    judge = CachedJudge(RecordingJudge(), cache_path)
    await judge.score(request("a", "b"))
    await judge.score(request("a", "b", "c"))
    usage = judge.usage.snapshot()
    assert usage.judgments == 5
    assert usage.http_calls == 2
    assert usage.input_tokens == 30
    assert usage.cost_usd == pytest.approx(1.5)


async def test_interrupted_evaluation_resumes_without_paying_twice(cache_path: Path) -> None:
    questions = [request(f"text {n}", "shared", question=f"Q{n}?") for n in range(5)]
    failing = RecordingJudge(fail_on_call=3)
    first_run = CachedJudge(failing, cache_path)
    with pytest.raises(JudgeError):
        for question in questions:
            await first_run.score(question)
    first_run.close()

    healthy = RecordingJudge()
    second_run = CachedJudge(healthy, cache_path)
    for question in questions:
        await second_run.score(question)
    assert [req.question for req in healthy.requests] == ["Q2?", "Q3?", "Q4?"]


async def test_paid_totals_survive_reopening_and_split_exactly(cache_path: Path) -> None:
    judge = CachedJudge(RecordingJudge(), cache_path)
    await judge.score(request("a", "b", "c"))
    await judge.score(request("a", "d"))
    judge.close()

    totals = CachedJudge(RecordingJudge(), cache_path).total_paid()
    assert totals.judgments == 4
    assert totals.http_calls == 2
    assert totals.input_tokens == 40
    assert totals.output_tokens == 4
    assert totals.cost_usd == pytest.approx(2.0)


async def test_totals_count_only_this_judges_rows(cache_path: Path) -> None:
    await CachedJudge(RecordingJudge("model-a"), cache_path).score(request("a", "b"))
    totals = CachedJudge(RecordingJudge("model-b"), cache_path).total_paid()
    assert totals.judgments == 0
    assert totals.cost_usd == 0.0


async def test_cache_leaves_other_tables_of_the_file_alone(cache_path: Path) -> None:
    with sqlite3.connect(cache_path) as connection:
        connection.execute("CREATE TABLE units (id INTEGER PRIMARY KEY, body TEXT)")
        connection.execute("INSERT INTO units (body) VALUES ('kept')")
    judge = CachedJudge(RecordingJudge(), cache_path)
    await judge.score(request("a"))
    judge.close()
    with sqlite3.connect(cache_path) as connection:
        tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}
        units = connection.execute("SELECT body FROM units").fetchall()
    assert tables == {"units", "judgment_cache", "sqlite_autoindex_judgment_cache_1"}
    assert units == [("kept",)]


def test_concurrent_use_from_two_threads(cache_path: Path) -> None:
    inner = RecordingJudge()
    judge = CachedJudge(inner, cache_path)
    texts = [f"passage {n}" * (n % 4 + 1) for n in range(40)]
    results: dict[int, list[list[float]]] = {}
    errors: list[BaseException] = []

    def evaluate(worker: int) -> None:
        async def run() -> list[list[float]]:
            return [await judge.score(request(text, texts[0])) for text in texts]

        try:
            results[worker] = asyncio.run(run())
        except BaseException as error:  # pragma: no cover - reported by the assert below
            errors.append(error)

    threads = [threading.Thread(target=evaluate, args=(worker,)) for worker in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    expected = [[expected_score(c) for c in candidates(text, texts[0])] for text in texts]
    assert results[0] == results[1] == expected
    assert judge.total_paid().judgments == len(texts)
    assert judge.usage.judgments == 2 * 2 * len(texts)


async def test_aclose_closes_the_cache_and_the_inner_judge(cache_path: Path) -> None:
    inner = RecordingJudge()
    judge = CachedJudge(inner, cache_path)
    await judge.aclose()
    assert inner.closed
    with pytest.raises(sqlite3.ProgrammingError):
        judge.total_paid()


async def test_unwritable_cache_path_raises_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(JudgeError, match="could not open the judgment cache"):
        CachedJudge(RecordingJudge(), tmp_path / "missing-dir" / "cache.sqlite")


def test_precompute_is_handed_to_the_inner_judge(cache_path: Path) -> None:
    class Preparing(RecordingJudge):
        def precompute(self, candidates: Sequence[Candidate], *, progress: bool = False) -> int:
            return len(candidates) * (2 if progress else 1)

    judge = CachedJudge(Preparing(), cache_path)
    assert judge.precompute(candidates("a", "b"), progress=True) == 4
    assert CachedJudge(RecordingJudge(), cache_path).precompute(candidates("a")) == 0


class BatchJudge(RecordingJudge):
    """A batch-dependent judge: a candidate's score is its share of the batch's text length."""

    scores_whole_request = True

    async def _score(self, request: JudgeRequest) -> list[float]:
        await super()._score(request)
        total = sum(len(c.text) for c in request.candidates) or 1
        return [len(c.text) / total for c in request.candidates]


async def test_whole_request_judge_never_reuses_a_score_from_another_batch(
    cache_path: Path,
) -> None:
    """A passage judged in one batch is judged again in a different batch, with all its peers."""
    inner = BatchJudge()
    judge = CachedJudge(inner, cache_path)
    first = await judge.score(request("aa", "bbbb"))
    second = await judge.score(request("aa", "bbbbbb"))
    assert first[0] != second[0]
    assert asked(inner) == [["aa", "bbbb"], ["aa", "bbbbbb"]]
    assert await judge.score(request("aa", "bbbb")) == first
    assert len(inner.requests) == 2
    judge.close()


class StandInJudge(Judge):
    """Question "B" gets an unreadable answer (a stand-in 0.5, counted as degraded) while
    question "A", slower, gets a clean one: their inner calls overlap in time."""

    identity = "stand-in:v1"

    async def _score(self, request: JudgeRequest) -> list[float]:
        if request.question == "B":
            await asyncio.sleep(0.02)
            self.usage.add(http_calls=1, degraded=1, cost_usd=1.0)
            await asyncio.sleep(0.08)
            return [0.5]
        await asyncio.sleep(0.05)
        self.usage.add(http_calls=1, cost_usd=2.0)
        return [0.9]


async def test_concurrent_requests_each_keep_their_own_usage(cache_path: Path) -> None:
    """The clean answer is stored and the stand-in is not, whatever the overlap; each stored
    row carries its own request's cost."""
    inner = StandInJudge()
    judge = CachedJudge(inner, cache_path)
    clean, stand_in = request("text", question="A"), request("text", question="B")
    await asyncio.gather(judge.score(clean), judge.score(stand_in))
    await asyncio.gather(judge.score(clean), judge.score(stand_in))
    assert judge.total_paid().cost_usd == 2.0
    assert judge.usage.snapshot().degraded == 2  # B was asked again: never stored
    assert judge.usage.snapshot().http_calls == 3
    judge.close()


class PaidOutageJudge(Judge):
    """Makes a paid call, then fails (an answer that arrived too late to use)."""

    identity = "paid-outage:v1"

    async def _score(self, request: JudgeRequest) -> list[float]:
        self.usage.add(http_calls=1, cost_usd=3.0)
        raise JudgeError("simulated outage after a paid call")


async def test_a_failed_inner_call_is_counted_in_usage_but_stores_nothing(
    cache_path: Path,
) -> None:
    judge = CachedJudge(PaidOutageJudge(), cache_path)
    with pytest.raises(JudgeError):
        await judge.score(request("abc"))
    assert judge.usage.snapshot().cost_usd == 3.0
    assert judge.total_paid().judgments == 0
    judge.close()
