"""The PostgreSQL backend's schema and statements, written once; ``{s}`` is the schema name.

Every statement is composed with ``psycopg.sql`` (the schema as an identifier) and every value
is bound. Postings live in per-term blocks (``blocks.py``); FTS5's ``bm25()`` is computed on
the client from them by SQLite's scorer functions (``scorer.py``). Token arrays stay in the
units table (space-joined) for taking back a deleted unit's document frequencies.
"""

from __future__ import annotations

from psycopg import sql

CREATE_SCHEMA = (
    "CREATE SCHEMA IF NOT EXISTS {s}",
    "CREATE TABLE IF NOT EXISTS {s}.meta(key text PRIMARY KEY, value text NOT NULL)",
    """CREATE TABLE IF NOT EXISTS {s}.totals(
        id boolean PRIMARY KEY DEFAULT true CHECK (id),
        units bigint NOT NULL,
        tokens bigint NOT NULL,
        generation bigint NOT NULL)""",
    """INSERT INTO {s}.totals(units, tokens, generation) VALUES (0, 0, 0)
        ON CONFLICT (id) DO NOTHING""",
    """CREATE TABLE IF NOT EXISTS {s}.documents(
        doc_id text PRIMARY KEY,
        title text NOT NULL,
        text text NOT NULL,
        metadata jsonb NOT NULL,
        title_phrase text NOT NULL,
        alias_key text NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS documents_by_alias ON {s}.documents(alias_key)",
    "CREATE INDEX IF NOT EXISTS documents_by_title_phrase ON {s}.documents(title_phrase)",
    "CREATE SEQUENCE IF NOT EXISTS {s}.unit_ids",
    """CREATE TABLE IF NOT EXISTS {s}.units(
        unit_id bigint PRIMARY KEY,
        doc_id text NOT NULL REFERENCES {s}.documents(doc_id) ON DELETE CASCADE,
        heading text NOT NULL,
        char_start integer NOT NULL,
        char_end integer NOT NULL,
        title_tokens text NOT NULL,
        heading_tokens text NOT NULL,
        body_tokens text NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS units_by_doc ON {s}.units(doc_id)",
    # One row per write (or merge) and its units; one block row per term of each segment.
    "CREATE SEQUENCE IF NOT EXISTS {s}.segment_ids",
    """CREATE TABLE IF NOT EXISTS {s}.segments(
        segment bigint PRIMARY KEY,
        min_unit bigint NOT NULL,
        max_unit bigint NOT NULL,
        gap_bytes smallint NOT NULL,
        freq_bytes smallint NOT NULL,
        count_bytes smallint NOT NULL,
        position_bytes smallint NOT NULL,
        span integer NOT NULL,
        units bytea NOT NULL,
        lengths bytea NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS {s}.blocks(
        term text NOT NULL,
        segment bigint NOT NULL,
        gaps bytea NOT NULL,
        freqs bytea NOT NULL,
        counts bytea NOT NULL,
        positions bytea NOT NULL,
        PRIMARY KEY (term, segment))""",
    "CREATE INDEX IF NOT EXISTS blocks_by_segment ON {s}.blocks(segment)",
    # Packed integers barely compress: stored without pglz, read as they are.
    "ALTER TABLE {s}.blocks ALTER COLUMN gaps SET STORAGE EXTERNAL",
    "ALTER TABLE {s}.blocks ALTER COLUMN freqs SET STORAGE EXTERNAL",
    "ALTER TABLE {s}.blocks ALTER COLUMN counts SET STORAGE EXTERNAL",
    "ALTER TABLE {s}.blocks ALTER COLUMN positions SET STORAGE EXTERNAL",
    "CREATE TABLE IF NOT EXISTS {s}.body_df(term text PRIMARY KEY, df integer NOT NULL)",
    "CREATE TABLE IF NOT EXISTS {s}.any_df(term text PRIMARY KEY, df integer NOT NULL)",
)

WRITE_LOCK = "SELECT pg_advisory_xact_lock(hashtext(%s))"
IN_RECOVERY = "SELECT pg_is_in_recovery()"
# On a standby: WAL received but not replayed (bytes), whether replay is paused, and the age
# of the last replayed transaction (seconds; NULL before any).
REPLAY_LAG = """
    SELECT coalesce(pg_wal_lsn_diff(pg_last_wal_receive_lsn(), pg_last_wal_replay_lsn()), 0),
           pg_is_wal_replay_paused(),
           extract(epoch FROM now() - pg_last_xact_replay_timestamp())::float8"""
GET_META = "SELECT key, value FROM {s}.meta"
PUT_META = """
    INSERT INTO {s}.meta(key, value) VALUES (%s, %s)
    ON CONFLICT (key) DO UPDATE SET value = excluded.value"""
SCHEMA_EXISTS = """
    SELECT EXISTS (SELECT 1 FROM information_schema.tables
                   WHERE table_schema = %s AND table_name = 'meta')"""
RESERVE_UNIT_IDS = """
    SELECT nextval(format('%%I.unit_ids', %s::text)::regclass) FROM generate_series(1, %s)"""
COPY_DOCUMENTS = (
    "COPY {s}.documents(doc_id, title, text, metadata, title_phrase, alias_key) FROM STDIN"
)
COPY_UNITS = """COPY {s}.units(unit_id, doc_id, heading, char_start, char_end,
    title_tokens, heading_tokens, body_tokens) FROM STDIN"""
NEXT_SEGMENT = "SELECT nextval(format('%%I.segment_ids', %s::text)::regclass)"
# Binary COPY: packed bytes go as they are (no hex text); the column types in order below.
COPY_SEGMENT = """COPY {s}.segments(segment, min_unit, max_unit, gap_bytes, freq_bytes,
    count_bytes, position_bytes, span, units, lengths) FROM STDIN (FORMAT BINARY)"""
SEGMENT_TYPES = ("int8", "int8", "int8", "int2", "int2", "int2", "int2", "int4", "bytea", "bytea")
COPY_BLOCKS = """COPY {s}.blocks(term, segment, gaps, freqs, counts, positions)
    FROM STDIN (FORMAT BINARY)"""
BLOCK_TYPES = ("text", "int8", "bytea", "bytea", "bytea", "bytea")
_HEADERS = """SELECT segment, min_unit, gap_bytes, freq_bytes, count_bytes, position_bytes, span,
    units, lengths FROM {s}.segments"""
SEGMENT_HEADERS = _HEADERS
OVERLAPPING_SEGMENTS = f"{_HEADERS} WHERE max_unit >= %s AND min_unit <= %s"
SEGMENT_SIZES = """
    SELECT segment, octet_length(units) / 8 FROM {s}.segments
    ORDER BY octet_length(units), segment"""
CHOSEN_SEGMENTS = f"{_HEADERS} WHERE segment = ANY(%s)"
SET_LENGTHS = "UPDATE {s}.segments SET lengths = %s WHERE segment = %s"
# Positions are read (detoasted) only for the terms in %(positional)s: a phrase's words.
BLOCKS = """
    SELECT term, segment, gaps, freqs,
           CASE WHEN term = ANY(%(positional)s) THEN counts END,
           CASE WHEN term = ANY(%(positional)s) THEN positions END
    FROM {s}.blocks WHERE term = ANY(%(terms)s)"""
SEGMENT_BLOCKS = """
    SELECT term, segment, gaps, freqs, counts, positions FROM {s}.blocks
    WHERE segment = ANY(%s)"""
DROP_BLOCKS = "DELETE FROM {s}.blocks WHERE segment = ANY(%s)"
DROP_SEGMENTS = "DELETE FROM {s}.segments WHERE segment = ANY(%s)"
GENERATION = "SELECT generation, units FROM {s}.totals"
ADD_DF = """
    INSERT INTO {s}.{table}(term, df) SELECT * FROM unnest(%b::text[], %b::integer[])
    ON CONFLICT (term) DO UPDATE SET df = {table}.df + excluded.df"""
PRUNE_DF = "DELETE FROM {s}.{table} WHERE df <= 0"
ADD_TOTALS = """UPDATE {s}.totals
    SET units = units + %s, tokens = tokens + %s, generation = generation + 1"""
DOOMED_UNITS = """
    SELECT unit_id, title_tokens, heading_tokens, body_tokens FROM {s}.units
    WHERE doc_id = ANY(%s)"""
DELETE_DOCUMENTS = "DELETE FROM {s}.documents WHERE doc_id = ANY(%s)"

UNIT_COUNT = "SELECT units FROM {s}.totals"
SCHEMA_BYTES = """
    SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c
    JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = %s AND c.relkind IN ('r', 'm')"""
DOCUMENT_COUNT = "SELECT count(*) FROM {s}.documents"
BODY_TOKEN_DF = "SELECT term, df FROM {s}.body_df WHERE term = ANY(%s)"
UNITS = """
    SELECT u.unit_id, u.doc_id, d.title, u.heading, u.char_start, u.char_end,
           substr(d.text, u.char_start + 1, u.char_end - u.char_start)
    FROM {s}.units u JOIN {s}.documents d ON d.doc_id = u.doc_id
    WHERE u.unit_id = ANY(%s)"""
UNITS_OF_DOCUMENTS = "SELECT unit_id FROM {s}.units WHERE doc_id = ANY(%s)"
FILTERED_UNITS = """
    SELECT u.unit_id FROM {s}.units u JOIN {s}.documents d ON d.doc_id = u.doc_id
    WHERE {filters}"""
METADATA = "SELECT doc_id, metadata FROM {s}.documents WHERE doc_id = ANY(%s)"
DOCUMENT = "SELECT doc_id, text, title, metadata FROM {s}.documents WHERE doc_id = %s"
ALL_DOCUMENT_TEXTS = "SELECT text FROM {s}.documents"
TITLE_ALIASES = """
    SELECT alias_key, min(title_phrase) FROM {s}.documents
    WHERE alias_key = ANY(%s) AND alias_key <> '' AND alias_key <> title_phrase
    GROUP BY alias_key HAVING count(DISTINCT title_phrase) = 1"""
TITLE_PHRASES = """
    SELECT DISTINCT title_phrase FROM {s}.documents
    WHERE title_phrase = ANY(%s) AND strpos(title_phrase, ' ') > 0"""

ANY_TOKEN_DF = "SELECT term, df FROM {s}.any_df WHERE term = ANY(%s)"
# Which of the given units (in ``h``) pass a compiled metadata filter.
CONTENT_KEYS = """
    SELECT unit_id, doc_id, char_start FROM {s}.units WHERE unit_id = ANY(%s::bigint[])"""
PASSING_UNITS = """
    SELECT h.unit_id FROM unnest(%(candidates)s::bigint[]) AS h(unit_id) WHERE {filters}"""


def compose(statement: str, schema: str, **parts: str | sql.Composable) -> sql.Composed:
    """A statement with the schema and named tables as quoted identifiers, plus SQL fragments
    (a compiled filter condition) given as composables."""
    names = {
        key: sql.Identifier(value) if isinstance(value, str) else value
        for key, value in parts.items()
    }
    return sql.SQL(statement).format(s=sql.Identifier(schema), **names)


def sql_fragment(text: str) -> sql.SQL:
    """A fixed SQL fragment (never caller text) to put where a statement takes a condition."""
    return sql.SQL(text)
