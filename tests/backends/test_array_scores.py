"""The postings-array scorer gives FTS5's own bm25() rankings and scores, bit for bit.

Every comparison runs FTS5's ranking statement on the same file, so a scorer that drifted
by one ulp, lost a column weight, or kept a deleted unit would fail here.
"""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest

from sag2_retrievers import Document, SQLiteIndex
from sag2_retrievers.backends.sqlite import compaction
from sag2_retrievers.backends.sqlite.fts import or_expression, quote_term
from sag2_retrievers.backends.sqlite.schema import SEARCH_SQL
from sag2_retrievers.errors import IndexSettingsMismatchError

EVERYONE = {"corpus": "all"}
QUESTIONS = [
    "Who founded the Rosary Basilica in Lourdes?",
    "Which river flows through the capital of the country where Beyoncé was born?",
    "When was the Imperial Airways Avro Ten crash near Ruysselede?",
    "What is the population of the city that hosts the Sazerac Company?",
    "北京 大学 的 创办 年份",
    "Sheila actress Tony award best performance featured actress musical",
]


def _fts5_ranking(path: Path, terms: list[str], limit: int) -> list[tuple[int, float]]:
    """FTS5's own top ``limit`` for the OR of the terms."""
    with sqlite3.connect(path) as connection:
        rows = connection.execute(SEARCH_SQL, (or_expression(terms), limit)).fetchall()
    return [(int(unit), float(score)) for unit, score in rows]


def _fts5_members(path: Path, term: str) -> set[int]:
    """Units FTS5 matches for one term in any field."""
    with sqlite3.connect(path) as connection:
        rows = connection.execute(
            "SELECT rowid FROM units_fts WHERE units_fts MATCH ?", (quote_term(term),)
        )
        return {int(row[0]) for row in rows}


def _documents(passages: list[dict[str, str]]) -> list[Document]:
    """Shared passages plus units with headings, repeated words, accents and Han text."""
    documents = [
        Document(f"m{n}", p["text"], p["title"], metadata=EVERYONE)
        for n, p in enumerate(passages[:400])
    ]
    extra = [
        ("Lourdes", "# Rosary Basilica\n\nThe Rosary Basilica basilica basilica in Lourdes."),
        ("Beyoncé", "Beyoncé Knowles was born in Houston. Beyonce sang; beyoncé danced."),
        ("北京大学", "北京大学创办于1898年，是中国的一所大学。北京 大学 北京"),
        ("Imperial Airways", "Imperial Airways Avro Ten crashed near Ruysselede, West Flanders."),
    ]
    documents += [
        Document(f"x{n}", text, title, metadata=EVERYONE) for n, (title, text) in enumerate(extra)
    ]
    return documents


@pytest.fixture
def scored_index(tmp_path: Path, musique_passages: list[dict[str, str]]) -> SQLiteIndex:
    """A few hundred shared passages and hand-made ones, built in three batches."""
    index = SQLiteIndex(tmp_path / "scores.db")
    documents = _documents(musique_passages)
    index.ingest([documents[:150], documents[150:300], documents[300:]], parallel=False)
    return index


def _assert_same_as_fts5(index: SQLiteIndex) -> None:
    """Search, score_units and expand agree with FTS5 for every question."""
    rng = random.Random(7)
    for question in QUESTIONS:
        terms = index.query_terms(question)
        if not terms:
            continue
        expected = _fts5_ranking(index.path, terms, 100)
        assert index.rank_expression(terms, 100) == expected
        chosen = {unit for unit, _ in expected[::3]} | {10**9}
        everything = dict(_fts5_ranking(index.path, terms, 10**6))
        assert index.score_units(terms, chosen) == {
            unit: everything[unit] for unit in chosen if unit in everything
        }
        required = list(dict.fromkeys([*terms[:4], "rosary basilica", "beyoncé knowles"]))
        scoring = [*terms, *required]
        exclude = set(rng.sample(sorted(everything), min(5, len(everything))))
        fast = index.expand(required, scoring, exclude, 7)
        exact = index.expand(required, scoring, exclude, 7, filters=EVERYONE)
        assert fast == exact
        for term in required:
            assert set(fast[term]) <= _fts5_members(index.path, term) - exclude


def test_array_scores_equal_fts5_bit_for_bit(scored_index: SQLiteIndex) -> None:
    with scored_index:
        _assert_same_as_fts5(scored_index)


