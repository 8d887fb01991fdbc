"""SQLiteIndex: one SQLite file with the original text, an FTS5 index, and lexical statistics."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Executor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..._sqlite import connect, json_list, raise_if_busy, raise_if_full
from ...documents import Document, Unit
from ...errors import (
    IndexUnavailableError,
    InvalidInputError,
)
from ...paper_diversity import word_document_frequencies
from ...query import alias_key, check_limit, search_hits
from ...query import query_terms as backend_query_terms
from ...settings import IndexSettings, reconcile_settings
from ...text import Profile, tokenize
from ..base import Filters, SearchHit, sentence_expansion_units
from ..ingest import (
    PreparedBatch,
    PreparedDocument,
    PreparedUnit,
    new_executor,
    pipelined_ingest,
    token_checksum,
)
from ..scorer import ArrayScorer, Statistics
from . import compaction, deletion, postings
from . import schema as sql
from .filters import NO_FILTER, filter_sql
from .fts import body_expression, or_expression, quote_term
from .postings import BatchPostings, PostingsCounter, SQLitePostings

_COMPOUND_LIMIT = 400
# A document's units beyond this many are cut from its text read once: SQLite's substr()
# reads the whole text for each unit it cuts.
_CUT_IN_SQL_UNITS = 8
_MAX_PARAMETERS = 32_000  # SQLite's smallest default limit on bound parameters is 32,766
# Phrase document frequencies remembered per generation (each costs an FTS5 count).
_PHRASE_DF_CACHE = 100_000
# Tables other parts of this package may create in an index file before the index itself.
COMPANION_TABLES = frozenset({"sqlite_sequence", "embedding_cache", "judgment_cache"})


@dataclass(frozen=True)
class TitleCatalog:
    """Corpus titles as lexical-repair tables: accent aliases and multiword title phrases."""

    aliases: Mapping[str, str]
    phrases: frozenset[str]


class SQLiteIndex:
    """A SAG2 index in one SQLite file: add, delete, upsert, BM25 search, df, title aliases.

    Safe for concurrent readers in several threads and processes (WAL, one connection per
    thread); writes are serialised and each call is one transaction.
    """

    # Postings and body df are counted in the analysis workers, beside the analysis.
    unit_statistics = PostingsCounter()

    def __init__(
        self,
        path: str | os.PathLike[str],
        settings: IndexSettings | None = None,
        *,
        create: bool = True,
    ):
        """Open the index file at ``path``; ``create=False`` refuses to make a new one.

        A missing folder is an error either way (an index is never created somewhere the
        caller did not mean), as is a missing file when ``create`` is False.
        """
        if str(path) in ("", ":memory:") or str(path).startswith("file:"):
            raise InvalidInputError(
                f"SQLiteIndex needs a file path, got {str(path)!r}: an in-memory database "
                "would be private to each thread; use a temporary file instead"
            )
        if settings is not None and not isinstance(settings, IndexSettings):
            raise InvalidInputError(
                f"settings must be an IndexSettings, got {type(settings).__name__}"
            )
        self.path = Path(path)
        _check_location(self.path, create)
        # Files nobody may write (read-only media, permissions) are opened for search only.
        self.read_only = not _writable(self.path)
        self._local = threading.local()
        self._connections: list[tuple[threading.Thread, sqlite3.Connection]] = []
        self._registry_lock = threading.Lock()
        self._closed = False
        self._write_lock = threading.Lock()
        self._executor: Executor | None = None
        self._catalog: tuple[str, TitleCatalog] | None = None
        self._word_df: tuple[str, int, Counter[str]] | None = None
        self._statistics: Statistics | None = None
        self._unit_count: tuple[str, int] | None = None
        self._phrase_df: tuple[str, dict[str, int]] | None = None
        self._scorer = ArrayScorer()
        _probe_fts5()
        try:
            self.settings = self._open(settings, create)
        except BaseException:
            self.close()
            raise

    def __repr__(self) -> str:
        return f"SQLiteIndex({str(self.path)!r}, settings={self.settings!r})"

    def __enter__(self) -> SQLiteIndex:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- connections and settings -------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        """This thread's connection (created on first use), in WAL mode with a busy timeout."""
        connection: sqlite3.Connection | None = getattr(self._local, "connection", None)
        if self._closed:
            # A read still inside snapshot() closes its connection after its COMMIT.
            if connection is not None and not connection.in_transaction:
                connection.close()
                self._local.connection = None
            raise IndexUnavailableError(f"index {str(self.path)!r} is closed; open it again")
        if connection is None:
            connection = connect(self.path, read_only=self.read_only)
            connection.execute("PRAGMA foreign_keys = ON")
            connection.execute(sql.WAL_CHECKPOINT_SQL)
            self._local.connection = connection
            with self._registry_lock:
                self._close_finished_threads()
                self._connections.append((threading.current_thread(), connection))
        return connection

    def _close_finished_threads(self) -> None:
        """Close the connections of threads that have ended (call with the registry lock)."""
        alive = []
        for thread, connection in self._connections:
            if thread.is_alive():
                alive.append((thread, connection))
            else:
                connection.close()
        self._connections = alive

    def _open(self, requested: IndexSettings | None, create: bool) -> IndexSettings:
        """Create the schema or check the stored settings against the requested ones."""
        if self.read_only and not self.path.is_file():
            raise IndexUnavailableError(
                f"cannot create index {str(self.path)!r}: its directory is read-only; "
                "choose a writable path"
            )
        try:
            connection = self._connection()
            with self._write_lock:
                return self._open_in(connection, requested, create)
        except sqlite3.DatabaseError as error:
            raise_if_busy(error, self.path)
            raise IndexUnavailableError(
                f"{str(self.path)!r} is not a SAG2 index or cannot be opened ({error}); "
                "choose another path"
            ) from error

    def _open_in(
        self, connection: sqlite3.Connection, requested: IndexSettings | None, create: bool
    ) -> IndexSettings:
        """Check the stored settings, read in a read transaction (so a writer elsewhere does
        not block opening); a new file gets its tables and settings in a write transaction."""
        connection.execute("BEGIN")
        try:
            stored = _read_meta(self.path, connection)
        finally:
            connection.execute("COMMIT")
        if not stored:
            return self._create_in(connection, requested, create)
        return self._checked(stored, requested, create)

    def _create_in(
        self, connection: sqlite3.Connection, requested: IndexSettings | None, create: bool
    ) -> IndexSettings:
        """Write a new file's tables and settings in one transaction (unless another
        process has just done so: then check those)."""
        connection.execute("BEGIN IMMEDIATE")
        try:
            stored = _read_meta(self.path, connection)
            settings = self._checked(stored, requested, create)
            if not stored:
                _create_tables(connection, settings)
                connection.executemany(sql.PUT_META_SQL, settings.as_meta().items())
            connection.execute("COMMIT")
        except BaseException:
            # A failed BEGIN or COMMIT may leave no transaction; the first error is the news.
            if connection.in_transaction:
                connection.execute("ROLLBACK")
            raise
        return settings

    def _checked(
        self, stored: dict[str, str], requested: IndexSettings | None, create: bool
    ) -> IndexSettings:
        """The settings to use: the stored ones, checked against those requested."""
        if not stored and not create:
            raise IndexUnavailableError(
                f"{str(self.path)!r} holds no SAG2 index; build it first "
                "(open it with create=True, or run `sag2 index`)"
            )
        return reconcile_settings(f"index {str(self.path)!r}", stored, requested)

    def close(self) -> None:
        """Close the index: this thread's connection and those of finished threads now;
        any other thread's on its next use (which then raises). Idempotent."""
        current = threading.current_thread()
        with self._registry_lock:
            self._closed = True
            self._close_finished_threads()
            still_open = []
            for thread, connection in self._connections:
                if thread is current:
                    connection.close()
                else:
                    still_open.append((thread, connection))
            self._connections = still_open
            self._local.connection = None
        if self._executor is not None:
            self._executor.shutdown()
            self._executor = None

    # -- writing -------------------------------------------------------------------------

    def add_documents(self, documents: Iterable[Document], *, parallel: bool = True) -> int:
        """Insert or replace (by id) documents in one transaction; returns units written.

        The whole batch is validated and analysed before anything is written, so a rejected
        batch leaves the index unchanged.
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

        The next batch is analysed in worker processes while the current one is written, so
        both cores stay busy on large ingests. An interruption keeps every committed batch;
        ``on_batch`` receives each committed batch's document count.
        """
        executor = self._analysis_executor() if parallel else None
        return pipelined_ingest(
            batches, self.upsert_analysed, self.settings, self.unit_statistics, executor, on_batch
        )

    def upsert_analysed(
        self, documents: Sequence[Document], analysed: PreparedBatch[BatchPostings]
    ) -> int:
        """Replace (by id) documents with their analysed units in one transaction; units written."""
        transaction = self._transaction()
        ids = [doc.id for doc in documents]
        replaced = self._analyse_deleted(ids)
        with transaction as connection:
            self._delete_ids(connection, ids, replaced)
            connection.executemany(sql.ADD_DF_SQL, analysed.statistics.body_df_rows())
            unit_ids = _insert_documents(connection, documents, analysed.documents)
            postings.write_segment(connection, analysed.statistics.postings, unit_ids)
            compaction.compact(connection)
            return len(unit_ids)

    def delete(self, doc_ids: Iterable[str]) -> int:
        """Delete documents and their units by id, in one transaction; returns documents removed."""
        ids = list(dict.fromkeys(_id_collection(doc_ids, "doc_ids")))
        for doc_id in ids:
            if not isinstance(doc_id, str):
                raise InvalidInputError(f"document ids must be strings, got {doc_id!r}")
        if not ids:
            return 0
        transaction = self._transaction()
        deleted = self._analyse_deleted(ids)
        with transaction as connection:
            return self._delete_ids(connection, ids, deleted)

    def optimize(self) -> None:
        """Merge FTS5's segments and the postings segments (dropping deleted units' postings);
        worthwhile after many small writes or deletes."""
        with self._transaction() as connection:
            connection.execute("INSERT INTO units_fts(units_fts) VALUES ('optimize')")
            compaction.optimize(connection)

    def _analysis_executor(self) -> Executor:
        """The process pool used for analysis, created on first large batch."""
        if self._executor is None:
            self._executor = new_executor()
        return self._executor

    def _transaction(self) -> _Transaction:
        """A write transaction (BEGIN IMMEDIATE) that bumps the index generation on commit."""
        if self.read_only:
            raise IndexUnavailableError(
                f"index {str(self.path)!r} is read-only (the file or its directory cannot be "
                "written); it can be searched but not changed"
            )
        return _Transaction(self._connection(), self._write_lock, self.path)

    def _analyse_deleted(self, doc_ids: list[str]) -> deletion.DeletedUnits:
        """The stored units of documents about to be deleted, re-analysed before the write
        transaction, so other writers wait only for the writing."""
        with self.snapshot():
            connection = self._connection()
            return deletion.analyse_deleted(
                connection, self.path, doc_ids, self.settings.analyzer_profile
            )

    def _delete_ids(
        self, connection: sqlite3.Connection, doc_ids: list[str], deleted: deletion.DeletedUnits
    ) -> int:
        """Remove the given documents' FTS rows, postings, df, units and document rows.

        ``deleted`` was analysed before the transaction; if another writer changed these
        documents since, they are analysed again here.
        """
        if not deletion.still_current(connection, doc_ids, deleted):
            profile = self.settings.analyzer_profile
            deleted = deletion.analyse_deleted(connection, self.path, doc_ids, profile)
        ids_json = json_list(doc_ids, "document id")
        # New documents have no units: their batch skips the df table scan and the deletes.
        if deleted.rows:
            _forget_units(connection, deleted)
            connection.execute(sql.DELETE_UNITS_SQL, (ids_json,))
        return connection.execute(sql.DELETE_DOCS_SQL, (ids_json,)).rowcount

    # -- reading ---------------------------------------------------------------------------

    def unit_count(self) -> int:
        """N: the number of indexed units (counted once per generation)."""
        with self.snapshot():
            generation = self._generation()
            # Each shared cache is read once: another thread may replace it at any moment.
            cached = self._unit_count
            if cached is None or cached[0] != generation:
                count = int(self._connection().execute(sql.UNIT_COUNT_SQL).fetchone()[0])
                cached = self._unit_count = (generation, count)
            return cached[1]

    def document_count(self) -> int:
        """The number of stored source documents."""
        return int(self._connection().execute(sql.DOC_COUNT_SQL).fetchone()[0])

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
        return backend_query_terms(self, question, max_tokens)

    def rank_expression(
        self, terms: Sequence[str], limit: int, *, filters: Filters | None = None
    ) -> list[tuple[int, float]]:
        """Top ``limit`` (unit id, BM25 of the OR of the distinct terms), best first, ties by id."""
        check_limit(limit)
        conditions, values = filter_sql(filters)
        expression = or_expression(terms)
        if not expression or limit == 0:
            return []
        if conditions == NO_FILTER:
            with self.snapshot():
                source = SQLitePostings(self._connection())
                return self._scorer.search(source, self._stats(), terms, limit)
        statement = sql.SEARCH_FILTERED_SQL.format(conditions=conditions)
        params = (expression, *values, limit)
        rows = self._connection().execute(statement, params)
        return [(int(rowid), float(score)) for rowid, score in rows]

    def score_units(self, terms: Sequence[str], unit_ids: Collection[int]) -> dict[int, float]:
        """BM25 of the OR of the distinct terms for the given units; units matching no term
        are absent (FTS5's statistics cover the whole table, as in `rank_expression`)."""
        phrases = [term for term in dict.fromkeys(terms) if term]
        if not phrases or not unit_ids:
            return {}
        with self.snapshot():
            source = SQLitePostings(self._connection())
            return self._scorer.score_units(source, self._stats(), phrases, unit_ids)

    def _stats(self) -> Statistics:
        """N, avgdl and every unit's |D| at this generation (read once per generation).

        FTS5's token total is the sum of the live units' |D|, so avgdl needs no other read.
        """
        generation = self._generation()
        stats = self._statistics
        if stats is None or stats.generation != generation:
            ids, lengths = postings.unit_lengths(self._connection())
            stats = Statistics.of_units(generation, self.unit_count(), ids, lengths)
            self._statistics = stats
        return stats

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
        ties by unit id.

        Without filters the postings arrays rank them (`ArrayScorer.expand`). With filters,
        one statement per 400 terms (fewer for wide filters) finds the members, scores the
        whole OR expression on them only, and ranks them in SQLite, so only the top ``limit``
        of each comes back.
        """
        check_limit(limit)
        terms = list(dict.fromkeys(required_terms))
        ranked: dict[str, list[int]] = {term: [] for term in terms}
        scoring_terms = [term for term in scoring_terms if term]
        if not terms or not scoring_terms or limit == 0:
            return ranked
        connection = self._connection()
        conditions, values = filter_sql(filters)
        if conditions == NO_FILTER:
            with self.snapshot():
                return self._scorer.expand(
                    SQLitePostings(connection), self._stats(), terms, scoring_terms, exclude, limit
                )
        statement = sql.MEMBERS_FILTERED_SQL.format(conditions=conditions)
        scoring = " OR ".join(quote_term(term) for term in scoring_terms)
        excluded = json_list(sorted(exclude), "excluded unit ids")
        # Each term's part binds the filter's values again: bound the parameters per statement.
        step = max(1, min(_COMPOUND_LIMIT, _MAX_PARAMETERS // (len(values) + 3)))
        with self.snapshot():
            for start in range(0, len(terms), step):
                chunk = terms[start : start + step]
                members = " UNION ALL ".join([statement] * len(chunk))
                compound = "".join([sql.EXPAND_HEAD_SQL, members, sql.EXPAND_TAIL_SQL])
                params = [
                    value
                    for position, term in enumerate(chunk)
                    for value in (position, quote_term(term), *values, excluded)
                ]
                for position, unit_id in connection.execute(compound, (*params, scoring, limit)):
                    ranked[chunk[position]].append(int(unit_id))
        return ranked

    def term_members(self, terms: Sequence[str]) -> dict[str, list[int]]:
        """For each term, the ids of units matching it in any field (one round trip per 400)."""
        members: dict[str, list[int]] = {term: [] for term in terms}
        pairs = [(term, quote_term(term)) for term in members]
        for term, rowid in self._compound(sql.MATCH_ROWIDS_SQL, pairs):
            members[term].append(int(rowid))
        return members

    def document_frequencies(self, terms: Iterable[str]) -> dict[str, int]:
        """Body-level df: tokens from the df table kept at ingest, phrases by an FTS5 match."""
        unique = list(dict.fromkeys(terms))
        tokens = [t for t in unique if " " not in t]
        df = dict.fromkeys(unique, 0)
        with self.snapshot():
            stored = self._connection().execute(sql.TOKEN_DF_SQL, (json_list(tokens, "term"),))
            df.update(stored.fetchall())
            df.update(self._phrase_frequencies([t for t in unique if " " in t]))
        return {term: int(count) for term, count in df.items()}

    def _phrase_frequencies(self, phrases: Sequence[str]) -> dict[str, int]:
        """Body df of multiword phrases, each counted by FTS5 once per generation."""
        generation = self._generation()
        cached = self._phrase_df
        if cached is None or cached[0] != generation or len(cached[1]) > _PHRASE_DF_CACHE:
            cached = self._phrase_df = (generation, {})
        known = cached[1]
        missing = [(t, body_expression(t)) for t in phrases if t not in known]
        known.update((t, int(n)) for t, n in self._compound(sql.MATCH_COUNT_SQL, missing))
        return {t: known[t] for t in phrases}

    def _compound(
        self, statement: str, parameters: Sequence[Sequence[Any]]
    ) -> list[tuple[Any, ...]]:
        """Run one SELECT for many parameter tuples as UNION ALL statements of up to 400 parts
        (one round trip instead of hundreds)."""
        rows: list[tuple[Any, ...]] = []
        connection = self._connection()
        for start in range(0, len(parameters), _COMPOUND_LIMIT):
            chunk = parameters[start : start + _COMPOUND_LIMIT]
            compound = " UNION ALL ".join([statement] * len(chunk))
            params = [value for part in chunk for value in part]
            rows.extend(connection.execute(compound, params).fetchall())
        return rows

    def units(self, unit_ids: Iterable[int]) -> dict[int, Unit]:
        """The units with the given ids, keyed by id (missing ids are absent)."""
        return self._unit_rows(_id_collection(unit_ids, "unit_ids"))

    def document_units(self, doc_ids: Iterable[str]) -> dict[int, Unit]:
        """Every unit of the given documents, keyed by unit id (unknown ids have none)."""
        ids = json_list(_id_collection(doc_ids, "doc_ids"), "document id")
        with self.snapshot():
            rows = self._connection().execute(sql.UNIT_IDS_OF_DOCS_SQL, (ids,)).fetchall()
            return self._unit_rows(row[0] for row in rows)

    def expansion_units(self, unit_ids: Iterable[int]) -> dict[int, list[list[str]]]:
        """Per unit, its sentences' expansion units (names as phrases, then tokens), analysed
        from its text (missing ids are absent)."""
        return sentence_expansion_units(self.units(unit_ids), self.settings.analyzer_profile)

    def _unit_rows(self, unit_ids: Iterable[int]) -> dict[int, Unit]:
        """Fetch units (one snapshot): SQLite cuts the text of a document's few units, and
        a document with many is read once and cut here."""
        with self.snapshot():
            connection = self._connection()
            rows = connection.execute(sql.UNITS_SQL, (json_list(unit_ids, "unit id"),)).fetchall()
            per_document = Counter(row[1] for row in rows)
            few = [row[0] for row in rows if per_document[row[1]] <= _CUT_IN_SQL_UNITS]
            pieces = dict(connection.execute(sql.UNIT_TEXTS_SQL, (json_list(few, "unit id"),)))
            many = [doc for doc, count in per_document.items() if count > _CUT_IN_SQL_UNITS]
            texts = dict(
                connection.execute(sql.DOCUMENT_TEXTS_SQL, (json_list(many, "document id"),))
            )
        return {
            int(unit_id): Unit(
                int(unit_id),
                doc_id,
                title,
                heading,
                pieces[unit_id] if unit_id in pieces else texts[doc_id][start:end],
                start,
                end,
            )
            for unit_id, doc_id, title, heading, start, end in rows
        }

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """Run this thread's reads inside one read transaction, so they see one state."""
        connection = self._connection()
        if connection.in_transaction:
            yield
            return
        connection.execute("BEGIN")
        try:
            yield
        finally:
            connection.execute("COMMIT")
            if self._closed:
                connection.close()
                self._local.connection = None

    def allowed_units(self, filters: Filters) -> set[int]:
        """Ids of the units whose document metadata satisfies every filter (evaluated in SQLite)."""
        conditions, values = filter_sql(filters)
        statement = sql.FILTERED_UNIT_IDS_SQL.format(conditions=conditions)
        return {int(row[0]) for row in self._connection().execute(statement, values)}

    def document(self, doc_id: str) -> Document | None:
        """The stored source document with this id, or None."""
        if not isinstance(doc_id, str):
            raise InvalidInputError(f"doc_id must be a string, got {type(doc_id).__name__}")
        row = self._connection().execute(sql.DOCUMENT_SQL, (doc_id,)).fetchone()
        if row is None:
            return None
        return Document(row[0], row[1], row[2], json.loads(row[3]))

    def metadata(self, doc_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        """The stored metadata of the given documents, keyed by id."""
        ids = list(_id_collection(doc_ids, "doc_ids"))
        rows = self._connection().execute(sql.METADATA_SQL, (json_list(ids, "document id"),))
        return {doc_id: json.loads(metadata) for doc_id, metadata in rows}

    # -- lexical repair --------------------------------------------------------------------

    def document_frequencies_any(self, terms: Iterable[str]) -> dict[str, int]:
        """Number of units matching each term in any field (used for "matches nothing")."""
        unique = list(dict.fromkeys(terms))
        counts = self._compound(sql.MATCH_COUNT_SQL, [(t, quote_term(t)) for t in unique])
        result = {term: 0 for term in unique}
        result.update({term: int(count) for term, count in counts})
        return result

    def title_aliases(self, folded: Collection[str]) -> dict[str, str]:
        """For each accent-folded title key that is one title's alias, that title's phrase."""
        aliases = self._title_catalog().aliases
        return {key: aliases[key] for key in folded if key in aliases}

    def title_phrases(self, phrases: Collection[str]) -> set[str]:
        """The given phrases that are multiword corpus titles."""
        return set(phrases) & self._title_catalog().phrases

    def word_document_frequencies(self, words: Collection[str]) -> tuple[int, dict[str, int]]:
        """The number of documents and each word's document frequency over their texts
        (counted once per generation, on first use: only the "paper" profile asks)."""
        generation = self._generation()
        cached = self._word_df
        if cached is None or cached[0] != generation:
            with self.snapshot():
                rows = self._connection().execute(sql.ALL_DOCUMENT_TEXTS_SQL).fetchall()
            cached = (generation, len(rows), word_document_frequencies(row[0] for row in rows))
            self._word_df = cached
        return cached[1], {word: cached[2].get(word, 0) for word in words}

    def _title_catalog(self) -> TitleCatalog:
        """Accent aliases and title phrases of the corpus, rebuilt only after a write."""
        generation = self._generation()
        catalog = self._catalog
        if catalog is None or catalog[0] != generation:
            titles = [row[0] for row in self._connection().execute(sql.TITLES_SQL)]
            catalog = (generation, _build_catalog(titles, self.settings.analyzer_profile))
            self._catalog = catalog
        return catalog[1]

    def _generation(self) -> str:
        """A counter in meta that every committed write increments."""
        row = self._connection().execute(sql.GENERATION_SQL).fetchone()
        return "0" if row is None else str(row[0])

    def stats(self) -> dict[str, int]:
        """Sizes for reports: documents, units, and the file's bytes (with its WAL)."""
        wal = Path(str(self.path) + "-wal")
        size = self.path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)
        return {"documents": self.document_count(), "units": self.unit_count(), "bytes": size}


