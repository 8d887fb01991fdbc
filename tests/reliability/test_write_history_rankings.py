"""Differential test (issue 32.9): random write histories (upserts, deletes, re-adds) end in
the rankings a fresh index of the final documents gives, for BM25 and for the engine with a
deterministic judge, on SQLite and on PostgreSQL. Ties are frequent by construction: a small
vocabulary, texts repeated under other ids, and paragraphs repeated inside one document."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sag2_retrievers import SQLiteIndex
from sag2_retrievers.backends.postgres import PostgresIndex
from sag2_retrievers.documents import Document
from sag2_retrievers.engine import SAG2Engine
from sag2_retrievers.judges.fakes import OverlapJudge, ScriptedJudge
from sag2_retrievers.settings import IndexSettings
from tests.postgres_server import PostgresServer

WORDS = [
    "amber",
    "basalt",
    "cedar",
    "delta",
    "ember",
    "fjord",
    "garnet",
    "harbor",
    "island",
    "juniper",
    "kestrel",
    "lagoon",
]
QUESTIONS = [
    "amber",
    "cedar harbor",
    "ember fjord island",
    "Which garnet lagoon lies near the juniper kestrel?",
    "basalt delta amber cedar",
]
SETTINGS = IndexSettings(chunk_chars=120)  # several units per longer document
HISTORIES = 4
Ranking = list[tuple[str, int, float]]


def _text(rng: random.Random) -> str:
    """A short text from the small vocabulary, sometimes two paragraphs, one repeated."""
    sentence = " ".join(rng.choices(WORDS, k=rng.randint(3, 7))).capitalize() + "."
    if rng.random() < 0.3:
        return f"{sentence}\n\n{' '.join(rng.choices(WORDS, k=12))}.\n\n{sentence}"
    return sentence


def _final_documents(rng: random.Random) -> list[Document]:
    """The documents every history ends with; a third repeat another's text (exact ties)."""
    documents: list[Document] = []
    for number in range(30):
        text = rng.choice(documents).text if documents and rng.random() < 0.33 else _text(rng)
        documents.append(Document(f"d{number:02d}", text, metadata={"group": number % 3}))
    return documents


def _write_history(index: Any, final: list[Document], rng: random.Random) -> None:
    """Random upserts of other texts, deletes and re-adds, then the final documents in a
    random order and the deletion of every document not among them."""
    extra = [Document(f"x{number}", _text(rng)) for number in range(6)]
    for _ in range(40):
        document = rng.choice(final + extra)
        action = rng.random()
        if action < 0.45:
            changed = Document(document.id, _text(rng), metadata=dict(document.metadata))
            index.add_documents([changed], parallel=False)
        elif action < 0.7:
            index.delete([document.id])
        else:
            index.add_documents([document], parallel=False)
    for document in rng.sample(final, len(final)):
        index.add_documents([document], parallel=False)
    index.delete([document.id for document in extra])


def _bm25_rankings(index: Any) -> list[Ranking]:
    """Top 12 units per question (unfiltered and filtered) as (document, offset, score)."""
    rankings = []
    for question in QUESTIONS:
        for filters in (None, {"group": 1}):
            hits = index.search(question, 12, filters=filters)
            rankings.append([(hit.doc_id, hit.char_start, hit.score) for hit in hits])
    return rankings


def _engine_rankings(index: Any) -> list[Ranking]:
    """The engine's final unit ranking per question, with two deterministic judges: word
    overlap, and one score for every passage (so judge and fusion scores tie across rounds)."""
    rankings = []
    for judge in (OverlapJudge(), ScriptedJudge({}, default=0.5)):
        engine = SAG2Engine(index, judge)
        for question in QUESTIONS:
            units = engine.retrieve(question, 10).units
            rankings.append([(unit.doc_id, unit.char_start, unit.score) for unit in units])
    return rankings


def _expansions(index: Any) -> list[list[tuple[str, int]]]:
    """Each word's top 5 expansion units (scored by two others) as (document, offset)."""
    found = index.expand(WORDS, ["amber", "harbor"], exclude=(), limit=5)
    where = {unit.unit_id: (unit.doc_id, unit.char_start) for unit in _all_units(index)}
    return [[where[unit] for unit in found[word]] for word in WORDS]


def _all_units(index: Any) -> Iterator[Any]:
    """Every live unit of a small index (ids below a bound no history here reaches)."""
    return iter(index.units(range(1, 5_000)).values())


def _assert_same_rankings(
    open_index: Callable[[str], Any], rng: random.Random, final: list[Document]
) -> None:
    """A history's index and a fresh one rank alike: BM25, expansions and the engine."""
    with open_index("history") as replayed, open_index("fresh") as fresh:
        _write_history(replayed, final, rng)
        fresh.add_documents(sorted(final, key=lambda d: d.id), parallel=False)
        assert _bm25_rankings(replayed) == _bm25_rankings(fresh)
        assert _expansions(replayed) == _expansions(fresh)
        assert _engine_rankings(replayed) == _engine_rankings(fresh)


@pytest.mark.parametrize("seed", range(HISTORIES))
def test_sqlite_rankings_do_not_depend_on_write_history(tmp_path: Path, seed: int) -> None:
    """Defect 9: ties were broken by unit id, which a history of upserts changes."""
    rng = random.Random(seed)
    final = _final_documents(rng)

    def open_index(name: str) -> SQLiteIndex:
        return SQLiteIndex(tmp_path / f"{name}.sqlite", SETTINGS)

    _assert_same_rankings(open_index, rng, final)


@pytest.mark.parametrize("seed", range(HISTORIES))
def test_postgres_rankings_do_not_depend_on_write_history(
    postgres_server: PostgresServer, postgres_schema: str, seed: int
) -> None:
    """The same on a real PostgreSQL server (two schemas: the history's and a fresh one)."""
    rng = random.Random(seed)
    final = _final_documents(rng)

    def open_index(name: str) -> PostgresIndex:
        return PostgresIndex(postgres_server.dsn, SETTINGS, schema=f"{postgres_schema}_{name}")

    try:
        _assert_same_rankings(open_index, rng, final)
    finally:
        _drop_schemas(postgres_server, [f"{postgres_schema}_{n}" for n in ("history", "fresh")])


def _drop_schemas(server: PostgresServer, schemas: list[str]) -> None:
    """Remove the test's schemas (the fixture drops only its own name)."""
    import psycopg

    with psycopg.connect(server.dsn, autocommit=True) as connection:
        for schema in schemas:
            connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