def test_deleted_and_replaced_units_are_gone_from_every_score(scored_index: SQLiteIndex) -> None:
    with scored_index:
        scored_index.delete([f"m{n}" for n in range(0, 400, 3)])
        replaced = [
            Document(
                "x0", "The Rosary Basilica was consecrated in 1901.", "Lourdes", metadata=EVERYONE
            )
        ]
        scored_index.add_documents(replaced, parallel=False)
        _assert_same_as_fts5(scored_index)
        terms = scored_index.query_terms("Rosary Basilica Lourdes")
        found = {unit for unit, _ in scored_index.rank_expression(terms, 1000)}
        assert found == {unit for unit, _ in _fts5_ranking(scored_index.path, terms, 1000)}


def test_a_term_in_no_unit_scores_nothing(scored_index: SQLiteIndex) -> None:
    with scored_index:
        assert scored_index.rank_expression(["zzqxv"], 10) == []
        assert scored_index.expand(["zzqxv"], ["zzqxv"], set(), 5) == {"zzqxv": []}
        assert scored_index.score_units(["zzqxv"], {1, 2}) == {}


def test_a_delete_that_would_corrupt_fts5_is_refused_and_changes_nothing(
    scored_index: SQLiteIndex,
) -> None:
    """A unit whose text no longer analyses to its indexed tokens (another jieba, say) stops
    the delete before anything is written: the contentless FTS5 table stays consistent."""
    with scored_index:
        terms = scored_index.query_terms("Rosary Basilica Lourdes")
        before = scored_index.rank_expression(terms, 50)
        with sqlite3.connect(scored_index.path) as connection:
            connection.execute("UPDATE units SET token_crc = token_crc + 1 WHERE doc_id = 'x0'")
        with pytest.raises(IndexSettingsMismatchError, match="nothing was deleted"):
            scored_index.delete(["x0"])
        assert scored_index.document("x0") is not None
        assert scored_index.rank_expression(terms, 50) == before
        _assert_same_as_fts5(scored_index)


def test_merged_segments_score_as_before_and_drop_deleted_units(
    tmp_path: Path, musique_passages: list[dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Many small writes are merged (here past 4 segments) and optimize() merges the rest;
    every score stays FTS5's, and a deleted unit's postings are gone from the merged rows."""
    monkeypatch.setattr(compaction, "MAX_SEGMENTS", 4)
    monkeypatch.setattr(compaction, "FAN_IN", 3)
    documents = _documents(musique_passages)[:120] + _documents(musique_passages)[-4:]
    with SQLiteIndex(tmp_path / "merged.db") as index:
        for start in range(0, len(documents), 10):
            index.add_documents(documents[start : start + 10], parallel=False)
        index.delete([f"m{n}" for n in range(0, 120, 4)])
        with sqlite3.connect(index.path) as connection:
            assert connection.execute("SELECT count(*) FROM segments").fetchone()[0] <= 5
        _assert_same_as_fts5(index)
        index.optimize()
        with sqlite3.connect(index.path) as connection:
            segments = connection.execute("SELECT units, lengths FROM segments").fetchall()
        assert len(segments) <= 3
        assert all(0 not in memoryview(lengths).cast("I") for _, lengths in segments)
        _assert_same_as_fts5(index)


def test_segments_of_different_column_widths_read_together_keep_each_units_frequency(
    tmp_path: Path,
) -> None:
    """One token's postings from segments whose gap and F columns have different widths
    (u1 / u2) are decoded in groups; each unit must keep its own F, as FTS5 scores it."""
    loud = Document("loud", " ".join(["ferry"] * 300) + " to Varna", "Loud")  # F > 255
    small = [Document(f"s{n}", f"A ferry sails {n} times.", "Small") for n in range(9)]
    large = [Document(f"l{n}", f"The ferry number {n} docks.", "Large") for n in range(300)]
    large[-1] = Document("l-rare", "A ferry to Ostrel, rarely.", "Large")  # gaps > 255
    tail = [Document(f"t{n}", f"Ferry {n}, the ferry, leaves.", "Tail") for n in range(10)]
    with SQLiteIndex(tmp_path / "widths.db") as index:
        for batch in ([loud, *small], large, tail):
            index.add_documents(batch, parallel=False)
        expected = _fts5_ranking(index.path, ["ferry"], 1000)
        assert index.rank_expression(["ferry"], 1000) == expected
        assert expected[0][0] == index.rank_expression(["ferry", "varna"], 1)[0][0]
