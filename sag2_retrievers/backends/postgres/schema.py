"""The PostgreSQL backend's schema and statements, written once; ``{s}`` is the schema name.

Every statement is composed with ``psycopg.sql`` (the schema as an identifier) and every value
is bound. BM25 is FTS5's ``bm25()`` with weights (2, 2, 1), reproduced operation for operation
(see ``docs/method.md`` and ``../shared/design/BACKENDS.md``): per query phrase p,
``idf(p) * (F * (k1 + 1)) / (F + k1 * ((1 - b) + b * |D| / avgdl))`` summed in phrase order,
where F weights the phrase's instances per column, |D| counts the row's tokens unweighted,
and idf(p) = ln((N - n_p + 0.5) / (n_p + 0.5)), 1e-6 when that is not positive.
"""

from __future__ import annotations

from psycopg import sql

CREATE_SCHEMA = (
    "CREATE SCHEMA IF NOT EXISTS {s}",
    "CREATE TABLE IF NOT EXISTS {s}.meta(key text PRIMARY KEY, value text NOT NULL)",
    """CREATE TABLE IF NOT EXISTS {s}.totals(
        id boolean PRIMARY KEY DEFAULT true CHECK (id),
        units bigint NOT NULL,
        tokens bigint NOT NULL)""",
    "INSERT INTO {s}.totals(units, tokens) VALUES (0, 0) ON CONFLICT (id) DO NOTHING",
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
        title_tokens text[] NOT NULL,
        heading_tokens text[] NOT NULL,
        body_tokens text[] NOT NULL,
        length integer NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS units_by_doc ON {s}.units(doc_id)",
    """CREATE TABLE IF NOT EXISTS {s}.postings(
        term text NOT NULL,
        unit_id bigint NOT NULL REFERENCES {s}.units(unit_id) ON DELETE CASCADE,
        tf_title integer NOT NULL,
        tf_heading integer NOT NULL,
        tf_body integer NOT NULL,
        length integer NOT NULL,
        PRIMARY KEY (term, unit_id))""",
    "CREATE INDEX IF NOT EXISTS postings_by_unit ON {s}.postings(unit_id)",
    "CREATE TABLE IF NOT EXISTS {s}.body_df(term text PRIMARY KEY, df integer NOT NULL)",
    "CREATE TABLE IF NOT EXISTS {s}.any_df(term text PRIMARY KEY, df integer NOT NULL)",
    # Instances of a phrase (an array of tokens) in a column's token array.
    """CREATE OR REPLACE FUNCTION {s}.phrase_count(tokens text[], phrase text[])
        RETURNS integer LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
        SELECT count(*)::integer
        FROM unnest(array_positions(tokens, phrase[1])) AS i
        WHERE tokens[i:i + cardinality(phrase) - 1] = phrase $$""",
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
    title_tokens, heading_tokens, body_tokens, length) FROM STDIN"""
COPY_POSTINGS = "COPY {s}.postings(term, unit_id, tf_title, tf_heading, tf_body, length) FROM STDIN"
ADD_DF = """
    INSERT INTO {s}.{table}(term, df) SELECT * FROM unnest(%s::text[], %s::integer[])
    ON CONFLICT (term) DO UPDATE SET df = {table}.df + excluded.df"""
PRUNE_DF = "DELETE FROM {s}.{table} WHERE df <= 0"
ADD_TOTALS = "UPDATE {s}.totals SET units = units + %s, tokens = tokens + %s"
DOOMED_UNITS = """
    SELECT title_tokens, heading_tokens, body_tokens, length FROM {s}.units
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
TITLE_ALIASES = """
    SELECT alias_key, min(title_phrase) FROM {s}.documents
    WHERE alias_key = ANY(%s) AND alias_key <> '' AND alias_key <> title_phrase
    GROUP BY alias_key HAVING count(DISTINCT title_phrase) = 1"""
TITLE_PHRASES = """
    SELECT DISTINCT title_phrase FROM {s}.documents
    WHERE title_phrase = ANY(%s) AND strpos(title_phrase, ' ') > 0"""

# n_p: rows matching each phrase in any field; a one-token phrase reads the any-field df kept
# at ingest (no global count over its postings), a longer one counts its hits.
_PHRASE_DF = """
    SELECT w.phrase, a.df FROM wanted w JOIN {s}.any_df a ON a.term = w.phrase
    WHERE cardinality(w.words) = 1
    UNION ALL
    SELECT h.phrase, count(*) FROM hits h WHERE strpos(h.phrase, ' ') > 0 GROUP BY h.phrase"""

