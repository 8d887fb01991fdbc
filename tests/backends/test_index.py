"""SQLiteIndex (ARCHITECTURE §4.2): upsert, BM25 search, df, title aliases, filters, files."""

from __future__ import annotations

import os
import pickle
import sqlite3
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sag2_retrievers import IndexSettings, SearchHit, SQLiteIndex
from sag2_retrievers.analysis import analyze_body, tokenize
from sag2_retrievers.backends import ingest
from sag2_retrievers.backends.sqlite.postings import PostingsCounter
from sag2_retrievers.documents import Document
from sag2_retrievers.errors import (
    IndexSettingsMismatchError,
    IndexUnavailableError,
    InvalidInputError,
)

LONG_TEXT = " ".join(
    f"Sentence {number} tells of the river town number {number}." for number in range(60)
)


def doc_ids(hits: list[SearchHit]) -> list[str]:
    """The source document of each hit, in rank order."""
    return [hit.doc_id for hit in hits]


def snapshot(index: SQLiteIndex) -> tuple[int, int, dict[str, str]]:
    """Counts and every stored document's text, to show a write changed nothing."""
    texts = {doc.id: doc.text for doc in map(index.document, _stored_ids(index)) if doc}
    return index.document_count(), index.unit_count(), texts


def _stored_ids(index: SQLiteIndex) -> list[str]:
    """Ids of the stored documents (read straight from the file)."""
    with sqlite3.connect(index.path) as connection:
        return [row[0] for row in connection.execute("SELECT doc_id FROM documents")]


def stored_unit_ids(index: SQLiteIndex) -> list[int]:
    """Ids of every stored unit (read straight from the file)."""
    with sqlite3.connect(index.path) as connection:
        return [row[0] for row in connection.execute("SELECT unit_id FROM units")]


# -- add, search, delete, upsert -------------------------------------------------------------


def test_adding_documents_returns_the_units_written(
    empty_index: SQLiteIndex, tiny_corpus: tuple[Document, ...]
) -> None:
    assert empty_index.add_documents(tiny_corpus, parallel=False) == len(tiny_corpus)
    assert empty_index.document_count() == len(tiny_corpus)
    assert empty_index.unit_count() == len(tiny_corpus)


def test_adding_an_empty_batch_writes_nothing(empty_index: SQLiteIndex) -> None:
    assert empty_index.add_documents([]) == 0
    assert empty_index.document_count() == 0


def test_search_finds_the_document_holding_the_word(tiny_index: SQLiteIndex) -> None:
    assert doc_ids(tiny_index.search("Which city has a textile industry?"))[0] == "lodz"


def test_hit_carries_title_unit_text_and_offsets(tiny_index: SQLiteIndex) -> None:
    hit = tiny_index.search("textile")[0]
    document = tiny_index.document("lodz")
    assert document is not None
    assert hit.title == "Łódź"
    assert hit.text == document.text[hit.char_start : hit.char_end] == document.text


def test_stored_document_round_trips(
    tiny_index: SQLiteIndex, tiny_corpus: tuple[Document, ...]
) -> None:
    assert tiny_index.document("pku") == tiny_corpus[5]
    assert tiny_index.document("missing") is None


def test_metadata_is_returned_by_document_id(tiny_index: SQLiteIndex) -> None:
    metadata = tiny_index.metadata(["pi", "missing", "cpp"])
    assert set(metadata) == {"pi", "cpp"}
    assert metadata["cpp"]["source"] == {"name": "wiki"}


def test_delete_removes_documents_and_their_units(tiny_index: SQLiteIndex) -> None:
    assert tiny_index.delete(["hobbit", "missing", "hobbit"]) == 1
    assert tiny_index.document("hobbit") is None
    assert tiny_index.search("sequel") == []
    assert (tiny_index.document_count(), tiny_index.unit_count()) == (9, 9)


def test_deleting_unknown_or_no_ids_removes_nothing(tiny_index: SQLiteIndex) -> None:
    assert tiny_index.delete(["missing"]) == 0
    assert tiny_index.delete([]) == 0
    assert tiny_index.document_count() == 10