class _Transaction:
    """Context manager for one serialised write transaction on a connection.

    A full disk (SQLITE_FULL) anywhere in the transaction, its COMMIT included, rolls it back
    and becomes an IndexFullError naming the file: the index stays as it was.
    """

    def __init__(self, connection: sqlite3.Connection, lock: threading.Lock, path: Path):
        self.connection, self.lock, self.path = connection, lock, path

    def __enter__(self) -> sqlite3.Connection:
        self.lock.acquire()
        try:
            self.connection.execute("BEGIN IMMEDIATE")
        except BaseException as error:
            self.lock.release()
            if isinstance(error, sqlite3.OperationalError):
                raise_if_busy(error, self.path)
            raise
        return self.connection

    def __exit__(self, exc_type: object, error: BaseException | None, *rest: object) -> None:
        try:
            if error is None:
                try:
                    self.connection.execute(sql.BUMP_GENERATION_SQL)
                    self.connection.execute("COMMIT")
                except sqlite3.OperationalError as failure:
                    self._roll_back()
                    raise_if_full(failure, self.path)
                    raise
            else:
                self._roll_back()
                if isinstance(error, sqlite3.OperationalError):
                    raise_if_full(error, self.path)
        finally:
            self.lock.release()

    def _roll_back(self) -> None:
        """Roll back, unless SQLite already did (it may, after SQLITE_FULL)."""
        if self.connection.in_transaction:
            self.connection.execute("ROLLBACK")


