"""Merging PostgreSQL's posting segments, so many small writes keep reads to few blocks.

Each write transaction adds a segment (blocks.py). Past ``MAX_SEGMENTS`` the smallest
``FAN_IN`` are merged into one, dropping deleted units' postings, inside the same write
transaction, as SQLite's compaction does; ``PostgresIndex.optimize`` merges them all.
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
    cursor.execute(pg.compose(pg.SEGMENT_SIZES, schema))
    sizes = [(int(segment), int(units)) for segment, units in cursor.fetchall()]
    chosen = segments_to_merge(sizes, MAX_SEGMENTS, FAN_IN, MAX_INGEST_MERGE_UNITS)
    merge(cursor, schema, chosen)


def optimize(cursor: Any, schema: str) -> None:
    """Merge every segment into one (deleted units' postings dropped)."""
    cursor.execute(pg.compose(pg.SEGMENT_SIZES, schema))
    merge(cursor, schema, [int(row[0]) for row in cursor.fetchall()])


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