def test_delete_rejects_ids_that_are_not_strings(tiny_index: SQLiteIndex) -> None:
    with pytest.raises(InvalidInputError, match="must be strings"):
        tiny_index.delete([1])  # type: ignore[list-item]


def test_readding_an_id_replaces_its_text_and_units(tiny_index: SQLiteIndex) -> None:
    old_unit_ids = [hit.unit_id for hit in tiny_index.search("sequel")]
    tiny_index.add_documents([Document("hobbit", "A tale of dragons and gold.", title="Tale")])
    assert tiny_index.search("sequel") == []
    assert doc_ids(tiny_index.search("dragons")) == ["hobbit"]
    assert tiny_index.units(old_unit_ids) == {}
    assert (tiny_index.document_count(), tiny_index.unit_count()) == (10, 10)
    replaced = tiny_index.document("hobbit")
    assert replaced is not None and replaced.title == "Tale"


def test_stats_report_documents_units_and_file_bytes(tiny_index: SQLiteIndex) -> None:
    stats = tiny_index.stats()
    assert (stats["documents"], stats["units"]) == (10, 10)
    assert stats["bytes"] > 0


# -- transactional batches -------------------------------------------------------------------


def test_batch_with_a_repeated_id_raises_and_changes_nothing(tiny_index: SQLiteIndex) -> None:
    before = snapshot(tiny_index)
    batch = [
        Document("new", "Quokkas live on Rottnest."),
        Document("hobbit", "Replaced text about quokkas."),
        Document("new", "A second quokka document."),
    ]
    with pytest.raises(InvalidInputError, match="'new' appears twice"):
        tiny_index.add_documents(batch)
    assert snapshot(tiny_index) == before
    assert tiny_index.search("quokkas") == []


def test_batch_with_a_non_document_raises_and_changes_nothing(tiny_index: SQLiteIndex) -> None:
    before = snapshot(tiny_index)
    batch: list[Any] = [Document("new", "Quokkas live on Rottnest."), {"id": "x", "text": "t"}]
    with pytest.raises(InvalidInputError, match=r"item 1 .* not a Document"):
        tiny_index.add_documents(batch)
    assert snapshot(tiny_index) == before


def replaced_then(bad: Callable[[], Document]) -> Iterator[Document]:
    """A batch built lazily: a replacement for "hobbit", then the document ``bad()`` builds."""
    yield Document("hobbit", "Replaced text about quokkas.")
    yield bad()


@pytest.mark.parametrize("value", [object(), float("nan"), {1, 2}])
def test_batch_with_unserialisable_metadata_raises_and_changes_nothing(
    tiny_index: SQLiteIndex, value: object
) -> None:
    before = snapshot(tiny_index)
    with pytest.raises(InvalidInputError, match=r"'bad'.*JSON"):
        tiny_index.add_documents(
            replaced_then(lambda: Document("bad", "Quokkas again.", metadata={"value": value}))
        )
    assert snapshot(tiny_index) == before


def test_batch_with_unencodable_text_raises_and_changes_nothing(tiny_index: SQLiteIndex) -> None:
    before = snapshot(tiny_index)
    with pytest.raises(InvalidInputError, match=r"'bad': text holds .* lone surrogate"):
        tiny_index.add_documents(replaced_then(lambda: Document("bad", "lone \ud800 surrogate")))
    assert snapshot(tiny_index) == before


def test_unencodable_text_is_an_invalid_input_naming_the_document(
    empty_index: SQLiteIndex,
) -> None:
    with pytest.raises(InvalidInputError, match="'bad'"):
        empty_index.add_documents([Document("bad", "lone \ud800 surrogate")])