# Units holding each phrase, with its instances per column. A phrase is its final tokens
# joined by single spaces; a one-token phrase is a postings lookup, a longer one is counted
# on the token arrays of the units that hold its first token.
_HITS = (
    """
    wanted AS (SELECT DISTINCT phrase, string_to_array(phrase, ' ') AS words FROM phrases_in),
    hits AS (
        SELECT w.phrase, p.unit_id, p.tf_title, p.tf_heading, p.tf_body, p.length
        FROM wanted w JOIN {s}.postings p ON p.term = w.phrase
        WHERE cardinality(w.words) = 1
        UNION ALL
        SELECT w.phrase, u.unit_id, c.tf_title, c.tf_heading, c.tf_body, u.length
        FROM wanted w
        JOIN (SELECT DISTINCT ON (w2.phrase) w2.phrase, word
              FROM wanted w2 CROSS JOIN unnest(w2.words) AS word
              LEFT JOIN {s}.any_df a ON a.term = word
              WHERE cardinality(w2.words) > 1
              ORDER BY w2.phrase, coalesce(a.df, 0), word) rarest ON rarest.phrase = w.phrase
        JOIN {s}.postings holding ON holding.term = rarest.word
        JOIN {s}.units u ON u.unit_id = holding.unit_id
        CROSS JOIN LATERAL (SELECT
            {s}.phrase_count(u.title_tokens, w.words) AS tf_title,
            {s}.phrase_count(u.heading_tokens, w.words) AS tf_heading,
            {s}.phrase_count(u.body_tokens, w.words) AS tf_body) c
        WHERE cardinality(w.words) > 1 AND c.tf_title + c.tf_heading + c.tf_body > 0),
    stats AS (SELECT units, tokens::float8 / greatest(units, 1)::float8 AS avgdl FROM {s}.totals),
    idf AS (
        SELECT phrase, CASE WHEN x <= 0 THEN 1e-6::float8 ELSE x END AS idf
        FROM (SELECT n.phrase,
                     ln(((s.units - n.df)::float8 + 0.5::float8)
                        / (n.df::float8 + 0.5::float8)) AS x
              FROM ("""
    + _PHRASE_DF
    + """) n CROSS JOIN stats s) counted)"""
)


# One phrase's contribution to one row, in FTS5's order of operations.
_PART = """
    i.idf * (
      ((2 * h.tf_title + 2 * h.tf_heading + h.tf_body)::float8 * (1.2::float8 + 1.0::float8))
      / ((2 * h.tf_title + 2 * h.tf_heading + h.tf_body)::float8
         + 1.2::float8 * ((1::float8 - 0.75::float8)
                          + 0.75::float8 * h.length::float8 / st.avgdl)))"""

SEARCH = f"""
    WITH query AS (
        SELECT phrase, ord FROM unnest(%(phrases)s::text[]) WITH ORDINALITY AS q(phrase, ord)),
    phrases_in AS (SELECT phrase FROM query),{_HITS},
    parts AS (
        SELECT h.unit_id, q.ord, {_PART} AS part
        FROM query q JOIN hits h ON h.phrase = q.phrase JOIN idf i ON i.phrase = q.phrase
        CROSS JOIN stats st
        WHERE {{filters}})
    SELECT unit_id, sum(part ORDER BY ord) AS score FROM parts
    GROUP BY unit_id ORDER BY score DESC, unit_id LIMIT %(limit)s"""

# Per required phrase: its unseen units passing the filters, ranked by BM25 of the scoring
# phrases (repeats count), ties by unit id, the first %(limit)s of each.
EXPAND = f"""
    WITH query AS (
        SELECT phrase, ord FROM unnest(%(phrases)s::text[]) WITH ORDINALITY AS q(phrase, ord)),
    required AS (
        SELECT phrase, ord FROM unnest(%(required)s::text[]) WITH ORDINALITY AS r(phrase, ord)),
    phrases_in AS (SELECT phrase FROM query UNION SELECT phrase FROM required),{_HITS},
    members AS (
        SELECT r.ord AS required_ord, h.unit_id
        FROM required r JOIN hits h ON h.phrase = r.phrase
        WHERE NOT (h.unit_id = ANY(%(exclude)s::bigint[])) AND {{filters}}),
    scores AS (
        SELECT h.unit_id, sum({_PART} ORDER BY q.ord) AS score
        FROM (SELECT DISTINCT unit_id FROM members) m
        JOIN hits h ON h.unit_id = m.unit_id JOIN query q ON q.phrase = h.phrase
        JOIN idf i ON i.phrase = q.phrase CROSS JOIN stats st
        GROUP BY h.unit_id),
    ranked AS (
        SELECT m.required_ord, m.unit_id, row_number() OVER (
            PARTITION BY m.required_ord ORDER BY s.score DESC NULLS LAST, m.unit_id) AS position
        FROM members m LEFT JOIN scores s ON s.unit_id = m.unit_id)
    SELECT required_ord, unit_id FROM ranked WHERE position <= %(limit)s
    ORDER BY required_ord, position"""

MATCH_COUNTS = f"""
    WITH phrases_in AS (SELECT phrase FROM unnest(%(phrases)s::text[]) AS q(phrase)),{_HITS}
    SELECT phrase, count(*) FROM hits GROUP BY phrase"""

BODY_PHRASE_COUNTS = f"""
    WITH phrases_in AS (SELECT phrase FROM unnest(%(phrases)s::text[]) AS q(phrase)),{_HITS}
    SELECT phrase, count(*) FROM hits WHERE tf_body > 0 GROUP BY phrase"""


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
