"""Tokens are final when they reach a backend: FTS5's unicode61 leaves the analyzer's tokens as
they are, so a backend that stores them verbatim (PostgreSQL) matches exactly what FTS5 does."""

from __future__ import annotations

import sqlite3
import unicodedata
from pathlib import Path

import pytest

from sag2_retrievers import Document, IndexSettings, SQLiteIndex
from sag2_retrievers.analysis import FTS_TOKENIZERS, PROFILES, Profile, fts5_terms, tokenize
from sag2_retrievers.backends.ingest import unit_token_texts
from sag2_retrievers.eval import load_corpus
from tests.conftest import SHARED_DATA

SHARED_CORPORA = (
    SHARED_DATA / "musique" / "hipporag_musique_train_fixture_corpus.json",
    SHARED_DATA / "hotpotqa" / "hipporag_hotpotqa_train_fixture_corpus.json",
)
# Latin, Greek, Cyrillic and combining diacritics: scripts FTS5's Unicode 6.1 tables cover
# fully (later additions there are uppercase letters, which the analyzer lowercases first).
CHECKED_RANGES = (range(0x80, 0x530), range(0x1E00, 0x2000))


def fts5_instances(connection: sqlite3.Connection, table: str) -> dict[tuple[int, str], list[str]]:
    """FTS5's own terms of every (row, column name) of a table, in token order (fts5vocab)."""
    connection.execute(f"CREATE VIRTUAL TABLE temp.vocab USING fts5vocab(main, {table}, instance)")
    terms: dict[tuple[int, str], list[str]] = {}
    rows = connection.execute("SELECT doc, col, term FROM temp.vocab ORDER BY doc, col, offset")
    for doc, column, term in rows:
        terms.setdefault((doc, column), []).append(term)
    return terms


@pytest.mark.parametrize(
    ("corpus", "profile"),
    [*((corpus, "sag2") for corpus in SHARED_CORPORA), (SHARED_CORPORA[0], "paper")],
    ids=lambda value: value.parent.name if isinstance(value, Path) else value,
)
def test_fts5_indexes_the_stored_tokens_of_the_shared_corpora_unchanged(
    corpus: Path, profile: Profile, tmp_path: Path
) -> None:
    if not corpus.exists():
        pytest.skip(f"shared corpus {corpus} is not available")
    settings = IndexSettings(analyzer_profile=profile)
    with SQLiteIndex(tmp_path / "vocab.db", settings) as index:
        index.add_documents(
            (Document(p.doc_id, p.text, p.title) for p in load_corpus(corpus)), parallel=False
        )
        units = index.units(range(1, index.unit_count() + 1))
    # The FTS5 table is contentless: the tokens written are those the analysis gives again.
    stored = {
        (unit_id, column): text.split()
        for unit_id, unit in units.items()
        for column, text in zip(
            ("title", "heading", "body"),
            unit_token_texts(unit.title, unit.heading, unit.body, profile),
            strict=True,
        )
        if text
    }
    connection = sqlite3.connect(tmp_path / "vocab.db")
    indexed = fts5_instances(connection, "units_fts")
    assert [key for key in stored if stored[key] != indexed.get(key)] == []
    assert len(indexed) == len(stored)
    assert sum(len(tokens) for tokens in stored.values()) > 50_000


@pytest.mark.parametrize("profile", PROFILES)
def test_fts5_terms_match_unicode61_character_by_character(profile: Profile) -> None:
    connection = sqlite3.connect(":memory:")
    tokenizer = FTS_TOKENIZERS[profile]
    connection.execute(f'CREATE VIRTUAL TABLE chars USING fts5(body, tokenize = "{tokenizer}")')
    letters = [
        chr(code)
        for span in CHECKED_RANGES
        for code in span
        if unicodedata.category(chr(code))[0] in "LMN" and chr(code) == chr(code).lower()
    ] + ["-", "."]
    connection.executemany("INSERT INTO chars(body) VALUES (?)", [(f"q{c}q",) for c in letters])
    indexed = fts5_instances(connection, "chars")
    expected = {n: indexed.get((n, "body"), []) for n in range(1, len(letters) + 1)}
    mismatches = [
        (hex(ord(c)), expected[n], list(fts5_terms(f"q{c}q", profile)))
        for n, c in enumerate(letters, start=1)
        if list(fts5_terms(f"q{c}q", profile)) != expected[n]
    ]
    assert mismatches == []
    assert len(letters) > 900


def test_accented_latin_tokens_reach_the_backend_folded() -> None:
    assert tokenize("Beyoncé, Ǖ and the café-bar of Łódź") == [
        "beyonce",
        "u",
        "cafe-bar",
        "cafe",
        "bar",
        "łodz",
    ]