def test_parallel_analysis_writes_the_same_units_as_serial(
    tmp_path: Path, tiny_corpus: tuple[Document, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus = [*tiny_corpus, Document("long", LONG_TEXT)]
    settings_small = IndexSettings(chunk_chars=200)
    with SQLiteIndex(tmp_path / "serial.sqlite", settings_small) as serial:
        serial.add_documents(corpus, parallel=False)
        expected = serial.expansion_units(stored_unit_ids(serial))
        expected_units = serial.units(stored_unit_ids(serial))
    monkeypatch.setattr(ingest, "PARALLEL_MIN_CHARS", 0)
    with SQLiteIndex(tmp_path / "parallel.sqlite", settings_small) as parallel:
        parallel.add_documents(corpus, parallel=True)
        assert parallel.expansion_units(stored_unit_ids(parallel)) == expected
        assert parallel.units(stored_unit_ids(parallel)) == expected_units


def test_a_new_index_lets_fts5_buffer_a_large_commit_in_one_segment(
    empty_index: SQLiteIndex,
) -> None:
    rows = empty_index._connection().execute("SELECT k, v FROM units_fts_config").fetchall()
    assert dict(rows)["hashsize"] == 16 * 1024 * 1024


def test_an_ingest_enlarges_its_page_cache_and_gives_it_back(
    empty_index: SQLiteIndex, tiny_corpus: tuple[Document, ...]
) -> None:
    def cache_size() -> int:
        return int(empty_index._connection().execute("PRAGMA cache_size").fetchone()[0])

    during: list[int] = []

    def report(_: int) -> None:
        during.append(cache_size())

    empty_index.ingest([tiny_corpus], parallel=False, on_batch=report)
    assert during == [-65536]
    assert cache_size() == -2000


@pytest.mark.skipif(not hasattr(os, "nice"), reason="POSIX priorities")
def test_analysis_workers_yield_the_cpu_to_the_writer() -> None:
    """The writer is the ingest's serial leg: its workers run at a lower priority."""
    executor = ingest.new_executor()
    try:
        worker = executor.submit(os.nice, 0).result(timeout=30)
    finally:
        executor.shutdown()
    assert worker == min(19, os.nice(0) + ingest.WORKER_NICENESS)


def test_a_prepared_batch_crosses_from_a_worker_unchanged(
    tiny_corpus: tuple[Document, ...],
) -> None:
    """Workers send a batch as plain tuples and 32-bit columns; what arrives is the same."""
    corpus = [*tiny_corpus, Document("long", LONG_TEXT)]
    sent = ingest.start_preparing(corpus, IndexSettings(chunk_chars=200), PostingsCounter(), None)()
    arrived = pickle.loads(pickle.dumps(sent))
    assert arrived.documents == sent.documents
    assert all(type(unit) is ingest.PreparedUnit for doc in arrived.documents for unit in doc.units)
    postings, expected = arrived.statistics.postings, sent.statistics.postings
    assert postings.terms == expected.terms
    for column in ("buckets", "term_ids", "positions", "freqs", "lengths"):
        assert getattr(postings, column).dtype == np.int64
        assert np.array_equal(getattr(postings, column), getattr(expected, column))
    assert np.array_equal(arrived.statistics.body_df, sent.statistics.body_df)


# -- files and settings ----------------------------------------------------------------------


def test_reopening_adopts_the_stored_settings(index_path: Path) -> None:
    with SQLiteIndex(index_path, IndexSettings(chunk_chars=500)) as index:
        index.add_documents([Document("d", "Kept across reopening.")])
    with SQLiteIndex(index_path) as reopened:
        assert reopened.settings == IndexSettings(chunk_chars=500)
        assert doc_ids(reopened.search("reopening")) == ["d"]


def test_reopening_with_the_same_settings_succeeds(index_path: Path) -> None:
    SQLiteIndex(index_path, IndexSettings(chunk_chars=500)).close()
    with SQLiteIndex(index_path, IndexSettings(chunk_chars=500)) as reopened:
        assert reopened.settings.chunk_chars == 500


def test_reopening_with_a_different_chunk_size_raises(index_path: Path) -> None:
    SQLiteIndex(index_path, IndexSettings(chunk_chars=500)).close()
    with pytest.raises(IndexSettingsMismatchError, match="chunk_chars"):
        SQLiteIndex(index_path, IndexSettings(chunk_chars=600))


def test_a_file_of_an_older_schema_version_is_refused_with_a_rebuild_message(
    index_path: Path,
) -> None:
    """A version-2 file stores expansion units per unit; it must be rebuilt, not misread."""
    SQLiteIndex(index_path).close()
    with sqlite3.connect(index_path) as connection:
        connection.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    with pytest.raises(IndexSettingsMismatchError, match=r"schema_version: stored '2'.*rebuild"):
        SQLiteIndex(index_path)


def test_units_table_stores_no_expansion_column(tiny_index: SQLiteIndex) -> None:
    """Expansion units are derived from the unit's text, so the file does not hold them."""
    with sqlite3.connect(tiny_index.path) as connection:
        columns = [row[1] for row in connection.execute("PRAGMA table_info(units)")]
    assert columns == ["unit_id", "doc_id", "heading", "char_start", "char_end", "token_crc"]


def test_sqlite_file_of_another_application_raises_and_is_left_alone(index_path: Path) -> None:
    with sqlite3.connect(index_path) as connection:
        connection.execute("CREATE TABLE invoices(id INTEGER PRIMARY KEY)")
    with pytest.raises(IndexUnavailableError, match="not a SAG2 index"):
        SQLiteIndex(index_path)
    with sqlite3.connect(index_path) as connection:
        tables = [row[0] for row in connection.execute("SELECT name FROM sqlite_master")]
    assert tables == ["invoices"]


def test_file_that_is_not_sqlite_raises_index_unavailable(index_path: Path) -> None:
    index_path.write_bytes(b"this is not a database " * 100)
    with pytest.raises(IndexUnavailableError):
        SQLiteIndex(index_path)


def test_closed_index_refuses_further_use(index_path: Path) -> None:
    index = SQLiteIndex(index_path)
    index.close()
    index.close()
    with pytest.raises(IndexUnavailableError, match="closed"):
        index.search("anything")


def test_index_file_is_in_wal_mode(tiny_index: SQLiteIndex) -> None:
    with sqlite3.connect(tiny_index.path) as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


# -- BM25 ------------------------------------------------------------------------------------


def test_title_match_outranks_the_same_word_in_the_body(tiny_index: SQLiteIndex) -> None:
    tiny_index.add_documents(
        [
            Document("in-title", "A small animal lives on the island.", title="Quokka"),
            Document("in-body", "A quokka animal lives on the island.", title="Wallaby"),
        ]
    )
    assert doc_ids(tiny_index.search("quokka")) == ["in-title", "in-body"]


def test_scores_are_positive_and_best_first(tiny_index: SQLiteIndex) -> None:
    hits = tiny_index.search("University of Oxford city in England")
    scores = [hit.score for hit in hits]
    assert len(hits) >= 3
    assert all(score > 0 for score in scores)
    assert scores == sorted(scores, reverse=True)


def test_equal_scores_are_ordered_by_document_id_not_unit_id(tiny_index: SQLiteIndex) -> None:
    """Ties follow what the units are, not the order they were written in (issue 32.9)."""
    clones = [Document(doc_id, "Identical quokka text.") for doc_id in ("c", "a", "b")]
    tiny_index.add_documents(clones)
    hits = tiny_index.search("quokka")
    assert doc_ids(hits) == ["a", "b", "c"]
    assert len({hit.score for hit in hits}) == 1
    assert [hit.unit_id for hit in hits] != sorted(hit.unit_id for hit in hits)


def test_limit_zero_returns_nothing(tiny_index: SQLiteIndex) -> None:
    assert tiny_index.search("city", limit=0) == []


def test_limit_cuts_the_ranking(tiny_index: SQLiteIndex) -> None:
    assert len(tiny_index.search("city oxford hobbit", limit=2)) == 2


def test_limit_beyond_the_matches_returns_every_match(tiny_index: SQLiteIndex) -> None:
    members = tiny_index.term_members(["city", "oxford"])
    matching = set(members["city"]) | set(members["oxford"])
    hits = tiny_index.search("city oxford", limit=1000)
    assert {hit.unit_id for hit in hits} == matching


@pytest.mark.parametrize("limit", [-1, 1.5, True])
def test_limit_must_be_a_non_negative_integer(tiny_index: SQLiteIndex, limit: Any) -> None:
    with pytest.raises(InvalidInputError, match="limit"):
        tiny_index.search("city", limit=limit)


def test_search_of_an_empty_index_returns_nothing(empty_index: SQLiteIndex) -> None:
    assert empty_index.search("anything at all") == []


def test_question_without_known_words_returns_nothing(tiny_index: SQLiteIndex) -> None:
    assert tiny_index.search("xylophone quasar") == []


def test_only_the_first_max_tokens_distinct_tokens_are_queried(tiny_index: SQLiteIndex) -> None:
    assert tiny_index.query_terms("textile textile sequel grams", max_tokens=2) == [
        "textile",
        "sequel",
    ]
    assert doc_ids(tiny_index.search("textile sequel", max_tokens=1)) == ["lodz"]


def test_question_must_be_a_string(tiny_index: SQLiteIndex) -> None:
    with pytest.raises(InvalidInputError, match="question must be a string"):
        tiny_index.search(b"city")  # type: ignore[arg-type]


def test_musique_passages_retrieve_themselves_first(
    empty_index: SQLiteIndex, musique_documents: list[Document]
) -> None:
    empty_index.add_documents(musique_documents, parallel=False)
    for document in musique_documents[:50]:
        hits = empty_index.search(f"{document.title} {document.text}", limit=3)
        assert hits[0].doc_id == document.id


# -- document frequencies and term members ---------------------------------------------------


def test_df_counts_units_whose_body_holds_the_token(tiny_index: SQLiteIndex) -> None:
    assert tiny_index.document_frequencies(["city", "sequel", "xylophone"]) == {
        "city": 2,
        "sequel": 1,
        "xylophone": 0,
    }


def test_df_ignores_titles(tiny_index: SQLiteIndex) -> None:
    tiny_index.add_documents([Document("q", "A small marsupial.", title="Quokka")])
    assert tiny_index.document_frequencies(["quokka", "łódź"]) == {"quokka": 0, "łódź": 0}
    members = tiny_index.term_members(["quokka", "łódź"])
    assert len(members["quokka"]) == len(members["łódź"]) == 1


def test_df_of_a_phrase_counts_bodies_holding_its_words_in_order(
    tiny_index: SQLiteIndex,
) -> None:
    frequencies = tiny_index.document_frequencies(["university oxford", "oxford university"])
    assert frequencies == {"university oxford": 2, "oxford university": 0}


def test_df_of_non_ascii_tokens(tiny_index: SQLiteIndex) -> None:
    frequencies = tiny_index.document_frequencies(["北京", "столица", "beyonce", "третий"])
    assert frequencies == {"北京": 1, "столица": 1, "beyonce": 1, "третий": 0}


def test_df_counts_units_not_occurrences(tiny_index: SQLiteIndex) -> None:
    tiny_index.add_documents([Document("z", "zebra zebra zebra"), Document("y", "one zebra")])
    assert tiny_index.document_frequencies(["zebra"]) == {"zebra": 2}


def test_df_follows_upserts_and_deletes(tiny_index: SQLiteIndex) -> None:
    tiny_index.add_documents([Document("hobbit", "A tale of dragons in a city.")])
    tiny_index.delete(["oxford"])
    assert tiny_index.document_frequencies(["sequel", "dragons", "city", "england"]) == {
        "sequel": 0,
        "dragons": 1,
        "city": 2,
        "england": 0,
    }


def test_df_is_unchanged_by_a_rejected_batch(tiny_index: SQLiteIndex) -> None:
    batch = [Document("hobbit", "Only quokkas now."), Document("hobbit", "Twice.")]
    with pytest.raises(InvalidInputError):
        tiny_index.add_documents(batch)
    assert tiny_index.document_frequencies(["sequel", "quokkas"]) == {"sequel": 1, "quokkas": 0}


def test_df_of_every_token_matches_the_unit_bodies_after_edits(
    empty_index: SQLiteIndex, musique_documents: list[Document]
) -> None:
    empty_index.add_documents(musique_documents, parallel=False)
    empty_index.delete([doc.id for doc in musique_documents[:20]])
    edited = [Document(doc.id, doc.text[: len(doc.text) // 2]) for doc in musique_documents[20:40]]
    empty_index.add_documents(edited, parallel=False)
    expected: Counter[str] = Counter()
    for unit in empty_index.units(stored_unit_ids(empty_index)).values():
        expected.update(set(analyze_body(unit.body).tokens))
    assert empty_index.document_frequencies(expected) == dict(expected)


def test_term_members_lists_units_matching_in_any_field(tiny_index: SQLiteIndex) -> None:
    lodz_unit = tiny_index.search("textile")[0].unit_id
    members = tiny_index.term_members(["łódź", "textile", "xylophone"])
    assert members == {"łódź": [lodz_unit], "textile": [lodz_unit], "xylophone": []}


def test_term_members_of_a_phrase(tiny_index: SQLiteIndex) -> None:
    members = tiny_index.term_members(["university oxford"])["university oxford"]
    assert {tiny_index.units(members)[uid].doc_id for uid in members} == {"tolkien", "oxford"}


# -- title alias repair ----------------------------------------------------------------------


def test_unaccented_question_word_is_repaired_to_the_accented_title(
    tiny_index: SQLiteIndex,
) -> None:
    """'Lodz' shares no token with 'Łódź' (ł does not fold), so only the alias can match it."""
    assert tokenize("Lodz") != tokenize("Łódź")
    assert tiny_index.document_frequencies_any(["lodz"]) == {"lodz": 0}
    assert tiny_index.query_terms("Where is Lodz?") == ["łodz"]
    assert doc_ids(tiny_index.search("Where is Lodz?")) == ["lodz"]


def test_word_that_matches_something_is_not_repaired(tiny_index: SQLiteIndex) -> None:
    tiny_index.add_documents([Document("plain", "Lodz is spelled without accents here.")])
    assert tiny_index.query_terms("Lodz") == ["lodz"]


def test_alias_shared_by_two_titles_is_not_used(tiny_index: SQLiteIndex) -> None:
    tiny_index.add_documents([Document("lodz2", "Another spelling.", title="Lódź")])
    assert tiny_index.query_terms("Lodz") == ["lodz"]


def test_alias_appears_after_the_title_is_added(empty_index: SQLiteIndex) -> None:
    empty_index.add_documents([Document("other", "Some unrelated text.")])
    assert empty_index.query_terms("Lodz") == ["lodz"]
    empty_index.add_documents([Document("lodz", "A city in Poland.", title="Łódź")])
    assert empty_index.query_terms("Lodz") == ["łodz"]


# -- filters ---------------------------------------------------------------------------------


def test_equality_filter_keeps_matching_documents(tiny_index: SQLiteIndex) -> None:
    assert doc_ids(tiny_index.search("city", filters={"lang": "pl"})) == ["lodz"]


def test_list_filter_means_any_of(tiny_index: SQLiteIndex) -> None:
    hits = tiny_index.search("city 北京", filters={"lang": ["pl", "zh"]})
    assert sorted(doc_ids(hits)) == ["lodz", "pku"]


def test_dotted_filter_key_reaches_nested_metadata(tiny_index: SQLiteIndex) -> None:
    hits = tiny_index.search("city", filters={"source.name": "atlas"})
    assert sorted(doc_ids(hits)) == ["lodz", "oxford"]


def test_boolean_filter_matches_json_booleans(tiny_index: SQLiteIndex) -> None:
    assert doc_ids(tiny_index.search("oxford", filters={"published": False})) == ["oxford"]
    assert doc_ids(tiny_index.search("oxford", filters={"published": True})) == ["tolkien"]


def test_numeric_filter_matches_numbers(tiny_index: SQLiteIndex) -> None:
    hits = tiny_index.search("hobbit", filters={"year": 1937})
    assert sorted(doc_ids(hits)) == ["hobbit", "tolkien"]


def test_several_filters_must_all_hold(tiny_index: SQLiteIndex) -> None:
    hits = tiny_index.search("oxford hobbit", filters={"year": 1937, "lang": "en"})
    assert sorted(doc_ids(hits)) == ["hobbit", "tolkien"]
    assert tiny_index.search("oxford hobbit", filters={"year": 1937, "lang": "pl"}) == []


@pytest.mark.parametrize(
    "key", ["lang; DROP TABLE documents", "a b", "1lang", "a..b", "", "$.lang", "a-b", 3]
)
def test_malformed_filter_key_raises(tiny_index: SQLiteIndex, key: Any) -> None:
    with pytest.raises(InvalidInputError, match="filter key"):
        tiny_index.search("city", filters={key: "en"})
    assert tiny_index.document_count() == 10


@pytest.mark.parametrize("value", [{"nested": 1}, [["list"]], b"bytes"])
def test_filter_value_of_an_unsupported_type_raises(tiny_index: SQLiteIndex, value: Any) -> None:
    with pytest.raises(InvalidInputError, match="'lang'"):
        tiny_index.search("city", filters={"lang": value})


def test_filters_must_be_a_mapping(tiny_index: SQLiteIndex) -> None:
    with pytest.raises(InvalidInputError, match="mapping"):
        tiny_index.search("city", filters=["lang"])  # type: ignore[arg-type]


def test_filtered_search_finds_matches_beyond_the_unfiltered_top_k(
    empty_index: SQLiteIndex,
) -> None:
    strong = [
        Document(f"en{n}", "zebra zebra zebra stripes", metadata={"lang": "en"}) for n in range(30)
    ]
    weak = Document("fr", "Un zebra " + "mot " * 40, metadata={"lang": "fr"})
    empty_index.add_documents([*strong, weak])
    assert "fr" not in doc_ids(empty_index.search("zebra", limit=5))
    assert doc_ids(empty_index.search("zebra", limit=5, filters={"lang": "fr"})) == ["fr"]
    english = empty_index.search("zebra", limit=100, filters={"lang": "en"})
    assert sorted(doc_ids(english)) == sorted(doc.id for doc in strong)


def test_allowed_units_are_those_of_matching_documents(tiny_index: SQLiteIndex) -> None:
    pku_unit = tiny_index.search("北京")[0].unit_id
    assert tiny_index.allowed_units({"lang": "zh"}) == {pku_unit}


# -- chunked documents -----------------------------------------------------------------------


def test_long_document_is_split_into_units_that_slice_its_text(index_path: Path) -> None:
    document = Document("long", LONG_TEXT, metadata={"tag": "long"})
    with SQLiteIndex(index_path, IndexSettings(chunk_chars=200)) as index:
        written = index.add_documents([document])
        units = index.units(index.allowed_units({"tag": "long"}))
    assert written == len(units) > 5
    for unit in units.values():
        assert unit.body == LONG_TEXT[unit.char_start : unit.char_end]


def test_hit_in_a_later_chunk_points_at_its_offsets(index_path: Path) -> None:
    with SQLiteIndex(index_path, IndexSettings(chunk_chars=200)) as index:
        index.add_documents([Document("long", LONG_TEXT)])
        hit = index.search("59")[0]
    assert hit.char_start > 0
    assert hit.text == LONG_TEXT[hit.char_start : hit.char_end]
    assert "59" in hit.text


@pytest.fixture(scope="module")
def chunk_index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SQLiteIndex]:
    """One small-chunk index reused by every example of the property below."""
    path = tmp_path_factory.mktemp("chunks") / "index.sqlite"
    with SQLiteIndex(path, IndexSettings(chunk_chars=50)) as index:
        yield index


storable_texts = st.text(
    st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), min_size=1, max_size=300
).filter(str.strip)


@settings(max_examples=30, deadline=None)
@given(storable_texts)
def test_unit_bodies_are_exact_slices_of_any_text(chunk_index: SQLiteIndex, text: str) -> None:
    chunk_index.add_documents([Document("random", text, metadata={"tag": "random"})])
    units = sorted(
        chunk_index.units(chunk_index.allowed_units({"tag": "random"})).values(),
        key=lambda unit: unit.char_start,
    )
    assert all(unit.body == text[unit.char_start : unit.char_end] for unit in units)
    assert "".join("".join(unit.body.split()) for unit in units) == "".join(text.split())


# -- concurrency -----------------------------------------------------------------------------


def test_readers_see_none_or_all_of_a_batch_while_a_writer_adds(
    tiny_index: SQLiteIndex,
) -> None:
    batches, batch_size = 15, 4
    finished = threading.Event()
    errors: list[BaseException] = []
    torn: list[Counter[str]] = []

    def write() -> None:
        try:
            for batch in range(batches):
                documents = [Document(f"b{batch}-{n}", "marker text") for n in range(batch_size)]
                tiny_index.add_documents(documents, parallel=False)
        except BaseException as error:
            errors.append(error)
        finally:
            finished.set()

    def read() -> None:
        try:
            while not finished.is_set():
                hits = tiny_index.search("marker", limit=1000)
                per_batch = Counter(hit.doc_id.split("-")[0] for hit in hits)
                if any(count != batch_size for count in per_batch.values()):
                    torn.append(per_batch)
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=read) for _ in range(3)]
    threads.append(threading.Thread(target=write))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    assert torn == []
    assert len(tiny_index.search("marker", limit=1000)) == batches * batch_size


def test_a_file_holding_only_a_judge_cache_becomes_an_index(tmp_path: Path) -> None:
    """The local judge may create its embedding cache in the file before the index opens it."""
    path = tmp_path / "shared.sqlite"
    connection = sqlite3.connect(path)
    connection.execute(
        "CREATE TABLE embedding_cache (model TEXT, text_sha TEXT, vector BLOB, "
        "PRIMARY KEY (model, text_sha))"
    )
    connection.close()
    with SQLiteIndex(path) as index:
        index.add_documents([Document("a", "shared file")])
        assert index.document_count() == 1


def test_a_single_id_string_is_refused_where_ids_are_expected(tiny_index: SQLiteIndex) -> None:
    """A bare string would otherwise be read character by character."""
    before = tiny_index.document_count()
    for call in (tiny_index.delete, tiny_index.units, tiny_index.metadata):
        with pytest.raises(InvalidInputError, match="collection of ids"):
            call("doc1")  # type: ignore[arg-type]
    assert tiny_index.document_count() == before


def test_a_single_document_is_refused_where_a_batch_is_expected(empty_index: SQLiteIndex) -> None:
    with pytest.raises(InvalidInputError, match="list of documents"):
        empty_index.add_documents(Document("a", "text"))  # type: ignore[arg-type]


def test_bad_max_tokens_is_an_input_error(tiny_index: SQLiteIndex) -> None:
    for value in (-1, "a"):
        with pytest.raises(InvalidInputError, match="max_tokens"):
            tiny_index.search("hobbit", max_tokens=value)  # type: ignore[arg-type]


def test_connections_of_finished_threads_are_closed(tiny_index: SQLiteIndex) -> None:
    def read() -> None:
        tiny_index.search("hobbit")

    for _ in range(5):
        thread = threading.Thread(target=read)
        thread.start()
        thread.join()
    read()
    assert len(tiny_index._connections) <= 2


def test_a_sqlite_without_fts5_is_reported_clearly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The probe names FTS5 and says what to do, instead of failing later in a query."""
    real_connect = sqlite3.connect

    class NoFTS5Connection:
        def __init__(self, connection: sqlite3.Connection) -> None:
            self.connection = connection

        def execute(self, statement: str, *args: object) -> object:
            if "fts5" in statement.lower():
                raise sqlite3.OperationalError("no such module: fts5")
            return self.connection.execute(statement, *args)

        def close(self) -> None:
            self.connection.close()

    monkeypatch.setattr(sqlite3, "connect", lambda *a, **k: NoFTS5Connection(real_connect(*a, **k)))
    with pytest.raises(IndexUnavailableError, match="FTS5"):
        SQLiteIndex(tmp_path / "no-fts5.sqlite")
