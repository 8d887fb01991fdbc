"""The index file's schema, its SQL statements, and the settings recorded in its meta table."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal

from .errors import IndexSettingsMismatchError, InvalidInputError
from .text import (
    ANALYZER_VERSION,
    DEFAULT_PROFILE,
    FTS_TOKENIZERS,
    PAPER_FTS_TOKENIZER,
    PROFILES,
    SAG2_FTS_TOKENIZER,
    STOPWORDS,
)

SCHEMA_VERSION = "3"  # 3: postings segments, contentless FTS5, no stored expansion
BM25_WEIGHTS = (2.0, 2.0, 1.0)
# How units get their heading field (markdown.py); files built before it have empty headings.
HEADING_RULE = "markdown-atx-1"
DOCUMENT_COLLECTION_CHUNK_CHARS = 1000

# The tables of a new index file: these, then units_fts with the analyzer profile's tokenizer.
BASE_TABLES = (
    "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE IF NOT EXISTS documents(
        doc_id TEXT PRIMARY KEY,
        title TEXT NOT NULL,
        text TEXT NOT NULL,
        metadata TEXT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS units(
        unit_id INTEGER PRIMARY KEY AUTOINCREMENT,
        doc_id TEXT NOT NULL REFERENCES documents(doc_id) ON DELETE CASCADE,
        heading TEXT NOT NULL,
        char_start INTEGER NOT NULL,
        char_end INTEGER NOT NULL,
        token_crc INTEGER NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS units_by_doc ON units(doc_id)",
    """CREATE TABLE IF NOT EXISTS body_df(
        term TEXT PRIMARY KEY,
        df INTEGER NOT NULL) WITHOUT ROWID""",
)
# Contentless: the token text is not kept (a delete re-analyses the stored text, checked
# against token_crc), so the file holds the text once plus the index.
FTS_TABLE_SQL = """CREATE VIRTUAL TABLE IF NOT EXISTS units_fts USING fts5(
        title, heading, body, content = '', tokenize = "{}")"""
SAG2_FTS_TABLE_SQL = FTS_TABLE_SQL.format(SAG2_FTS_TOKENIZER)
# FTS5 merges its segments 8 at a time instead of 4: fewer rewrites during bulk ingest
# (FTS5 now serves only phrases and filtered queries; optimize() merges everything).
FTS_AUTOMERGE_SQL = "INSERT INTO units_fts(units_fts, rank) VALUES ('automerge', 8)"
# Checkpoint the WAL every ~40 MB instead of ~4 MB: pages rewritten by successive batches
# are copied to the file once, and bulk ingests fsync a tenth as often.
WAL_CHECKPOINT_SQL = "PRAGMA wal_autocheckpoint = 10000"
PAPER_FTS_TABLE_SQL = FTS_TABLE_SQL.format(PAPER_FTS_TOKENIZER)

BM25_SCORE = "-bm25(units_fts, {}, {}, {})".format(*BM25_WEIGHTS)
# FTS5 ranking the whole table itself: the reference the postings arrays must equal (tests).
SEARCH_SQL = f"""
    SELECT units_fts.rowid, {BM25_SCORE} AS score FROM units_fts
    WHERE units_fts MATCH ? ORDER BY score DESC, units_fts.rowid LIMIT ?"""
SEARCH_FILTERED_SQL = f"""
    SELECT units_fts.rowid, {BM25_SCORE} AS score FROM units_fts
    JOIN units ON units.unit_id = units_fts.rowid
    JOIN documents ON documents.doc_id = units.doc_id
    WHERE units_fts MATCH ? AND {{conditions}}
    ORDER BY score DESC, units_fts.rowid LIMIT ?"""
# Expansion in one statement: each required term's unseen units (one UNION ALL part per
# term), the scoring expression's bm25() on those units only (the unary + keeps SQLite from
# running one FTS5 query per id), and each term's top ``limit`` by (score desc, unit id).
EXPAND_HEAD_SQL = "WITH members(term, unit_id) AS MATERIALIZED ("
EXPAND_TAIL_SQL = f"""),
    scored(unit_id, score) AS MATERIALIZED (
        SELECT rowid, {BM25_SCORE} FROM units_fts
        WHERE units_fts MATCH ? AND +rowid IN (SELECT unit_id FROM members)),
    ranked(term, unit_id, position) AS (
        SELECT term, members.unit_id, row_number() OVER (
            PARTITION BY term ORDER BY coalesce(score, 0.0) DESC, members.unit_id)
        FROM members LEFT JOIN scored ON scored.unit_id = members.unit_id)
    SELECT term, unit_id FROM ranked WHERE position <= ? ORDER BY term, position"""
MEMBERS_FILTERED_SQL = """
    SELECT ?, units_fts.rowid FROM units_fts
    JOIN units ON units.unit_id = units_fts.rowid
    JOIN documents ON documents.doc_id = units.doc_id
    WHERE units_fts MATCH ? AND {conditions}
      AND units_fts.rowid NOT IN (SELECT value FROM json_each(?))"""
MATCH_ROWIDS_SQL = "SELECT ?, rowid FROM units_fts WHERE units_fts MATCH ?"
MATCH_COUNT_SQL = "SELECT ?, count(*) FROM units_fts WHERE units_fts MATCH ?"
TOKEN_DF_SQL = "SELECT term, df FROM body_df WHERE term IN (SELECT value FROM json_each(?))"
ADD_DF_SQL = """
    INSERT INTO body_df(term, df) VALUES (?, ?)
    ON CONFLICT(term) DO UPDATE SET df = df + excluded.df"""
SUBTRACT_DF_SQL = "UPDATE body_df SET df = df - ? WHERE term = ?"
PRUNE_DF_SQL = "DELETE FROM body_df WHERE df <= 0"
UNITS_SQL = """
    SELECT units.unit_id, units.doc_id, documents.title, units.heading,
           units.char_start, units.char_end
    FROM units JOIN documents ON documents.doc_id = units.doc_id
    WHERE units.unit_id IN (SELECT value FROM json_each(?))"""
DOCUMENT_TEXTS_SQL = """
    SELECT doc_id, text FROM documents WHERE doc_id IN (SELECT value FROM json_each(?))"""
FILTERED_UNIT_IDS_SQL = """
    SELECT units.unit_id FROM units JOIN documents ON documents.doc_id = units.doc_id
    WHERE {conditions}"""
INSERT_DOCUMENT_SQL = "INSERT INTO documents(doc_id, title, text, metadata) VALUES (?, ?, ?, ?)"
INSERT_UNIT_SQL = """
    INSERT INTO units(unit_id, doc_id, heading, char_start, char_end, token_crc)
    VALUES (?, ?, ?, ?, ?, ?)"""
# The id AUTOINCREMENT would give next, minus one (ids of deleted units are never reused).
LAST_UNIT_ID_SQL = """
    SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'units'), 0),
               coalesce((SELECT max(unit_id) FROM units), 0))"""
INSERT_FTS_SQL = "INSERT INTO units_fts(rowid, title, heading, body) VALUES (?, ?, ?, ?)"
UNIT_IDS_OF_DOCS_SQL = "SELECT unit_id FROM units WHERE doc_id IN (SELECT value FROM json_each(?))"
DELETED_UNITS_SQL = """
    SELECT units.unit_id, documents.title, units.heading, units.char_start, units.char_end,
           units.token_crc, documents.text
    FROM units JOIN documents ON documents.doc_id = units.doc_id
    WHERE units.doc_id IN (SELECT value FROM json_each(?)) ORDER BY units.unit_id"""
DELETE_FTS_SQL = """
    INSERT INTO units_fts(units_fts, rowid, title, heading, body) VALUES ('delete', ?, ?, ?, ?)"""
DELETE_UNITS_SQL = "DELETE FROM units WHERE doc_id IN (SELECT value FROM json_each(?))"
DELETE_DOCS_SQL = "DELETE FROM documents WHERE doc_id IN (SELECT value FROM json_each(?))"
METADATA_SQL = """
    SELECT doc_id, metadata FROM documents WHERE doc_id IN (SELECT value FROM json_each(?))"""
DOCUMENT_SQL = "SELECT doc_id, text, title, metadata FROM documents WHERE doc_id = ?"
TITLES_SQL = "SELECT DISTINCT title FROM documents WHERE title != ''"
UNIT_COUNT_SQL = "SELECT count(*) FROM units"
DOC_COUNT_SQL = "SELECT count(*) FROM documents"
TABLE_NAMES_SQL = "SELECT name FROM sqlite_master WHERE type = 'table'"
GET_META_SQL = "SELECT key, value FROM meta"
PUT_META_SQL = "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)"
BUMP_GENERATION_SQL = """
    INSERT INTO meta(key, value) VALUES ('generation', '1')
    ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + 1"""
GENERATION_SQL = "SELECT value FROM meta WHERE key = 'generation'"


def setting(
    default: Any,
    kind: type,
    *,
    low: int | None = None,
    high: int | None = None,
    choices: tuple[str, ...] | None = None,
    legacy: str | None = None,
) -> Any:
    """A settings field that records its type and allowed range or choices, checked for
    every value; ``legacy`` is its meta row in files written before the setting existed."""
    spec = {"kind": kind, "low": low, "high": high, "choices": choices, "legacy": legacy}
    return field(default=default, metadata=spec)


@dataclass(frozen=True)
class IndexSettings:
    """Every setting that changes retrieval results; stored in ``meta`` and checked on open.

    Each field is declared with `setting` (type and range), so construction and reading back
    from meta validate every field the same way; a new setting needs only its declaration.
    """

    chunk_chars: int = setting(2200, int, low=20, high=10_000_000)
    # "sag2": the project's analyzer; "paper": the reference reading of the paper (text.py).
    # Files from before this setting were all built with the "sag2" rules.
    analyzer_profile: Literal["sag2", "paper"] = setting(
        DEFAULT_PROFILE, str, choices=PROFILES, legacy=DEFAULT_PROFILE
    )

    def __post_init__(self) -> None:
        """Reject a value of the wrong type or outside its range, naming the field."""
        for spec in fields(self):
            problem = _setting_problem(spec.metadata, getattr(self, spec.name))
            if problem:
                raise InvalidInputError(f"IndexSettings.{spec.name} {problem}")

    @classmethod
    def for_document_collections(cls) -> IndexSettings:
        """The paper's EnterpriseRAG setting for long documents: units of about 1,000
        characters, never above 1,200 (``chunk_spans`` cuts within 0.8-1.2x the target)."""
        return cls(chunk_chars=DOCUMENT_COLLECTION_CHUNK_CHARS)

    @property
    def fts_tokenizer(self) -> str:
        """The FTS5 tokenizer the analyzer profile's tokens are final for."""
        return FTS_TOKENIZERS[self.analyzer_profile]

    def as_meta(self) -> dict[str, str]:
        """The settings, plus the fixed analyzer and scoring versions, as meta rows."""
        rows = {key: _meta_text(value) for key, value in asdict(self).items()}
        rows.update(
            schema_version=SCHEMA_VERSION,
            analyzer_version=ANALYZER_VERSION,
            stopwords=" ".join(sorted(STOPWORDS)),
            fts_tokenizer=self.fts_tokenizer,
            bm25_weights=",".join(str(w) for w in BM25_WEIGHTS),
            heading_rule=HEADING_RULE,
        )
        return rows

    @classmethod
    def completed_meta(cls, meta: Mapping[str, str]) -> dict[str, str]:
        """A file's meta rows with the legacy value of every setting added since it was
        written (an older file is read as what it was built with, not refused)."""
        rows = dict(meta)
        for spec in fields(cls):
            if spec.name not in rows and spec.metadata["legacy"] is not None:
                rows[spec.name] = spec.metadata["legacy"]
        return rows

    @classmethod
    def from_meta(cls, meta: Mapping[str, str]) -> IndexSettings:
        """Read the user-settable part back from meta rows; a bad row is a settings mismatch."""
        values: dict[str, Any] = {}
        rows = cls.completed_meta(meta)
        for spec in fields(cls):
            stored = rows.get(spec.name)
            value = _parse_meta(spec.metadata["kind"], stored)
            problem = _setting_problem(spec.metadata, value)
            if stored is None or problem:
                raise IndexSettingsMismatchError(
                    f"the file's meta row {spec.name}={stored!r} is not a valid setting "
                    f"({problem or 'missing'}); rebuild the index"
                )
            values[spec.name] = value
        return cls(**values)