def remove_index_files(path: str | os.PathLike[str]) -> None:
    """Delete an index file and its WAL companions (after a failed first ingest, say)."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{os.fspath(path)}{suffix}").unlink(missing_ok=True)


def _probe_fts5() -> None:
    """Fail early, with a clear message, when this Python's SQLite lacks FTS5."""
    try:
        probe = sqlite3.connect(":memory:")
        probe.execute("CREATE VIRTUAL TABLE probe USING fts5(body)")
        probe.close()
    except sqlite3.OperationalError as error:
        raise IndexUnavailableError(
            f"this Python's SQLite {sqlite3.sqlite_version} has no FTS5 ({error}); "
            "install a Python built with FTS5 (the official python.org builds have it)"
        ) from error


def _check_location(path: Path, create: bool) -> None:
    """Refuse a path whose folder is missing, or a missing file the caller needs to exist."""
    if path.is_file():
        return
    if not create:
        raise IndexUnavailableError(
            f"no index file at {str(path)!r}; check the path, or build the index first "
            "(open it with create=True, or run `sag2 index`)"
        )
    folder = path.parent
    if not folder.is_dir():
        problem = "is not a folder" if folder.exists() else "does not exist"
        raise IndexUnavailableError(
            f"cannot create the index file {str(path)!r}: the folder {str(folder)!r} "
            f"{problem}; create it first or choose another path"
        )


