"""PostgresIndex: the SAG2 lexical backend on PostgreSQL, with FTS5's BM25 from posting blocks.

Same documents in, same rankings out as `SQLiteIndex` (same match sets, same scores, same
order): the analysed tokens that SQLite hands to FTS5 are stored here as per-term posting
blocks (written with COPY, merged like SQLite's segments) and token arrays; a round's terms
are read in one statement and scored on the client by SQLite's scorer functions. Needs the
``postgres`` extra (psycopg 3).
"""

from __future__ import annotations

import logging
import re
import threading
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from concurrent.futures import Executor
from contextlib import contextmanager
from typing import Any

import numpy as np
import numpy.typing as npt

from ...analysis import tokenize
from ...analysis.paper.diversity import word_document_frequencies
from ...documents import Document, Unit
from ...errors import IndexUnavailableError, InvalidInputError
from ...filters import parse_filters
from ...query import alias_key, check_limit, check_question, search_hits
from ...query import query_terms as backend_query_terms
from ...settings import IndexSettings, reconcile_settings
from ..base import Filters, SearchHit, sentence_expansion_units
from ..ingest import PreparedBatch, PreparedUnit, new_executor, pipelined_ingest
from ..scorer import ArrayScorer, Statistics
from . import compaction
from . import schema as pg
from .blocks import deleted, from_units, length_table, read_segment
from .connect import ConnectionString
from .filters import compile_postgres
from .postings import BatchFrequencies, DocumentFrequencies
from .scorer import BlockPostings, Generation, PhraseFrequencies

_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
# A meta row naming how postings are stored; schemas built before posting blocks lack it.
_LAYOUT = ("postings_layout", "blocks-1")
_FILTER_CHUNK = 2_000  # ranked candidates checked against a filter per round trip
logger = logging.getLogger(__name__)
Ints = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]


