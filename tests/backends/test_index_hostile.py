"""Hostile questions: FTS5 syntax, control characters and huge inputs never reach SQLite raw."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sag2_retrievers import SQLiteIndex
from sag2_retrievers.documents import Document
from sag2_retrievers.errors import InvalidInputError

SYNTAX_CORPUS = (
    Document(
        "operators", "NOT AND OR NEAR are words here; so are col and title.", title="Operators"
    ),
    Document("syntax", "C++ and C# and a-b and foo:bar appear in this text.", title="Syntax"),
    Document("obrien", "O'Brien's pub doesn't close.", title="O'Brien"),
)

HOSTILE_QUESTIONS = [
    "NOT",
    "AND",
    "OR",
    "NOT NOT NOT",
    "a AND b OR c NOT d",
    "NEAR(a b)",
    "NEAR(near not, 3)",
    "NEAR/3",
    "c++",
    "C#",
    "a-b",
    "-a",
    "a-",
    "foo:bar",
    "title:foo",
    "body : foo",
    "{title body}: foo",
    '"',
    '""',
    '"unclosed phrase',
    "*",
    "foo*",
    "^foo",
    "(",
    ")",
    "(((",
    "^",
    "+",
    "'",
    "O'Brien's",
    "doesn't",
    "the of and a an",
    "",
    " ",
    " \t\r\n ",
    "\x00",
    "foo\x00bar",
    "\ufeff",
    "\u200b",
    "🙂",
    "..",
    "--",
    "a.-b",
    "x" * 100_000,
    "pub " * 25_000,
]


@pytest.fixture(scope="module")
def hostile_index(
    tmp_path_factory: pytest.TempPathFactory, tiny_corpus: tuple[Document, ...]
) -> Iterator[SQLiteIndex]:
    """The tiny corpus plus documents full of FTS5 operator words and punctuation."""
    path: Path = tmp_path_factory.mktemp("hostile") / "index.sqlite"
    with SQLiteIndex(path) as index:
        index.add_documents([*tiny_corpus, *SYNTAX_CORPUS], parallel=False)
        yield index


@pytest.mark.parametrize("question", HOSTILE_QUESTIONS, ids=lambda q: repr(q[:20]))
def test_hostile_question_returns_a_list_of_hits(hostile_index: SQLiteIndex, question: str) -> None:
    hits = hostile_index.search(question)
    assert isinstance(hits, list)
    assert all(hit.score > 0 for hit in hits)


def test_operator_words_are_searched_as_plain_words(hostile_index: SQLiteIndex) -> None:
    assert [hit.doc_id for hit in hostile_index.search("NOT NEAR")] == ["operators"]


def test_column_syntax_is_searched_as_plain_words(hostile_index: SQLiteIndex) -> None:
    assert hostile_index.search("foo:bar")[0].doc_id == "syntax"


def test_apostrophes_split_words_without_breaking_the_query(hostile_index: SQLiteIndex) -> None:
    assert hostile_index.search("O'Brien's")[0].doc_id == "obrien"


def test_question_of_only_stopwords_returns_nothing(hostile_index: SQLiteIndex) -> None:
    assert hostile_index.search("the of and a an") == []


@pytest.mark.parametrize("question", ["", " \t\n", "\x00", '"', "*", "()"])
def test_question_without_tokens_returns_nothing(hostile_index: SQLiteIndex, question: str) -> None:
    assert hostile_index.search(question) == []


@pytest.mark.parametrize(
    ("question", "position"), [("\ud800", 0), ("a\udfffb", 1), ("textile sequel \udc80", 15)]
)
def test_question_with_a_lone_surrogate_is_invalid_input(
    hostile_index: SQLiteIndex, question: str, position: int
) -> None:
    message = f"lone surrogate at position {position}"
    with pytest.raises(InvalidInputError, match=message):
        hostile_index.search(question)
    with pytest.raises(InvalidInputError, match=message):
        hostile_index.query_terms(question)


def test_nul_byte_separates_words(hostile_index: SQLiteIndex) -> None:
    assert hostile_index.search("textile\x00sequel") == hostile_index.search("textile sequel")


def test_huge_question_is_cut_to_its_first_distinct_tokens(hostile_index: SQLiteIndex) -> None:
    # ~86,000 characters: under the 100,000-character limit, far over the analysed 4,000.
    filler = " ".join(f"filler{number}" for number in range(8_000))
    assert hostile_index.search("textile " + filler)[0].doc_id == "lodz"
    assert hostile_index.search(filler + " textile") == []


@settings(max_examples=150, deadline=None)
@given(st.text())
def test_arbitrary_text_never_raises_but_invalid_input(
    hostile_index: SQLiteIndex, question: str
) -> None:
    try:
        hits = hostile_index.search(question)
    except InvalidInputError:
        return
    assert isinstance(hits, list)


@settings(max_examples=100, deadline=None)
@given(st.text(st.characters(exclude_categories=[]), max_size=60))
def test_text_with_surrogates_and_controls_never_raises_but_invalid_input(
    hostile_index: SQLiteIndex, question: str
) -> None:
    try:
        hits = hostile_index.search(question, limit=5)
    except InvalidInputError:
        return
    assert isinstance(hits, list)