def _read_meta(path: Path, connection: sqlite3.Connection) -> dict[str, str]:
    """The meta table as a dict; empty for a new file; an error for a non-SAG2 database."""
    try:
        tables = {row[0] for row in connection.execute(sql.TABLE_NAMES_SQL)}
    except sqlite3.DatabaseError as error:
        raise IndexUnavailableError(
            f"{str(path)!r} is not a SAG2 index ({error}); choose another path"
        ) from error
    if "meta" not in tables:
        if tables - COMPANION_TABLES:
            raise IndexUnavailableError("the file holds a database that is not a SAG2 index")
        return {}
    return dict(connection.execute(sql.GET_META_SQL).fetchall())


def _create_tables(connection: sqlite3.Connection, settings: IndexSettings) -> None:
    """Create a new file's tables; units_fts gets the analyzer profile's FTS5 tokenizer."""
    for statement in sql.BASE_TABLES:
        connection.execute(statement)
    for statement in postings.TABLES:
        connection.execute(statement)
    if settings.analyzer_profile == "paper":
        connection.execute(sql.PAPER_FTS_TABLE_SQL)
    else:
        connection.execute(sql.SAG2_FTS_TABLE_SQL)
    connection.execute(sql.FTS_AUTOMERGE_SQL)


def _writable(path: Path) -> bool:
    """Whether the index file (or, for a new one, its directory) and the directory, where
    SQLite keeps the WAL and shared-memory files, may be written."""
    directory = path.parent
    return os.access(directory, os.W_OK) and (not path.exists() or os.access(path, os.W_OK))


