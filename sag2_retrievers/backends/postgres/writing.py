"""Writing a PostgreSQL index: analysed batches by COPY, one transaction per batch."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Executor
from typing import Any

import numpy as np

from ...analysis import tokenize
from ...documents import Document
from ...query import alias_key
from ..ingest import PreparedBatch, PreparedUnit, new_executor, pipelined_ingest
from . import compaction
from . import schema as pg
from .blocks import deleted, from_units, read_segment
from .postings import BatchFrequencies, DocumentFrequencies
from .transactions import PostgresConnections, string_ids


class PostgresWriting(PostgresConnections):
    """Add, upsert and delete documents: rows by COPY, posting segments, df and totals."""

    # Document frequencies and token totals are counted in the analysis workers.
    unit_statistics = DocumentFrequencies()

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
        ids = list(dict.fromkeys(string_ids(doc_ids)))
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


def _unit_rows(
    documents: Sequence[Document], prepared: Sequence[Any]
) -> list[tuple[str, PreparedUnit]]:
    """(document id, prepared unit) for every unit of the batch, in order."""
    return [
        (document.id, unit)
        for document, item in zip(documents, prepared, strict=True)
        for unit in item.units
    ]
