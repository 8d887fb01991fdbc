"""PostgresIndex against a real PostgreSQL server: FTS5's rankings, writes, snapshots, settings."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from sag2_retrievers import Document, IndexSettings, SQLiteIndex
from sag2_retrievers.errors import IndexSettingsMismatchError, InvalidInputError

psycopg = pytest.importorskip("psycopg")
from sag2_retrievers.backends.postgres import PostgresIndex  # noqa: E402

CORPUS = (
    Document("a", "Alpha bravo charlie. Bravo delta.", title="Alpha Station"),
    Document("b", "Charlie delta echo. Echo echo foxtrot golf.", title="Bravo"),
    Document("c", "The Elmo World show. World of Elmo puppets.", title="Elmo World"),
    Document("d", "Golf hotel india juliet kilo lima mike november.", title="Golf"),
    Document("e", "Alpha alpha alpha. A long passage about alpha and bravo and more words."),
    Document("f", "Delta foxtrot. Kilo lima. Co-creator of the U.S. radio show."),
)
QUERIES = (
    ["alpha", "bravo"],
    ["echo", "golf", "kilo"],
    ["elmo world", "show"],
    ["puppets elmo"],
    ["co-creator", "u.s"],
    ["alpha", "alpha station", "delta"],
    ["nothing-here"],
)


def assert_same_ranking(actual: list[tuple[int, float]], expected: list[tuple[int, float]]) -> None:
    """Same unit ids in the same order, scores equal to 1e-9 (approx compares numbers only)."""
    assert [unit for unit, _ in actual] == [unit for unit, _ in expected]
    assert [score for _, score in actual] == pytest.approx([s for _, s in expected], abs=1e-9)


@pytest.fixture
def pair(tmp_path: Path, postgres_server, postgres_schema: str):  # type: ignore[no-untyped-def]
    """The same corpus in SQLite and in PostgreSQL."""
    lite = SQLiteIndex(tmp_path / "x.sqlite")
    lite.add_documents(CORPUS, parallel=False)
    pg = PostgresIndex(postgres_server.dsn, schema=postgres_schema)
    pg.add_documents(CORPUS)
    yield lite, pg
    lite.close()
    pg.close()


@pytest.mark.parametrize("terms", QUERIES)
def test_rankings_equal_sqlite_fts5(pair, terms: list[str]) -> None:  # type: ignore[no-untyped-def]
    """Same match set, same order, same scores as FTS5's bm25 with weights (2, 2, 1)."""
    lite, pg = pair
    assert_same_ranking(pg.rank_expression(terms, 100), lite.rank_expression(terms, 100))


def test_phrase_matches_only_adjacent_tokens(pair) -> None:  # type: ignore[no-untyped-def]
    """A multiword term is a phrase: "elmo puppets" matches c, "puppets elmo" nothing."""
    _, pg = pair
    assert [unit for unit, _ in pg.rank_expression(["elmo puppets"], 10)] == [3]
    assert pg.rank_expression(["puppets elmo"], 10) == []


def test_limit_cuts_the_ranking(pair) -> None:  # type: ignore[no-untyped-def]
    """top-k is applied to the ranking; ties break by document id and offset."""
    lite, pg = pair
    assert_same_ranking(
        pg.rank_expression(["alpha", "bravo", "delta"], 2),
        lite.rank_expression(["alpha", "bravo", "delta"], 2),
    )


def test_document_frequencies_match_sqlite(pair) -> None:  # type: ignore[no-untyped-def]
    """Body df of tokens and phrases, and any-field match counts, equal SQLite's."""
    lite, pg = pair
    terms = ["alpha", "echo", "elmo world", "station", "alpha station", "zulu"]
    assert pg.document_frequencies(terms) == lite.document_frequencies(terms)
    assert pg.document_frequencies_any(terms) == lite.document_frequencies_any(terms)
    assert pg.unit_count() == lite.unit_count()


def test_upsert_replaces_and_delete_takes_counts_back(pair) -> None:  # type: ignore[no-untyped-def]
    """Re-adding a document replaces it; deleting everything leaves empty statistics."""
    _, pg = pair
    pg.add_documents([Document("a", "Zulu yankee.", title="Alpha Station")])
    assert pg.document_frequencies(["zulu", "charlie"]) == {"zulu": 1, "charlie": 1}
    assert pg.unit_count() == len(CORPUS)
    assert pg.delete([doc.id for doc in CORPUS]) == len(CORPUS)
    assert pg.unit_count() == 0
    assert pg.document_frequencies(["zulu", "alpha"]) == {"zulu": 0, "alpha": 0}
    assert pg.rank_expression(["alpha"], 10) == []


def test_units_metadata_and_documents_round_trip(pair) -> None:  # type: ignore[no-untyped-def]
    """Units carry their source offsets; metadata and documents come back as stored."""
    lite, pg = pair
    assert pg.units([1, 2, 99]) == lite.units([1, 2, 99])
    assert pg.expansion_units([3]) == lite.expansion_units([3])
    stored = pg.document("c")
    assert stored is not None and stored.title == "Elmo World"


def test_title_repair_lookups(pair) -> None:  # type: ignore[no-untyped-def]
    """Multiword titles are found lazily by phrase."""
    _, pg = pair
    assert pg.title_phrases({"elmo world", "alpha station", "bravo"}) == {
        "elmo world",
        "alpha station",
    }


def test_snapshot_hides_a_concurrent_write(pair) -> None:  # type: ignore[no-untyped-def]
    """Reads inside one snapshot see one state even while another thread commits a write."""
    _, pg = pair
    with pg.snapshot():
        before = pg.unit_count()
        writer = threading.Thread(
            target=pg.add_documents, args=([Document("z", "Zulu zulu.", title="Z")],)
        )
        writer.start()
        writer.join()
        assert pg.unit_count() == before
        assert pg.rank_expression(["zulu"], 10) == []
    assert pg.unit_count() == before + 1


