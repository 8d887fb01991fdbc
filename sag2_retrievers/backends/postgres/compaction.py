"""Merging PostgreSQL's posting segments, so many small writes keep reads to few blocks.

Each write transaction adds a segment (blocks.py). Past ``MAX_SEGMENTS`` the smallest
``FAN_IN`` are merged into one, dropping deleted units' postings, inside the same write
transaction, as SQLite's compaction does; ``PostgresIndex.optimize`` merges towards one
segment, but never more than ``MAX_MERGED_UNITS`` units at once, so its memory does not grow
with the index either.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..merging import segments_to_merge
from . import schema as pg
from .blocks import FAN_IN, MAX_SEGMENTS, Postings, live_units, merged, read_segment
from .blocks import write_segment as copy_segment

# A merge during ingest holds at most this many units (their postings and word positions)
# in the writer's memory: 8 batches of `sag2 index`'s default 2,000 documents.
MAX_INGEST_MERGE_UNITS = 16_000
# optimize() never merges more units than this at once (these segments carry every word
# position: a merge of 50,000 units peaked at 609 MiB, benchmarks/faults_scale/pg_optimize.py).
MAX_MERGED_UNITS = 32_000


def write_segment(cursor: Any, schema: str, postings: Postings, units: Any) -> None:
    """COPY ``postings`` as a new segment of ``units`` (ids and |D|) under a fresh id."""
    cursor.execute(pg.NEXT_SEGMENT, (schema,))
    segment = int(cursor.fetchone()[0])
    copy_segment(
        cursor,
        (pg.compose(pg.COPY_SEGMENT, schema), pg.compose(pg.COPY_BLOCKS, schema)),
        segment,
        postings,
        units,
    )


def compact(cursor: Any, schema: str) -> None:
    """After a write: merge the smallest segments while there are too many."""
    chosen = segments_to_merge(_sizes(cursor, schema), MAX_SEGMENTS, FAN_IN, MAX_INGEST_MERGE_UNITS)
    merge(cursor, schema, chosen)


def optimize(cursor: Any, schema: str) -> None:
    """Merge the smallest segments, at most ``MAX_MERGED_UNITS`` units at a time, until one
    remains or no two fit together; then rewrite each segment within that bound that still
    holds deleted units."""
    while chosen := segments_to_merge(_sizes(cursor, schema), 1, FAN_IN, MAX_MERGED_UNITS):
        merge(cursor, schema, chosen)
    for segment, units in _sizes(cursor, schema):
        if units <= MAX_MERGED_UNITS and _holds_deleted(cursor, schema, segment):
            merge(cursor, schema, [segment])


def _sizes(cursor: Any, schema: str) -> list[tuple[int, int]]:
    """(segment, units) of every segment, smallest first."""
    cursor.execute(pg.compose(pg.SEGMENT_SIZES, schema))
    return [(int(segment), int(units)) for segment, units in cursor.fetchall()]


def _holds_deleted(cursor: Any, schema: str, segment: int) -> bool:
    """Whether the segment still lists a deleted unit (|D| = 0)."""
    cursor.execute(pg.compose(pg.CHOSEN_SEGMENTS, schema), ([segment],))
    return not read_segment(cursor.fetchone()).lengths.all()


def merge(cursor: Any, schema: str, chosen: Sequence[int]) -> None:
    """Replace the ``chosen`` segments by one holding their live postings."""
    if not chosen:
        return
    cursor.execute(pg.compose(pg.CHOSEN_SEGMENTS, schema), (list(chosen),))
    segments = [read_segment(row) for row in cursor.fetchall()]

    def rows_of(segment: int) -> list[Any]:
        """One segment's block rows."""
        cursor.execute(pg.compose(pg.SEGMENT_BLOCKS, schema), ([segment],))
        return list(cursor.fetchall())

    postings = merged(segments, rows_of)
    cursor.execute(pg.compose(pg.DROP_BLOCKS, schema), (list(chosen),))
    cursor.execute(pg.compose(pg.DROP_SEGMENTS, schema), (list(chosen),))
    write_segment(cursor, schema, postings, live_units(segments))
