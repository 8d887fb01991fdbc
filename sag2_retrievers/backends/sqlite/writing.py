"""Writing a SQLite index: analysed batches in, replaced documents out, one transaction each."""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Executor
from contextlib import contextmanager

from ..._sqlite import json_list
from ...documents import Document
from ...errors import (
    InvalidInputError,
)
from ..ingest import (
    PreparedBatch,
    PreparedDocument,
    PreparedUnit,
    new_executor,
    pipelined_ingest,
    token_checksum,
)
from . import compaction, deletion, postings
from . import schema as sql
from .postings import BatchPostings, PostingsCounter
from .transactions import SQLiteConnections, id_collection


class SQLiteWriting(SQLiteConnections):
    """Add, upsert and delete documents: FTS5 rows, units, postings segments and body df."""

    # Postings and body df are counted in the analysis workers, beside the analysis.
    unit_statistics = PostingsCounter()

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
        with _ingest_cache(self._connection()):
            return pipelined_ingest(
                batches,
                self.upsert_analysed,
                self.settings,
                self.unit_statistics,
                executor,
                on_batch,
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
        ids = list(dict.fromkeys(id_collection(doc_ids, "doc_ids")))
        for doc_id in ids:
            if not isinstance(doc_id, str):
                raise InvalidInputError(f"document ids must be strings, got {doc_id!r}")
        if not ids:
            return 0
        transaction = self._transaction()
        deleted = self._analyse_deleted(ids)
        with transaction as connection:
            return self._delete_ids(connection, ids, deleted)

    def _analysis_executor(self) -> Executor:
        """The process pool used for analysis, created on first large batch."""
        if self._executor is None:
            self._executor = new_executor()
        return self._executor

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


@contextmanager
def _ingest_cache(connection: sqlite3.Connection) -> Iterator[None]:
    """A larger page cache on this connection while an ingest writes through it."""
    connection.execute(sql.INGEST_CACHE_SQL)
    try:
        yield
    finally:
        connection.execute(sql.DEFAULT_CACHE_SQL)


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