def _id_collection(ids: Iterable[Any], name: str) -> Iterable[Any]:
    """Refuse a bare string or bytes where a collection of ids is expected."""
    if isinstance(ids, (str, bytes)):
        raise InvalidInputError(
            f"{name} must be a collection of ids, not a single {type(ids).__name__}"
        )
    return ids


def _insert_documents(
    connection: sqlite3.Connection,
    documents: Sequence[Document],
    prepared: Sequence[PreparedDocument],
) -> list[int]:
    """Write prepared documents and their units (three statements in all); returns the
    units' new ids in order.

    Ids continue the AUTOINCREMENT sequence one by one, as SQLite would give them, so the
    FTS5 rows and postings can be written with them in bulk.
    """
    connection.executemany(
        sql.INSERT_DOCUMENT_SQL,
        ((doc.id, doc.title, doc.text, doc.metadata_json) for doc in documents),
    )
    rows = [
        (document.id, unit)
        for document, item in zip(documents, prepared, strict=True)
        for unit in item.units
    ]
    first = int(connection.execute(sql.LAST_UNIT_ID_SQL).fetchone()[0]) + 1
    unit_ids = list(range(first, first + len(rows)))
    connection.executemany(
        sql.INSERT_UNIT_SQL,
        (
            (unit_id, doc_id, unit.heading, unit.char_start, unit.char_end, _checksum(unit))
            for unit_id, (doc_id, unit) in zip(unit_ids, rows, strict=True)
        ),
    )
    connection.executemany(
        sql.INSERT_FTS_SQL,
        (
            (unit_id, unit.title_tokens, unit.heading_tokens, unit.body_tokens)
            for unit_id, (_, unit) in zip(unit_ids, rows, strict=True)
        ),
    )
    return unit_ids