def test_reopen_checks_settings(postgres_server, postgres_schema: str) -> None:  # type: ignore[no-untyped-def]
    """A schema built with one chunk size refuses another on reopen, like an SQLite file."""
    PostgresIndex(postgres_server.dsn, IndexSettings(chunk_chars=1000), schema=postgres_schema)
    reopened = PostgresIndex(postgres_server.dsn, schema=postgres_schema)
    assert reopened.settings.chunk_chars == 1000
    with pytest.raises(IndexSettingsMismatchError):
        PostgresIndex(postgres_server.dsn, IndexSettings(chunk_chars=2200), schema=postgres_schema)


def test_an_older_schema_version_is_refused_with_a_rebuild_message(  # type: ignore[no-untyped-def]
    postgres_server, postgres_schema: str
) -> None:
    """A version-2 schema stores expansion units per unit; it must be rebuilt, not misread."""
    PostgresIndex(postgres_server.dsn, schema=postgres_schema).close()
    with psycopg.connect(postgres_server.dsn, autocommit=True) as connection:
        connection.execute(
            f'UPDATE "{postgres_schema}".meta SET value = %s WHERE key = %s',
            ("2", "schema_version"),
        )
    with pytest.raises(IndexSettingsMismatchError, match=r"schema_version: stored '2'.*rebuild"):
        PostgresIndex(postgres_server.dsn, schema=postgres_schema)


def test_units_table_stores_no_expansion_column(pair, postgres_server) -> None:  # type: ignore[no-untyped-def]
    """Expansion units are derived from the unit's text, so the schema does not hold them."""
    _, pg = pair
    with psycopg.connect(postgres_server.dsn) as connection:
        rows = connection.execute(
            "SELECT column_name FROM information_schema.columns"
            " WHERE table_schema = %s AND table_name = 'units'",
            (pg.schema,),
        ).fetchall()
    columns = {row[0] for row in rows}
    assert "char_end" in columns and "expansion" not in columns


@pytest.mark.parametrize("schema", ["", "Upper", "a;drop", "x" * 64, 'q"'])
def test_schema_names_are_validated(postgres_server, schema: str) -> None:  # type: ignore[no-untyped-def]
    """The schema name becomes an identifier, so only plain lowercase names are accepted."""
    with pytest.raises(InvalidInputError):
        PostgresIndex(postgres_server.dsn, schema=schema)


def test_filters_restrict_matches_but_not_statistics(
    tmp_path: Path, postgres_server, postgres_schema: str
) -> None:  # type: ignore[no-untyped-def]
    """A metadata filter removes units from the ranking; idf still counts the whole corpus."""
    docs = [
        Document("x", "Alpha bravo.", metadata={"lang": "en"}),
        Document("y", "Alpha charlie.", metadata={"lang": "fr"}),
        Document("z", "Alpha alpha delta.", metadata={"lang": "en"}),
    ]
    lite = SQLiteIndex(tmp_path / "f.sqlite")
    lite.add_documents(docs, parallel=False)
    pg = PostgresIndex(postgres_server.dsn, schema=postgres_schema)
    pg.add_documents(docs)
    for filters in ({"lang": "en"}, {"lang": ["fr", "de"]}):
        expected = lite.rank_expression(["alpha", "charlie"], 10, filters=filters)
        assert_same_ranking(pg.rank_expression(["alpha", "charlie"], 10, filters=filters), expected)


def test_sag2_retrieves_the_same_on_both_backends(
    tmp_path: Path, postgres_server, postgres_schema: str, musique_documents: list[Document]
) -> None:  # type: ignore[no-untyped-def]
    """The whole method (expansion included) gives the same ranking over either backend."""
    from sag2_retrievers import SAG2Engine
    from sag2_retrievers.judges.fakes import OverlapJudge

    lite = SQLiteIndex(tmp_path / "m.sqlite")
    lite.add_documents(musique_documents, parallel=False)
    pg = PostgresIndex(postgres_server.dsn, schema=postgres_schema)
    pg.add_documents(musique_documents, parallel=False)
    questions = [doc.title + " " + doc.text.split(".")[0] for doc in musique_documents[:6:2]]
    for question in questions:
        expected = SAG2Engine(lite, OverlapJudge()).retrieve(question, top_k=10)
        actual = SAG2Engine(pg, OverlapJudge()).retrieve(question, top_k=10)
        assert [hit.unit_id for hit in actual.hits] == [hit.unit_id for hit in expected.hits]
        assert len(actual.trace) == len(expected.trace) > 1


def test_the_paper_profile_ranks_the_same_on_both_backends(
    tmp_path: Path, postgres_server, postgres_schema: str
) -> None:  # type: ignore[no-untyped-def]
    """Under the "paper" analyzer profile too, PostgreSQL's rankings equal FTS5's."""
    settings = IndexSettings(analyzer_profile="paper")
    lite = SQLiteIndex(tmp_path / "paper.sqlite", settings)
    lite.add_documents(CORPUS, parallel=False)
    pg = PostgresIndex(postgres_server.dsn, settings, schema=postgres_schema)
    pg.add_documents(CORPUS, parallel=False)
    for question in ("Who co-created the U.S. radio show?", "Alpha station bravo", "Elmo World"):
        terms = lite.query_terms(question)
        assert pg.query_terms(question) == terms
        expected = lite.rank_expression(terms, 100)
        actual = pg.rank_expression(terms, 100)
        assert_same_ranking(actual, expected)