class PostgresIndex:
    """A SAG2 index in a PostgreSQL schema: add, delete, upsert, BM25 search, df, aliases.

    ``dsn`` is a libpq connection string or URL (it is never shown: passwords stay out of
    reprs and errors). ``create=False`` refuses a schema that holds no index. Each thread has
    its own connection; reads
    inside `snapshot` share one REPEATABLE READ transaction, and writers are serialised by an
    advisory lock, each call one transaction.
    """

    # Document frequencies and token totals are counted in the analysis workers.
    unit_statistics = DocumentFrequencies()

    def __init__(
        self,
        dsn: str,
        settings: IndexSettings | None = None,
        *,
        schema: str = "sag2",
        create: bool = True,
    ) -> None:
        if not isinstance(schema, str) or not _SCHEMA_NAME.fullmatch(schema):
            raise InvalidInputError(
                f"schema must be a lowercase SQL name (letters, digits, _), got {schema!r}"
            )
        self._dsn = ConnectionString(dsn)
        self.schema = schema
        self._local = threading.local()
        self._connections: list[Any] = []
        self._registry_lock = threading.Lock()
        self._closed = False
        self._executor: Executor | None = None
        self._state: Generation | None = None
        self._scorer = ArrayScorer()
        self._phrase_df = PhraseFrequencies()
        self.settings = self._open(settings, create)

    def __repr__(self) -> str:
        return f"PostgresIndex(schema={self.schema!r}, settings={self.settings!r})"

    def __enter__(self) -> PostgresIndex:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- connections and settings -------------------------------------------------------

    def _connection(self) -> Any:
        """This thread's connection (autocommit; transactions are explicit)."""
        if self._closed:
            raise IndexUnavailableError(f"PostgresIndex {self.schema!r} is closed; open it again")
        connection = getattr(self._local, "connection", None)
        if connection is None:
            connection = self._dsn.connect()
            self._local.connection = connection
            with self._registry_lock:
                self._connections.append(connection)
        return connection

    def _sql(self, statement: str, **identifiers: str) -> Any:
        """A statement composed for this index's schema."""
        return pg.compose(statement, self.schema, **identifiers)

    def _open(self, requested: IndexSettings | None, create: bool) -> IndexSettings:
        """Check the stored settings (a read, so read replicas open), or create the schema."""
        stored = self._stored_meta()
        if self._on_standby():
            self._log_replay_lag()
        if stored:
            if stored.get(_LAYOUT[0]) != _LAYOUT[1]:
                raise IndexUnavailableError(
                    f"PostgreSQL schema {self.schema!r} was built by an older sag2-retrievers "
                    "(postings rows, not posting blocks); rebuild it into a new schema"
                )
            stored = {key: value for key, value in stored.items() if key != _LAYOUT[0]}
            return reconcile_settings(f"PostgreSQL schema {self.schema!r}", stored, requested)
        if not create:
            raise IndexUnavailableError(
                f"PostgreSQL schema {self.schema!r} holds no SAG2 index; build it first "
                "(create=True, or `sag2 index CORPUS --db postgresql://...`)"
            )
        with self._write() as cursor:
            settings = reconcile_settings(
                f"PostgreSQL schema {self.schema!r}", self._stored_meta(), requested
            )
            for statement in pg.CREATE_SCHEMA:
                cursor.execute(self._sql(statement))
            meta = [*settings.as_meta().items(), _LAYOUT]
            cursor.executemany(self._sql(pg.PUT_META), meta)
        return settings

    def _stored_meta(self) -> dict[str, str]:
        """The meta rows of this schema, empty when it does not exist yet."""
        if not self._fetch(pg.SCHEMA_EXISTS, (self.schema,))[0][0]:
            return {}
        return {str(key): str(value) for key, value in self._fetch(self._sql(pg.GET_META))}

    def _on_standby(self) -> bool:
        """True when this connection's server is a hot standby (in recovery, read-only)."""
        return bool(self._fetch(pg.IN_RECOVERY)[0][0])

    def _log_replay_lag(self) -> None:
        """Say in the debug log how far the standby this index reads is behind."""
        behind, paused, age = self._fetch(pg.REPLAY_LAG)[0]
        state = "paused" if paused else "running"
        since = "no transaction replayed yet" if age is None else f"last one {age:.1f} s ago"
        if behind > 0:
            logger.debug(
                "PostgreSQL schema %r is read from a hot standby that is behind: %d bytes of "
                "received WAL not replayed yet (replay %s; %s)",
                self.schema,
                int(behind),
                state,
                since,
            )
        else:
            logger.debug(
                "PostgreSQL schema %r is read from a hot standby, replay caught up with the "
                "WAL received (replay %s; %s)",
                self.schema,
                state,
                since,
            )

    def close(self) -> None:
        """Close every connection this index opened. Idempotent."""
        with self._registry_lock:
            self._closed = True
            for connection in self._connections:
                connection.close()
            self._connections = []
        self._local.connection = None
        if self._executor is not None:
            self._executor.shutdown()
            self._executor = None

    @contextmanager
    def _write(self) -> Iterator[Any]:
        """One write transaction holding the index's advisory lock, as a cursor."""
        connection = self._connection()
        if connection.info.transaction_status != 0:
            raise InvalidInputError("cannot write to the index inside a read snapshot")
        if self._on_standby():
            server = f"{connection.info.host}:{connection.info.port}"
            raise IndexUnavailableError(
                f"PostgreSQL schema {self.schema!r} is on a hot standby at {server} (a read-only"
                " replica): it can be searched but not changed; write to the primary server"
            )
        with self._server_errors(), connection.transaction(), connection.cursor() as cursor:
            cursor.execute(pg.WRITE_LOCK, (f"sag2:{self.schema}",))
            yield cursor

    @contextmanager
    def _server_errors(self) -> Iterator[None]:
        """psycopg's errors as the one IndexUnavailableError, naming the schema."""
        import psycopg

        try:
            yield
        except psycopg.Error as error:
            first_line = (str(error).splitlines() or [""])[0]
            raise IndexUnavailableError(
                f"PostgreSQL index {self.schema!r}: the server failed the request "
                f"({error.__class__.__name__}: {first_line}); a write was rolled back. "
                "Check the server, then retry"
            ) from error

    # -- writing -------------------------------------------------------------------------

    def add_documents(self, documents: Iterable[Document], *, parallel: bool = True) -> int:
        """Insert or replace (by id) documents in one transaction; returns units written.

        The whole batch is validated and analysed before anything is written.
        """
        return self.ingest([documents], parallel=parallel)

    def ingest(
        self,
        batches: Iterable[Iterable[Document]],
        *,
        parallel: bool = True,
        on_batch: Callable[[int], None] | None = None,
    ) -> int:
        """Add batches of documents, one transaction each; returns the units written.

        Analysis runs in worker processes while the previous batch is written, as for SQLite.
        """
        executor = self._analysis_executor() if parallel else None
        return pipelined_ingest(
            batches, self.upsert_analysed, self.settings, self.unit_statistics, executor, on_batch
        )

    def _analysis_executor(self) -> Executor:
        """The process pool used for analysis, created on first use."""
        if self._executor is None:
            self._executor = new_executor()
        return self._executor

    def upsert_analysed(
        self, documents: Sequence[Document], analysed: PreparedBatch[BatchFrequencies]
    ) -> int:
        """Replace (by id) documents with their analysed units in one transaction; units written."""
        with self._write() as cursor:
            self._delete_ids(cursor, [document.id for document in documents])
            rows = _unit_rows(documents, analysed.documents)
            cursor.execute(pg.RESERVE_UNIT_IDS, (self.schema, max(len(rows), 1)))
            unit_ids = sorted(int(row[0]) for row in cursor.fetchall())[: len(rows)]
            self._copy_documents(cursor, documents)
            self._copy_units(cursor, rows, unit_ids)
            frequencies = analysed.statistics
            postings = from_units(frequencies.postings, unit_ids)
            units = (np.asarray(unit_ids, dtype=np.int64), frequencies.postings.lengths)
            compaction.write_segment(cursor, self.schema, postings, units)
            compaction.compact(cursor, self.schema)
            self._add_df(cursor, "body_df", frequencies.body_df)
            self._add_df(cursor, "any_df", frequencies.any_df)
            cursor.execute(self._sql(pg.ADD_TOTALS), (len(rows), frequencies.tokens))
        return len(rows)

    def optimize(self) -> None:
        """Merge every posting segment into one, dropping deleted units' postings."""
        with self._write() as cursor:
            compaction.optimize(cursor, self.schema)
            cursor.execute(self._sql(pg.ADD_TOTALS), (0, 0))

    def _copy_documents(self, cursor: Any, documents: Sequence[Document]) -> None:
        """Write the document rows, with the title's phrase and alias key for lexical repair."""
        profile = self.settings.analyzer_profile
        with cursor.copy(self._sql(pg.COPY_DOCUMENTS)) as copy:
            for document in documents:
                phrase = " ".join(tokenize(document.title, profile=profile))
                copy.write_row(
                    (
                        document.id,
                        document.title,
                        document.text,
                        document.metadata_json,
                        phrase,
                        alias_key(document.title, profile),
                    )
                )

    def _copy_units(
        self, cursor: Any, rows: list[tuple[str, PreparedUnit]], unit_ids: list[int]
    ) -> None:
        """Write the units with their token texts (for taking back df when deleted)."""
        with cursor.copy(self._sql(pg.COPY_UNITS)) as copy:
            for unit_id, (doc_id, unit) in zip(unit_ids, rows, strict=True):
                copy.write_row(
                    (
                        unit_id,
                        doc_id,
                        unit.heading,
                        unit.char_start,
                        unit.char_end,
                        unit.title_tokens,
                        unit.heading_tokens,
                        unit.body_tokens,
                    )
                )

    def _add_df(self, cursor: Any, table: str, counts: Counter[str]) -> None:
        """Add (or, with negative counts, subtract) document frequencies, in a stable order."""
        if not counts:
            return
        terms = sorted(counts)
        values = (terms, [counts[term] for term in terms])
        cursor.execute(self._sql(pg.ADD_DF, table=table), values, binary=True)
        cursor.execute(self._sql(pg.PRUNE_DF, table=table))

    def delete(self, doc_ids: Iterable[str]) -> int:
        """Delete documents and their units by id, in one transaction; returns documents removed."""
        ids = list(dict.fromkeys(_string_ids(doc_ids)))
        if not ids:
            return 0
        with self._write() as cursor:
            return self._delete_ids(cursor, ids)

    def _delete_ids(self, cursor: Any, doc_ids: list[str]) -> int:
        """Remove documents (their units and postings cascade) and take back their counts."""
        cursor.execute(self._sql(pg.DOOMED_UNITS), (doc_ids,))
        body_df: Counter[str] = Counter()
        any_df: Counter[str] = Counter()
        units = tokens = 0
        doomed = []
        for unit_id, *texts in cursor.fetchall():
            title, heading, body = (text.split() for text in texts)
            doomed.append(int(unit_id))
            units += 1
            tokens += len(title) + len(heading) + len(body)
            body_df.subtract(set(body))
            any_df.subtract({*title, *heading, *body})
        cursor.execute(self._sql(pg.DELETE_DOCUMENTS), (doc_ids,))
        removed = int(cursor.rowcount)
        self._mark_deleted(cursor, doomed)
        self._add_df(cursor, "body_df", body_df)
        self._add_df(cursor, "any_df", any_df)
        cursor.execute(self._sql(pg.ADD_TOTALS), (-units, -tokens))
        return removed

    def _mark_deleted(self, cursor: Any, unit_ids: list[int]) -> None:
        """Give deleted units |D| = 0 in their segments, so readers skip their postings."""
        if not unit_ids:
            return
        dead = np.asarray(sorted(unit_ids), dtype=np.int64)
        cursor.execute(self._sql(pg.OVERLAPPING_SEGMENTS), (int(dead[0]), int(dead[-1])))
        for segment in [read_segment(row) for row in cursor.fetchall()]:
            lengths = deleted(segment, dead)
            if lengths is not None:
                kept = lengths.astype("<u4").tobytes()
                cursor.execute(self._sql(pg.SET_LENGTHS), (kept, segment.segment))

    # -- reading ---------------------------------------------------------------------------

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """Make this thread's reads inside the block see one state (REPEATABLE READ, re-entrant)."""
        connection = self._connection()
        if connection.info.transaction_status != 0:
            yield
            return
        connection.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        try:
            yield
        finally:
            connection.execute("COMMIT")

    def _fetch(self, statement: Any, params: Any = None) -> list[tuple[Any, ...]]:
        """Run one read statement and fetch its rows."""
        with self._server_errors(), self._connection().cursor() as cursor:
            cursor.execute(statement, params)
            return list(cursor.fetchall())

    def unit_count(self) -> int:
        """N: the number of indexed units."""
        return int(self._fetch(self._sql(pg.UNIT_COUNT))[0][0])

    def document_count(self) -> int:
        """The number of stored source documents."""
        return int(self._fetch(self._sql(pg.DOCUMENT_COUNT))[0][0])

    def search(
        self,
        question: str,
        limit: int = 100,
        *,
        max_tokens: int = 80,
        filters: Filters | None = None,
    ) -> list[SearchHit]:
        """BM25 top ``limit`` units for the question's first ``max_tokens`` distinct tokens."""
        return search_hits(self, question, limit, max_tokens=max_tokens, filters=filters)

    def query_terms(self, question: str, max_tokens: int = 80) -> list[str]:
        """The question's distinct tokens, each repaired by a title alias if it matches nothing."""
        check_question(question)
        return backend_query_terms(self, question, max_tokens)

    def rank_expression(
        self, terms: Sequence[str], limit: int, *, filters: Filters | None = None
    ) -> list[tuple[int, float]]:
        """Top ``limit`` (unit id, BM25 of the OR of the distinct terms), best first, ties by
        document id and offset."""
        check_limit(limit)
        phrases = _phrases(term for term in terms if term)
        if not phrases or limit == 0:
            return []
        with self.snapshot():
            source, stats = self._source()
            if parse_filters(filters) is None:
                return self._scorer.search(source, stats, phrases, limit)
            parts = self._scorer.ranking(source, stats, phrases, max(_FILTER_CHUNK, 4 * limit))
            return self._passing(parts, filters, limit)

    def _passing(
        self, parts: Iterable[tuple[Ints, Floats]], filters: Filters | None, limit: int
    ) -> list[tuple[int, float]]:
        """The first ``limit`` (unit, score) of a ranking given in parts whose documents pass
        the filters, one round trip per part."""
        condition, values = _filter_condition(self.schema, filters)
        statement = pg.compose(pg.PASSING_UNITS, self.schema, filters=condition)
        kept: list[tuple[int, float]] = []
        for units, scores in parts:
            candidates = units.tolist()
            rows = self._fetch(statement, {"candidates": candidates, **values})
            passing = {int(row[0]) for row in rows}
            pairs = zip(candidates, scores.tolist(), strict=True)
            kept.extend(pair for pair in pairs if pair[0] in passing)
            if len(kept) >= limit:
                break
        return kept[:limit]

    def score_units(self, terms: Sequence[str], unit_ids: Collection[int]) -> dict[int, float]:
        """BM25 of the OR of the distinct terms for the given units; units matching no term
        are absent (corpus statistics as in `rank_expression`)."""
        phrases = _phrases(term for term in terms if term)
        if not phrases or not unit_ids:
            return {}
        with self.snapshot():
            return self._scorer.score_units(*self._source(), phrases, unit_ids)

    def expand(
        self,
        required_terms: Sequence[str],
        scoring_terms: Sequence[str],
        exclude: Collection[int],
        limit: int,
        *,
        filters: Filters | None = None,
    ) -> dict[str, list[int]]:
        """Per required term: the top ``limit`` units holding it in any field, not excluded,
        passing the filters, ranked by BM25 of the OR of ``scoring_terms`` (repeats count),
        ties by unit id. A filter excludes the members whose documents fail it."""
        check_limit(limit)
        required = list(dict.fromkeys(required_terms))
        ranked: dict[str, list[int]] = {term: [] for term in required}
        if not required or limit == 0:
            return ranked
        asked = dict(zip(required, _phrases(required), strict=True))
        scoring = _phrases(term for term in scoring_terms if term)
        with self.snapshot():
            source, stats = self._source()
            blocked = set(exclude)
            if parse_filters(filters) is not None:
                blocked |= self._failing(source, stats, list(asked.values()), filters)
            phrases = list(asked.values())
            found = self._scorer.expand(source, stats, phrases, scoring, blocked, limit)
        return {term: found[phrase] for term, phrase in asked.items()}

    def _failing(
        self, source: BlockPostings, stats: Statistics, terms: list[str], filters: Filters | None
    ) -> set[int]:
        """The units holding any of ``terms`` whose documents fail the filters."""
        members = self._scorer.contributions(source, stats, terms)
        slots = np.unique(np.concatenate([slots for slots, _ in members.values()]))
        candidates = stats.ids[slots]
        chunks = np.split(candidates, range(_FILTER_CHUNK, len(candidates), _FILTER_CHUNK))
        parts = ((chunk, np.zeros(len(chunk))) for chunk in chunks)
        passing = {unit for unit, _ in self._passing(parts, filters, len(candidates))}
        return set(candidates.tolist()) - passing

    def document_frequencies(self, terms: Iterable[str]) -> dict[str, int]:
        """Body-level df: tokens from the df table kept at ingest, phrases by their instances."""
        return self._frequencies(terms, pg.BODY_TOKEN_DF, body=True)

    def document_frequencies_any(self, terms: Iterable[str]) -> dict[str, int]:
        """Units matching each term in any field (the "matches nothing" test)."""
        return self._frequencies(terms, pg.ANY_TOKEN_DF, body=False)

    def _frequencies(self, terms: Iterable[str], token_df: str, *, body: bool) -> dict[str, int]:
        """Per term, a df: a token's from the ``token_df`` table, a phrase's from its
        instances (units holding it in the body, or in any field)."""
        unique = list(dict.fromkeys(terms))
        forms = dict(zip(unique, _phrases(unique), strict=True))
        tokens = [form for form in dict.fromkeys(forms.values()) if form and " " not in form]
        phrases = [form for form in dict.fromkeys(forms.values()) if " " in form]
        counts: dict[str, Any] = {}
        with self.snapshot():
            if tokens:
                counts.update(self._fetch(self._sql(token_df), (tokens,)))
            if phrases:
                found = self._source()[0].phrase_frequencies(phrases)
                counts.update({phrase: pair[body] for phrase, pair in found.items()})
        return {term: int(counts.get(form, 0)) for term, form in forms.items()}

    def _source(self) -> tuple[BlockPostings, Statistics]:
        """The scorer's postings source and statistics at this generation (in a snapshot)."""
        state = self._generation()
        source = BlockPostings(self._read_blocks, state, self._phrase_df, self._content_keys)
        return source, state.stats

    def _content_keys(self, unit_ids: list[int]) -> list[tuple[str, int]]:
        """(document id, character offset) of each unit, in the order given (ties' order)."""
        rows = self._fetch(self._sql(pg.CONTENT_KEYS), (unit_ids,))
        found = {int(unit): (str(doc_id), int(start)) for unit, doc_id, start in rows}
        return [found[unit] for unit in unit_ids]

    def _generation(self) -> Generation:
        """N, avgdl, every unit's |D| and the segment headers at this generation (read once
        per generation; call inside a snapshot)."""
        generation, rows = self._fetch(self._sql(pg.GENERATION))[0]
        state = self._state
        if state is None or state.stats.generation != str(generation):
            segments = [
                read_segment(row) for row in self._fetch_binary(self._sql(pg.SEGMENT_HEADERS))
            ]
            lengths = length_table(segments)
            ids = np.arange(len(lengths), dtype=np.int64)
            stats = Statistics.of_units(str(generation), int(rows), ids, lengths)
            state = Generation(stats, {segment.segment: segment for segment in segments})
            self._state = state
        return state

    def _fetch_binary(self, statement: Any, params: Any = None) -> list[tuple[Any, ...]]:
        """Run one read statement with binary results (bytea arrives as bytes, undecoded)."""
        with self._server_errors(), self._connection().cursor(binary=True) as cursor:
            cursor.execute(statement, params)
            return list(cursor.fetchall())

    def _read_blocks(self, terms: list[str], positional: list[str]) -> list[tuple[Any, ...]]:
        """The block rows of ``terms`` (term, segment, gaps, F, then position counts and
        positions for the ``positional`` terms, else NULL), in one statement."""
        params = {"terms": terms, "positional": positional}
        return self._fetch_binary(self._sql(pg.BLOCKS), params)

    def units(self, unit_ids: Iterable[int]) -> dict[int, Unit]:
        """The units with these ids (missing ids are absent)."""
        ids = [int(unit_id) for unit_id in unit_ids]
        rows = self._fetch(self._sql(pg.UNITS), (ids,))
        return {
            int(unit_id): Unit(int(unit_id), doc_id, title, heading, body, start, end)
            for unit_id, doc_id, title, heading, start, end, body in rows
        }

    def document_units(self, doc_ids: Iterable[str]) -> dict[int, Unit]:
        """Every unit of the given documents, keyed by unit id (unknown ids have none)."""
        with self.snapshot():
            rows = self._fetch(self._sql(pg.UNITS_OF_DOCUMENTS), (_string_ids(doc_ids),))
            return self.units(int(row[0]) for row in rows)

    def allowed_units(self, filters: Filters) -> set[int]:
        """Every unit whose document passes the filters (maintenance, not retrieval)."""
        expr = parse_filters(filters)
        condition: Any = pg.sql_fragment("true")
        values: dict[str, Any] = {}
        if expr is not None:
            condition, values = compile_postgres(expr)
        statement = pg.compose(pg.FILTERED_UNITS, self.schema, filters=condition)
        return {int(row[0]) for row in self._fetch(statement, values)}

    def stats(self) -> dict[str, int]:
        """Sizes for reports: documents, units, and the schema's bytes on disk."""
        size = self._fetch(pg.SCHEMA_BYTES, (self.schema,))[0][0]
        return {
            "documents": self.document_count(),
            "units": self.unit_count(),
            "bytes": int(size or 0),
        }

    def expansion_units(self, unit_ids: Iterable[int]) -> dict[int, list[list[str]]]:
        """Per unit, its sentences' expansion units (names as phrases, then tokens), analysed
        from its text (missing ids are absent)."""
        return sentence_expansion_units(self.units(unit_ids), self.settings.analyzer_profile)

    def metadata(self, doc_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        """The stored metadata of these documents, keyed by id."""
        rows = self._fetch(self._sql(pg.METADATA), (list(_string_ids(doc_ids)),))
        return {doc_id: dict(metadata) for doc_id, metadata in rows}

    def document(self, doc_id: str) -> Document | None:
        """The stored document with this id, or None."""
        rows = self._fetch(self._sql(pg.DOCUMENT), (doc_id,))
        if not rows:
            return None
        stored_id, text, title, metadata = rows[0]
        return Document(stored_id, text, title, metadata)

    def title_aliases(self, folded: Collection[str]) -> dict[str, str]:
        """For each accent-folded title key that is one title's alias, that title's phrase."""
        if not folded:
            return {}
        return dict(self._fetch(self._sql(pg.TITLE_ALIASES), (list(folded),)))

    def word_document_frequencies(self, words: Collection[str]) -> tuple[int, dict[str, int]]:
        """The number of documents and each word's document frequency over their texts
        (read from every document on each call: only the "paper" profile asks)."""
        texts = [row[0] for row in self._fetch(self._sql(pg.ALL_DOCUMENT_TEXTS))]
        df = word_document_frequencies(texts)
        return len(texts), {word: df.get(word, 0) for word in words}

    def title_phrases(self, phrases: Collection[str]) -> set[str]:
        """The given phrases that are multiword corpus titles."""
        if not phrases:
            return set()
        return {row[0] for row in self._fetch(self._sql(pg.TITLE_PHRASES), (list(phrases),))}


def _phrases(terms: Iterable[str]) -> list[str]:
    """Each term as its tokens joined by single spaces (the form postings are keyed by; the
    analyzer's tokens are final, `text.final_tokens`)."""
    return [" ".join(term.split()) for term in terms]


def _string_ids(doc_ids: Iterable[str]) -> list[str]:
    """Document ids as a list of strings, or a clear error."""
    if isinstance(doc_ids, (str, bytes)):
        raise InvalidInputError("doc_ids must be a collection of ids, not a single string")
    ids = list(doc_ids)
    for doc_id in ids:
        if not isinstance(doc_id, str):
            raise InvalidInputError(f"document ids must be strings, got {doc_id!r}")
        if "\x00" in doc_id:  # as SQLite's json_list: no stored id holds one
            raise InvalidInputError(f"document id {doc_id!r} contains a NUL character")
    return ids


def _unit_rows(
    documents: Sequence[Document], prepared: Sequence[Any]
) -> list[tuple[str, PreparedUnit]]:
    """(document id, prepared unit) for every unit of the batch, in order."""
    return [
        (document.id, unit)
        for document, item in zip(documents, prepared, strict=True)
        for unit in item.units
    ]


def _filter_condition(schema: str, filters: Filters | None) -> tuple[Any, dict[str, Any]]:
    """A bound SQL condition on hit ``h``: its unit's document metadata passes the filters."""
    from psycopg import sql

    expr = parse_filters(filters)
    if expr is None:
        return sql.SQL("true"), {}
    condition, values = compile_postgres(expr)
    exists = sql.SQL(
        "EXISTS (SELECT 1 FROM {s}.units u JOIN {s}.documents d ON d.doc_id = u.doc_id"
        " WHERE u.unit_id = h.unit_id AND {condition})"
    ).format(s=sql.Identifier(schema), condition=condition)
    return exists, values
