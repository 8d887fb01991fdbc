"""The SQLite index file's schema and its SQL statements, each a named constant."""

from __future__ import annotations

from ...analysis import PAPER_FTS_TOKENIZER, SAG2_FTS_TOKENIZER
from ...bm25 import BM25_WEIGHTS

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
# FTS5 buffers up to 16 MiB of a transaction's postings instead of 1 MiB before writing a
# segment: a 10,000-document commit is one segment, not several to merge again (writer CPU
# per 100k 7.5 -> 5.8 s; docs/benchmarks.md, issue 35 round two). Memory: 16 MiB at most.
FTS_HASHSIZE_SQL = "INSERT INTO units_fts(units_fts, rank) VALUES ('hashsize', 16777216)"
# Checkpoint the WAL every ~40 MB instead of ~4 MB: pages rewritten by successive batches
# are copied to the file once, and bulk ingests fsync a tenth as often.
WAL_CHECKPOINT_SQL = "PRAGMA wal_autocheckpoint = 10000"
PAPER_FTS_TABLE_SQL = FTS_TABLE_SQL.format(PAPER_FTS_TOKENIZER)
# An ingest's connection caches up to 64 MiB of pages instead of SQLite's default 2 MiB: the
# documents' and units' id indexes, written in random order, stay in memory. The default
# comes back when the ingest ends.
INGEST_CACHE_SQL = "PRAGMA cache_size = -65536"
DEFAULT_CACHE_SQL = "PRAGMA cache_size = -2000"

BM25_SCORE = "-bm25(units_fts, {}, {}, {})".format(*BM25_WEIGHTS)
# Equal scores are ordered by what the unit is (its document id, then offset), not by its id,
# which depends on the order of writes. SQLite compares text byte-wise: UTF-8 bytes sort as
# Python sorts code points, so the SQL and the postings arrays agree.
TIE_ORDER = "units.doc_id, units.char_start"
# FTS5 ranking the whole table itself: the reference the postings arrays must equal (tests).
SEARCH_SQL = f"""
    SELECT units_fts.rowid, {BM25_SCORE} AS score FROM units_fts
    JOIN units ON units.unit_id = units_fts.rowid
    WHERE units_fts MATCH ? ORDER BY score DESC, {TIE_ORDER} LIMIT ?"""
SEARCH_FILTERED_SQL = f"""
    SELECT units_fts.rowid, {BM25_SCORE} AS score FROM units_fts
    JOIN units ON units.unit_id = units_fts.rowid
    JOIN documents ON documents.doc_id = units.doc_id
    WHERE units_fts MATCH ? AND {{conditions}}
    ORDER BY score DESC, {TIE_ORDER} LIMIT ?"""
# Expansion in one statement: each required term's unseen units (one UNION ALL part per
# term), the scoring expression's bm25() on those units only (the unary + keeps SQLite from
# running one FTS5 query per id), and each term's top ``limit`` by score, ties by content.
EXPAND_HEAD_SQL = "WITH members(term, unit_id) AS MATERIALIZED ("
EXPAND_TAIL_SQL = f"""),
    scored(unit_id, score) AS MATERIALIZED (
        SELECT rowid, {BM25_SCORE} FROM units_fts
        WHERE units_fts MATCH ? AND +rowid IN (SELECT unit_id FROM members)),
    ranked(term, unit_id, position) AS (
        SELECT term, members.unit_id, row_number() OVER (
            PARTITION BY term ORDER BY coalesce(score, 0.0) DESC, {TIE_ORDER})
        FROM members LEFT JOIN scored ON scored.unit_id = members.unit_id
        JOIN units ON units.unit_id = members.unit_id)
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
# substr() counts characters (code points), as Python's offsets do.
UNIT_TEXTS_SQL = """
    SELECT units.unit_id,
           substr(documents.text, units.char_start + 1, units.char_end - units.char_start)
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
DELETE_FTS_SQL = """
    INSERT INTO units_fts(units_fts, rowid, title, heading, body) VALUES ('delete', ?, ?, ?, ?)"""
DELETE_UNITS_SQL = "DELETE FROM units WHERE doc_id IN (SELECT value FROM json_each(?))"
DELETE_DOCS_SQL = "DELETE FROM documents WHERE doc_id IN (SELECT value FROM json_each(?))"
METADATA_SQL = """
    SELECT doc_id, metadata FROM documents WHERE doc_id IN (SELECT value FROM json_each(?))"""
DOCUMENT_SQL = "SELECT doc_id, text, title, metadata FROM documents WHERE doc_id = ?"
TITLES_SQL = "SELECT DISTINCT title FROM documents WHERE title != ''"
ALL_DOCUMENT_TEXTS_SQL = "SELECT text FROM documents"
UNIT_COUNT_SQL = "SELECT count(*) FROM units"
DOC_COUNT_SQL = "SELECT count(*) FROM documents"
TABLE_NAMES_SQL = "SELECT name FROM sqlite_master WHERE type = 'table'"
GET_META_SQL = "SELECT key, value FROM meta"
PUT_META_SQL = "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)"
BUMP_GENERATION_SQL = """
    INSERT INTO meta(key, value) VALUES ('generation', '1')
    ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + 1"""
GENERATION_SQL = "SELECT value FROM meta WHERE key = 'generation'"
