"""PostgreSQL's posting blocks against SQLite after adds, deletes, upserts and merges.

Both backends get the same writes in the same order, in batches small enough that the
PostgreSQL segments are merged several times; every ranking, expansion, pool score and
document frequency must then be SQLite's, score for score.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from sag2_retrievers import Document, SQLiteIndex
from sag2_retrievers.analysis import tokenize
from sag2_retrievers.errors import IndexUnavailableError

psycopg = pytest.importorskip("psycopg")
from sag2_retrievers.backends.postgres import PostgresIndex, compaction  # noqa: E402

BATCH = 10


def term_sets(index: SQLiteIndex, documents: list[Document]) -> list[list[str]]:
    """Query term lists taken from the documents' titles and first sentences."""
    sets = []
    for document in documents[::7]:
        sets.append(index.query_terms(f"{document.title} {document.text.split('.')[0]}"))
    return [terms for terms in sets if terms]


def phrases_of(documents: list[Document]) -> list[str]:
    """Multiword phrases (analysed titles of two or more tokens) and one never present."""
    titles = {" ".join(tokenize(d.title)) for d in documents}
    return [*sorted(t for t in titles if " " in t)[:15], "zebra quantum"]


def assert_same(lite: SQLiteIndex, pg: PostgresIndex, documents: list[Document]) -> None:
    """Rankings, pool scores, expansions and dfs of PostgreSQL equal SQLite's exactly."""
    phrases = phrases_of(documents)
    for terms in term_sets(lite, documents):
        assert pg.rank_expression(terms, 50) == lite.rank_expression(terms, 50)
        with_phrase = [*terms[:3], phrases[len(terms) % len(phrases)]]
        assert pg.rank_expression(with_phrase, 50) == lite.rank_expression(with_phrase, 50)
        pool = [unit for unit, _ in lite.rank_expression(terms, 30)]
        assert pg.score_units(with_phrase, pool) == lite.score_units(with_phrase, pool)
        required = [*terms[:4], *phrases[:3]]
        exclude = pool[:5]
        assert pg.expand(required, terms, exclude, 5) == lite.expand(required, terms, exclude, 5)
    terms = [*phrases, "the", "river", "absent-token"]
    assert pg.document_frequencies(terms) == lite.document_frequencies(terms)
    assert pg.document_frequencies_any(terms) == lite.document_frequencies_any(terms)
    assert pg.unit_count() == lite.unit_count()


@pytest.fixture
def both(
    tmp_path: Path, postgres_server, postgres_schema: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[SQLiteIndex, PostgresIndex]]:
    """An empty SQLite index and an empty PostgreSQL index merging past 4 segments."""
    monkeypatch.setattr(compaction, "MAX_SEGMENTS", 4)
    with (
        SQLiteIndex(tmp_path / "x.sqlite") as lite,
        PostgresIndex(postgres_server.dsn, schema=postgres_schema) as pg,
    ):
        yield lite, pg


def write_both(both: tuple[SQLiteIndex, PostgresIndex], documents: list[Document]) -> None:
    """Ingest ``documents`` in small batches into both indexes."""
    for index in both:
        batches = [documents[i : i + BATCH] for i in range(0, len(documents), BATCH)]
        index.ingest(batches, parallel=False)


def segment_count(pg: PostgresIndex) -> int:
    """How many posting segments the PostgreSQL index holds."""
    return int(pg._fetch(pg._sql("SELECT count(*) FROM {s}.segments"))[0][0])


def test_scores_equal_sqlite_after_adds_and_merges(
    both: tuple[SQLiteIndex, PostgresIndex], musique_documents: list[Document]
) -> None:
    """Twenty small batches: segments were merged, and every score is still SQLite's."""
    write_both(both, musique_documents)
    assert segment_count(both[1]) <= 4
    assert_same(*both, musique_documents)


def test_scores_equal_sqlite_after_deletes_and_upserts(
    both: tuple[SQLiteIndex, PostgresIndex], musique_documents: list[Document]
) -> None:
    """Deleted units leave every ranking; upserted documents score with their new text."""
    write_both(both, musique_documents)
    gone = [document.id for document in musique_documents[5:60:3]]
    changed = [
        Document(d.id, d.text + " An added sentence about the river Tyne.", title=d.title)
        for d in musique_documents[100:130]
    ]
    for index in both:
        assert index.delete(gone) == len(gone)
        index.add_documents(changed, parallel=False)
    kept = [d for d in musique_documents if d.id not in set(gone)]
    assert_same(*both, kept)
    assert both[1].rank_expression(["tyne"], 100) == both[0].rank_expression(["tyne"], 100)


def test_optimize_merges_to_one_segment_with_the_same_scores(
    both: tuple[SQLiteIndex, PostgresIndex], musique_documents: list[Document]
) -> None:
    """optimize() leaves one segment without the deleted units, scores unchanged."""
    write_both(both, musique_documents)
    for index in both:
        index.delete([document.id for document in musique_documents[:40]])
    both[1].optimize()
    assert segment_count(both[1]) == 1
    assert_same(*both, musique_documents[40:])


def test_optimize_never_merges_more_than_its_bound_with_the_same_scores(
    both: tuple[SQLiteIndex, PostgresIndex],
    musique_documents: list[Document],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Past the bound (here 60 units) optimize() leaves several segments, none merged beyond
    it, and rewrites those within it that held deleted units; every score is still SQLite's."""
    monkeypatch.setattr(compaction, "MAX_INGEST_MERGE_UNITS", 25)
    monkeypatch.setattr(compaction, "MAX_MERGED_UNITS", 60)
    write_both(both, musique_documents)
    pg = both[1]
    before = segment_count(pg)
    for index in both:
        index.delete([document.id for document in musique_documents[:40]])
    pg.optimize()
    rows = pg._fetch(pg._sql("SELECT length(units) / 8, lengths FROM {s}.segments"))
    sizes = [int(units) for units, _ in rows]
    assert 1 < len(sizes) < before
    assert max(sizes) <= 60
    assert all(np.frombuffer(bytes(lengths), dtype="<u4").all() for _, lengths in rows)
    assert_same(*both, musique_documents[40:])


def test_a_schema_of_posting_rows_asks_for_a_rebuild(postgres_server, postgres_schema: str) -> None:
    """A schema without the posting-blocks layout row is refused with what to do."""
    with PostgresIndex(postgres_server.dsn, schema=postgres_schema) as pg:
        pg._fetch(pg._sql("DELETE FROM {s}.meta WHERE key = 'postings_layout' RETURNING key"))
    with pytest.raises(IndexUnavailableError, match="rebuild"):
        PostgresIndex(postgres_server.dsn, schema=postgres_schema)


def test_ingest_merges_stay_within_the_unit_bound_with_the_same_scores(
    both: tuple[SQLiteIndex, PostgresIndex],
    musique_documents: list[Document],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A merge never takes more than the bound (here 25 units), so the writer's memory does
    not grow with the index; segments past it stay, and every score is still SQLite's."""
    monkeypatch.setattr(compaction, "MAX_INGEST_MERGE_UNITS", 25)
    write_both(both, musique_documents)
    pg = both[1]
    sizes = [int(n) for (n,) in pg._fetch(pg._sql("SELECT length(units) / 8 FROM {s}.segments"))]
    assert max(sizes) <= 25 < sum(sizes) and len(sizes) > 4
    assert_same(*both, musique_documents)