def _setting_problem(spec: Mapping[str, Any], value: object) -> str | None:
    """Why a value does not fit its setting's declared type and range, or None when it does."""
    kind = spec["kind"]
    # bool is an int subclass; neither may stand for the other.
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        return f"must be {kind.__name__}, got {value!r}"
    choices = spec.get("choices")
    if choices is not None and value not in choices:
        return f"must be one of {', '.join(map(repr, choices))}, got {value!r}"
    low, high = spec["low"], spec["high"]
    numeric = isinstance(value, int) and not isinstance(value, bool)
    if numeric and ((low is not None and value < low) or (high is not None and value > high)):
        return f"must be within [{low}, {high}], got {value!r}"
    return None


def _meta_text(value: object) -> str:
    """How a setting's value is written to meta (booleans as 1/0)."""
    return str(int(value)) if isinstance(value, bool) else str(value)


def _parse_meta(kind: type, stored: str | None) -> object:
    """A meta row's text as the setting's type, or the text itself when it does not parse."""
    if stored is None or kind is str:
        return stored
    try:
        number = int(stored)
    except ValueError:
        return stored
    return bool(number) if kind is bool and number in (0, 1) else number


def reconcile_settings(
    where: str, stored: dict[str, str], requested: IndexSettings | None
) -> IndexSettings:
    """Adopt stored settings, or raise when they differ from the requested or the analyzer's.

    ``where`` names the index in the error ("index 'x.db'", "PostgreSQL schema 'sag2'").
    """
    if not stored:
        return requested or IndexSettings()
    stored = IndexSettings.completed_meta(stored)
    try:
        current = IndexSettings.from_meta(stored)
    except IndexSettingsMismatchError as error:
        raise IndexSettingsMismatchError(f"{where}: {error}") from None
    expected = (requested or current).as_meta()
    differences = [
        f"{key}: stored {stored.get(key)!r}, requested {value!r}"
        for key, value in expected.items()
        if stored.get(key) != value
    ]
    if differences:
        raise IndexSettingsMismatchError(
            f"{where} was built with different settings ("
            + "; ".join(differences)
            + "); open it with matching settings or rebuild it"
        )
    return current