def _forget_units(connection: sqlite3.Connection, deleted: deletion.DeletedUnits) -> None:
    """Take deleted units out of the body df, the postings and FTS5."""
    body_df: Counter[str] = Counter()
    for _, _, _, body in deleted.rows:
        body_df.update(set(body.split()))
    connection.executemany(sql.SUBTRACT_DF_SQL, ((n, t) for t, n in body_df.items()))
    connection.execute(sql.PRUNE_DF_SQL)
    postings.mark_deleted(connection, deleted.unit_ids)
    connection.executemany(sql.DELETE_FTS_SQL, deleted.rows)


def _checksum(unit: PreparedUnit) -> int:
    """The checksum of a prepared unit's token texts."""
    return token_checksum(unit.title_tokens, unit.heading_tokens, unit.body_tokens)


def _build_catalog(titles: Sequence[str], profile: Profile) -> TitleCatalog:
    """Aliases from unique accent-folded titles, and the set of multiword title phrases."""
    folded: dict[str, list[str]] = {}
    phrases: set[str] = set()
    for title in titles:
        tokens = tokenize(title, profile=profile)
        phrase = " ".join(tokens)
        if len(tokens) >= 2:
            phrases.add(phrase)
        alias = alias_key(title, profile)
        if alias and alias != phrase:
            folded.setdefault(alias, []).append(phrase)
    aliases = {alias: options[0] for alias, options in folded.items() if len(set(options)) == 1}
    return TitleCatalog(aliases, frozenset(phrases))
