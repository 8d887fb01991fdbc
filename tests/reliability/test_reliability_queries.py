"""Hostile questions through the whole engine: a result or InvalidInputError, never a hang.

Index-level hostile questions live in tests/backends/test_index_hostile.py; these go through
`SAG2Engine.retrieve`, so every round (BM25, judging, expansion, diversity, source mapping)
sees the hostile text. Each retrieval runs in a thread with a deadline, so a hang fails.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sag2_retrievers import (
    Document,
    InvalidInputError,
    RetrievalResult,
    SAG2Engine,
    SQLiteIndex,
)
from sag2_retrievers.judges import CachedJudge, JEVJudge, OverlapJudge
from sag2_retrievers.judges.base import Judge
from tests.fault_server import FaultServer

GUARD_SECONDS = 20.0
TOP_K = 5
HOSTILE_CORPUS = (
    Document("operators", "NOT AND OR NEAR are words here, and so are col and title."),
    Document("syntax", 'C++ and C# and a-b and foo:bar and "quoted" text appear here.'),
    Document("obrien", "O'Brien's pub doesn't close; its owner O'Brien sells tea."),
    Document("sql", "Robert'); DROP TABLE units;-- is a name that breaks careless SQL."),
    Document("dots", "The U.S. Army and e.g. 3.14 and a.b.c and x-y-z are dotted or joined."),
)
CORPUS_WORDS = [
    "Tolkien",
    "Hobbit",
    "Oxford",
    "Łódź",
    "Lodz",
    "Beyoncé",
    "北京大学",
    "Москва",
    "C++",
    "NASA",
    "O'Brien",
    "pub",
    "DROP",
    "units",
]
FTS5_SYNTAX = [
    "AND",
    "OR",
    "NOT",
    "NEAR",
    "NEAR(",
    "NEAR/3",
    "(",
    ")",
    '"',
    '""',
    "*",
    "^",
    ":",
    "+",
    "-",
    "{",
    "}",
    "title:",
    "body:",
    "{title body}:",
    "'",
    ";",
    "--",
    "/*",
    "*/",
    "\\",
    "%",
    "_",
    "\x00",
    "\ud800",
    "\udfff",
    "\u200b",
    "\u202e",
    "\ufeff",
]
_RNG = random.Random(20240611)
LONG_QUESTIONS = {
    "100 KB of one letter": "x" * 100_000,
    "100 KB of corpus words": " ".join(CORPUS_WORDS * 800)[:100_000],
    "100 KB of FTS5 syntax": " ".join(FTS5_SYNTAX * 4_000)[:100_000],
    "100 KB of quotes": '"' * 100_000,
    "100 KB of Chinese": "北京大学是中国的一所大学" * 8_400,
    "100 KB of random code points": "".join(
        chr(_RNG.randrange(0x20, 0x30000)) for _ in range(100_000)
    ),
    "one 100 KB dotted run": "a.b-" * 25_000,
    "combining marks on one letter": "e" + "\u0301" * 100_000,
    "NUL bytes between words": "Tolkien\x00Hobbit\x00" * 7_000,
    "only NUL bytes": "\x00" * 100_000,
    "lone surrogates between words": "Tolkien \ud800 Hobbit \udfff Oxford " * 3_000,
}


@pytest.fixture(scope="module")
def index(
    tmp_path_factory: pytest.TempPathFactory, tiny_corpus: tuple[Document, ...]
) -> Iterator[SQLiteIndex]:
    """The tiny multilingual corpus plus documents full of query syntax and punctuation."""
    with SQLiteIndex(tmp_path_factory.mktemp("queries") / "index.sqlite") as opened:
        opened.add_documents([*tiny_corpus, *HOSTILE_CORPUS], parallel=False)
        yield opened


@pytest.fixture(scope="module")
def engine(index: SQLiteIndex) -> Iterator[SAG2Engine]:
    """The engine with the instant lexical-overlap judge, closed after the module."""
    engine = SAG2Engine(index, OverlapJudge())
    yield engine
    engine.close()


def retrieve_within(engine: SAG2Engine, question: Any, top_k: Any = TOP_K) -> Any:
    """Run the blocking retrieval in a thread; fail if it has not returned by the deadline."""
    outcome: list[Any] = []

    def run() -> None:
        """Keep the result or the exception for the caller."""
        try:
            outcome.append(engine.retrieve(question, top_k))
        except BaseException as error:
            outcome.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(GUARD_SECONDS)
    assert not thread.is_alive(), f"retrieval of {str(question)[:60]!r} hung"
    return outcome[0]


def assert_result_or_invalid_input(engine: SAG2Engine, question: Any, top_k: Any = TOP_K) -> None:
    """The outcome is InvalidInputError or a well-formed result; anything else is re-raised."""
    outcome = retrieve_within(engine, question, top_k)
    if isinstance(outcome, InvalidInputError):
        return
    if isinstance(outcome, BaseException):
        raise outcome
    assert_well_formed(engine.index, outcome, top_k)


def assert_well_formed(index: SQLiteIndex, result: RetrievalResult, top_k: int) -> None:
    """Hits are unique stored documents, their text is a slice of the source, scores in [0, 1]."""
    assert isinstance(result, RetrievalResult)
    assert len(result.hits) <= top_k
    assert len({hit.doc_id for hit in result.hits}) == len(result.hits)
    for hit in result.hits:
        document = index.document(hit.doc_id)
        assert document is not None
        assert hit.text == document.text[hit.char_start : hit.char_end]
        assert 0.0 <= hit.score <= 1.0
    assert [unit.rank for unit in result.units] == list(range(1, len(result.units) + 1))
    assert not result.degraded


# -- generated questions -------------------------------------------------------------------------


@settings(max_examples=120, deadline=None)
@given(st.text())
def test_arbitrary_unicode_gives_a_result_or_invalid_input(
    engine: SAG2Engine, question: str
) -> None:
    assert_result_or_invalid_input(engine, question)


@settings(max_examples=80, deadline=None)
@given(st.text(st.characters(exclude_categories=[]), max_size=80))
def test_surrogates_and_control_characters_give_a_result_or_invalid_input(
    engine: SAG2Engine, question: str
) -> None:
    assert_result_or_invalid_input(engine, question)


@settings(max_examples=120, deadline=None)
@given(
    st.lists(st.sampled_from(CORPUS_WORDS + FTS5_SYNTAX), max_size=30),
    st.sampled_from([" ", "", "\t", "\x00", '"']),
)
def test_fts5_syntax_mixed_with_matching_words_gives_a_result_or_invalid_input(
    engine: SAG2Engine, pieces: list[str], separator: str
) -> None:
    assert_result_or_invalid_input(engine, separator.join(pieces))


# -- long and special inputs ---------------------------------------------------------------------


@pytest.mark.parametrize("question", LONG_QUESTIONS.values(), ids=LONG_QUESTIONS.keys())
def test_long_hostile_question_gives_a_result_or_invalid_input(
    engine: SAG2Engine, question: str
) -> None:
    assert_result_or_invalid_input(engine, question)


def test_sql_and_fts5_syntax_is_searched_as_words(engine: SAG2Engine) -> None:
    result = retrieve_within(engine, "Robert'); DROP TABLE units;--")
    assert result.hits[0].doc_id == "sql" and result.judgments > 0
    assert engine.index.unit_count() == 15


def test_nul_bytes_separate_words_as_spaces_do(engine: SAG2Engine) -> None:
    with_nul = retrieve_within(engine, "Tolkien\x00Hobbit")
    with_space = retrieve_within(engine, "Tolkien Hobbit")
    assert [hit.doc_id for hit in with_nul.hits] == [hit.doc_id for hit in with_space.hits]
    assert with_nul.hits


def test_question_matching_only_after_the_first_80_tokens_finds_nothing(
    engine: SAG2Engine,
) -> None:
    filler = " ".join(f"zz{number}" for number in range(80))
    result = retrieve_within(engine, filler + " Tolkien")
    assert result.hits == () and result.judgments == 0


@pytest.mark.parametrize("question", [None, b"Tolkien", 42, ["Tolkien"], {"q": "Tolkien"}])
def test_question_that_is_not_a_string_is_invalid_input(engine: SAG2Engine, question: Any) -> None:
    assert isinstance(retrieve_within(engine, question), InvalidInputError)


@pytest.mark.parametrize("top_k", [-1, True, 1.5, "3", None])
def test_top_k_that_is_not_a_non_negative_integer_is_invalid_input(
    engine: SAG2Engine, top_k: Any
) -> None:
    assert isinstance(retrieve_within(engine, "Tolkien", top_k), InvalidInputError)


def test_huge_top_k_returns_every_matching_source_once(engine: SAG2Engine) -> None:
    result = retrieve_within(engine, "Tolkien Hobbit Oxford", 10**18)
    assert_well_formed(engine.index, result, 10**18)
    assert {"tolkien", "hobbit", "oxford"} <= {hit.doc_id for hit in result.hits}


# -- the shipped judges meet hostile questions ---------------------------------------------------

JUDGE_QUESTIONS = [
    pytest.param("Tolkien\x00Hobbit \"}'", id="NUL and quotes"),
    pytest.param("\u202eTolkien\ufeff 北京大学", id="bidi override and BOM"),
]
SURROGATE_QUESTIONS = ["\ud800", "Tolkien \ud800 Hobbit", "Tolkien Hobbit \udfff"]


@pytest.mark.parametrize("question", JUDGE_QUESTIONS)
def test_jev_judge_gives_a_result_or_invalid_input_for_hostile_questions(
    index: SQLiteIndex, question: str
) -> None:
    with FaultServer() as server:
        judge = JEVJudge("test-key", base_url=server.url, max_retry_wait=0.01)
        assert_result_or_invalid_input_with(index, judge, question)


@pytest.mark.parametrize("question", JUDGE_QUESTIONS)
def test_cached_judge_gives_a_result_or_invalid_input_for_hostile_questions(
    index: SQLiteIndex, tmp_path_factory: pytest.TempPathFactory, question: str
) -> None:
    judge = CachedJudge(OverlapJudge(), tmp_path_factory.mktemp("cache") / "cache.sqlite")
    assert_result_or_invalid_input_with(index, judge, question)


def assert_result_or_invalid_input_with(index: SQLiteIndex, judge: Judge, question: str) -> None:
    """Run one hostile question through a fresh engine on this judge, then close it."""
    engine = SAG2Engine(index, judge)
    try:
        assert_result_or_invalid_input(engine, question)
    finally:
        engine.close()


# -- questions that are not valid Unicode text ---------------------------------------------------


@pytest.mark.parametrize("question", SURROGATE_QUESTIONS)
def test_lone_surrogate_question_is_invalid_input_before_the_jev_judge_is_called(
    index: SQLiteIndex, question: str
) -> None:
    with FaultServer() as server:
        judge = JEVJudge("test-key", base_url=server.url, max_retry_wait=0.01)
        engine = SAG2Engine(index, judge)
        try:
            outcome = retrieve_within(engine, question)
        finally:
            engine.close()
        assert isinstance(outcome, InvalidInputError), outcome
        assert "lone surrogate" in str(outcome)
        assert server.stats.requests == 0 and judge.usage.judgments == 0


@pytest.mark.parametrize("question", SURROGATE_QUESTIONS)
async def test_lone_surrogate_question_is_invalid_input_from_aretrieve_with_a_cached_judge(
    index: SQLiteIndex, tmp_path_factory: pytest.TempPathFactory, question: str
) -> None:
    judge = CachedJudge(OverlapJudge(), tmp_path_factory.mktemp("cache") / "cache.sqlite")
    engine = SAG2Engine(index, judge)
    try:
        with pytest.raises(InvalidInputError, match="lone surrogate"):
            await engine.aretrieve(question)
    finally:
        await engine.aclose()
    assert judge.usage.judgments == 0
