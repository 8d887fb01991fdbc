"""Merging postings segments, so many small writes do not leave reads one seek per write.

Each write transaction adds a segment (postings.py). Past ``MAX_SEGMENTS`` the smallest
``FAN_IN`` are merged into one, dropping deleted units; ``SQLiteIndex.optimize`` merges
until ``FAN_IN`` remain. Small segments are merged most often, so a posting is rewritten
about log_FAN_IN(N / batch) times over an index's life.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..merging import segments_to_merge
from .postings import (
    BUCKETS,
    TERM_SEPARATOR,
    Ints,
    UnitPostings,
    bucket_array,
    decoded,
    runs_summed,
    write_segment,
)

MAX_SEGMENTS = 128
FAN_IN = 8
# optimize() stops before a merge would hold more units than this in memory at once.
MAX_MERGED_UNITS = 200_000
# A merge during ingest holds at most this many units, so the writer's memory does not grow
# with the index.
MAX_INGEST_MERGE_UNITS = 64_000

_SIZES_SQL = """
    SELECT segment, length(units) / 8 FROM segments ORDER BY length(units), segment"""
_SEGMENT_SQL = """
    SELECT min_unit, gap_bytes, freq_bytes, units, lengths FROM segments WHERE segment = ?"""
_LENGTHS_SQL = "SELECT segment, lengths FROM segments"
_ROWS_SQL = "SELECT terms, counts, gaps, freqs FROM postings WHERE key >= ? AND key < ?"
_DROP_ROWS_SQL = "DELETE FROM postings WHERE key >= ? AND key < ?"
_DROP_SEGMENT_SQL = "DELETE FROM segments WHERE segment = ?"


def compact(connection: sqlite3.Connection) -> None:
    """After a write: merge the smallest segments while there are too many."""
    sizes = connection.execute(_SIZES_SQL).fetchall()
    chosen = segments_to_merge(sizes, MAX_SEGMENTS, FAN_IN, MAX_INGEST_MERGE_UNITS)
    if chosen:
        merge(connection, chosen)


def optimize(connection: sqlite3.Connection) -> None:
    """Merge the smallest segments until ``FAN_IN`` remain or a merge would be too big,
    then rewrite each remaining segment that still holds deleted units."""
    while True:
        sizes = connection.execute(_SIZES_SQL).fetchall()
        chosen = sizes[:FAN_IN]
        if len(sizes) <= FAN_IN or sum(size for _, size in chosen) > MAX_MERGED_UNITS:
            break
        merge(connection, [segment for segment, _ in chosen])
    for segment, lengths in connection.execute(_LENGTHS_SQL).fetchall():
        table = np.frombuffer(lengths, dtype="<u4")
        if len(table) <= MAX_MERGED_UNITS and not table.all():
            merge(connection, [segment])


def merge(connection: sqlite3.Connection, segments: list[int]) -> None:
    """Replace the given segments by one holding their live units' postings."""
    parts = [_read_segment(connection, segment) for segment in segments]
    for segment in segments:
        start = segment * BUCKETS
        connection.execute(_DROP_ROWS_SQL, (start, start + BUCKETS))
        connection.execute(_DROP_SEGMENT_SQL, (segment,))
    ids = np.concatenate([part.ids[part.lengths > 0] for part in parts])
    lengths = np.concatenate([part.lengths[part.lengths > 0] for part in parts])
    order = np.argsort(ids)
    merged_ids, lengths = ids[order], lengths[order]
    postings = _live_postings(parts, merged_ids, lengths)
    write_segment(connection, postings, merged_ids.tolist())


@dataclass(frozen=True)
class _Segment:
    """One segment decoded: each term occurrence's name and posting count, then every
    posting's unit id and F in that order, and the segment's units with their |D|."""

    names: list[str]
    counts: Ints
    units: Ints
    freqs: Ints
    ids: Ints
    lengths: Ints


def _read_segment(connection: sqlite3.Connection, segment: int) -> _Segment:
    """Every term occurrence of one segment, decoded with one pass per column."""
    base, gap_size, freq_size, ids, lengths = connection.execute(
        _SEGMENT_SQL, (segment,)
    ).fetchone()
    start = segment * BUCKETS
    names: list[str] = []
    counts, gaps, freqs = [], [], []
    for terms, sizes, gap_bytes, freq_bytes in connection.execute(
        _ROWS_SQL, (start, start + BUCKETS)
    ):
        names.extend(terms.split(TERM_SEPARATOR))
        counts.append(sizes)
        gaps.append(gap_bytes)
        freqs.append(freq_bytes)
    sizes = decoded(b"".join(counts), 4)
    bases = np.full(len(sizes), base, dtype=np.int64)
    return _Segment(
        names,
        sizes,
        runs_summed(decoded(b"".join(gaps), gap_size), bases, sizes),
        decoded(b"".join(freqs), freq_size),
        decoded(ids, 8),
        decoded(lengths, 4),
    )


def _live_postings(parts: Sequence[_Segment], ids: Ints, lengths: Ints) -> UnitPostings:
    """The segments' term occurrences as one run over ``ids`` (sorted live units), dead
    units dropped; the vocabulary in code-point order."""
    names = [name for part in parts for name in part.names]
    terms = sorted(set(names))
    number = {term: n for n, term in enumerate(terms)}
    occurrences = np.fromiter(map(number.__getitem__, names), dtype=np.int64, count=len(names))
    sizes = np.concatenate([part.counts for part in parts])
    term_ids = np.repeat(occurrences, sizes)
    all_units = np.concatenate([part.units for part in parts])
    all_freqs = np.concatenate([part.freqs for part in parts])
    positions = np.searchsorted(ids, all_units)
    inside = positions < len(ids)
    live = np.zeros(len(all_units), dtype=bool)
    live[inside] = ids[positions[inside]] == all_units[inside]
    return UnitPostings(
        terms,
        bucket_array(terms),
        term_ids[live],
        positions[live],
        all_freqs[live],
        lengths,
    )
