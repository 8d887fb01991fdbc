"""Merging postings segments, so many small writes do not leave reads one seek per write.

Each write transaction adds a segment (postings.py). Past ``MAX_SEGMENTS`` the smallest
``FAN_IN`` are merged into one, dropping deleted units; ``SQLiteIndex.optimize`` merges
until ``FAN_IN`` remain. Small segments are merged most often, so a posting is rewritten
about log_FAN_IN(N / batch) times over an index's life.
"""

from __future__ import annotations

import sqlite3

import numpy as np

from .postings import (
    BUCKETS,
    TERM_SEPARATOR,
    Ints,
    UnitPostings,
    bucket_array,
    decode,
    write_segment,
)

MAX_SEGMENTS = 128
FAN_IN = 8
# optimize() stops before a merge would hold more units than this in memory at once.
MAX_MERGED_UNITS = 200_000

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
    if len(sizes) > MAX_SEGMENTS:
        merge(connection, [segment for segment, _ in sizes[:FAN_IN]])


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
    names: list[str] = []
    units: list[Ints] = []
    freqs: list[Ints] = []
    live_ids: list[Ints] = []
    live_lengths: list[Ints] = []
    for segment in segments:
        ids, lengths = _read_segment(connection, segment, names, units, freqs)
        live_ids.append(ids[lengths > 0])
        live_lengths.append(lengths[lengths > 0])
        start = segment * BUCKETS
        connection.execute(_DROP_ROWS_SQL, (start, start + BUCKETS))
        connection.execute(_DROP_SEGMENT_SQL, (segment,))
    merged_ids = np.concatenate(live_ids)
    order = np.argsort(merged_ids)
    merged_ids, lengths = merged_ids[order], np.concatenate(live_lengths)[order]
    postings = _live_postings(names, units, freqs, merged_ids, lengths)
    write_segment(connection, postings, merged_ids.tolist())


def _read_segment(
    connection: sqlite3.Connection,
    segment: int,
    names: list[str],
    units: list[Ints],
    freqs: list[Ints],
) -> tuple[Ints, Ints]:
    """Append every term occurrence of one segment to the lists; its (unit ids, |D|)."""
    base, gap_size, freq_size, ids, lengths = connection.execute(
        _SEGMENT_SQL, (segment,)
    ).fetchone()
    start = segment * BUCKETS
    for terms, counts, gaps, weights in connection.execute(_ROWS_SQL, (start, start + BUCKETS)):
        for name, (low, high) in zip(terms.split(TERM_SEPARATOR), _spans(counts), strict=True):
            names.append(name)
            units.append(decode(gaps, gap_size, low, high).cumsum() + base)
            freqs.append(decode(weights, freq_size, low, high))
    return (
        np.frombuffer(ids, dtype="<i8").astype(np.int64),
        np.frombuffer(lengths, dtype="<u4").astype(np.int64),
    )


def _spans(counts: bytes) -> list[tuple[int, int]]:
    """(start, end) of each term's postings in a row, from its posting counts."""
    ends = np.frombuffer(counts, dtype="<u4").astype(np.int64).cumsum().tolist()
    return list(zip([0, *ends[:-1]], ends, strict=True))


def _live_postings(
    names: list[str], units: list[Ints], freqs: list[Ints], ids: Ints, lengths: Ints
) -> UnitPostings:
    """The term occurrences as one run over ``ids`` (sorted live units), dead units dropped."""
    vocabulary, inverse = np.unique(np.array(names, dtype=str), return_inverse=True)
    sizes = np.array([len(part) for part in units], dtype=np.int64)
    term_ids = np.repeat(inverse.astype(np.int64), sizes)
    all_units = np.concatenate(units) if units else np.zeros(0, dtype=np.int64)
    all_freqs = np.concatenate(freqs) if freqs else np.zeros(0, dtype=np.int64)
    positions = np.searchsorted(ids, all_units)
    inside = positions < len(ids)
    live = np.zeros(len(all_units), dtype=bool)
    live[inside] = ids[positions[inside]] == all_units[inside]
    terms = vocabulary.tolist()
    return UnitPostings(
        terms,
        bucket_array(terms),
        term_ids[live],
        positions[live],
        all_freqs[live],
        lengths,
    )
