"""Per-token postings in compact segments: what FTS5's bm25() reads for a token, as arrays.

Every write transaction adds one segment: for each token of its units, the unit ids (gaps
from the segment's first unit) and the weighted frequency F = 2 x title + 2 x heading +
body instances (the bm25 column weights), plus each unit's token count |D|. Read back with
numpy, a token's bm25 contribution to all its units costs a few vector operations instead
of one FTS5 row visit each (scorer.py), with the same numbers. Deleted units keep their
postings but get |D| = 0, which marks them dead for every reader.
"""

from __future__ import annotations

import itertools
import sqlite3
import sys
import zlib
from array import array
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ..._sqlite import json_list
from ..ingest import UnitTokens
from .fts import quote_term
from .schema import BM25_SCORE

Ints = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]

TABLES = (
    """CREATE TABLE IF NOT EXISTS segments(
        segment INTEGER PRIMARY KEY,
        min_unit INTEGER NOT NULL,
        max_unit INTEGER NOT NULL,
        gap_bytes INTEGER NOT NULL,
        freq_bytes INTEGER NOT NULL,
        units BLOB NOT NULL,
        lengths BLOB NOT NULL)""",
    # One row per segment and hash bucket of terms (rare terms cost no row of their own),
    # keyed segment * BUCKETS + bucket: a rowid table keeps rows of a few KB inline.
    """CREATE TABLE IF NOT EXISTS postings(
        key INTEGER PRIMARY KEY,
        terms TEXT NOT NULL,
        counts BLOB NOT NULL,
        gaps BLOB NOT NULL,
        freqs BLOB NOT NULL)""",
)
BUCKETS = 1024
TERM_SEPARATOR = "\n"  # tokens never hold whitespace
_NEXT_SEGMENT_SQL = "SELECT coalesce(max(segment), 0) + 1 FROM segments"
_INSERT_SEGMENT_SQL = "INSERT INTO segments VALUES (?, ?, ?, ?, ?, ?, ?)"
_INSERT_POSTING_SQL = "INSERT INTO postings VALUES (?, ?, ?, ?, ?)"
_SEGMENTS_SQL = "SELECT units, lengths FROM segments"
_OVERLAPPING_SQL = (
    "SELECT segment, units, lengths FROM segments WHERE max_unit >= ? AND min_unit <= ?"
)
_PHRASE_SCORES_SQL = f"SELECT rowid, {BM25_SCORE} FROM units_fts WHERE units_fts MATCH ?"
_SET_LENGTHS_SQL = "UPDATE segments SET lengths = ? WHERE segment = ?"
_CONTENT_KEYS_SQL = """
    SELECT unit_id, doc_id, char_start FROM units
    WHERE unit_id IN (SELECT value FROM json_each(?))"""
# A bucket is read by one rowid seek per segment.
_POSTINGS_SQL = f"""
    SELECT asked.value, segments.min_unit, segments.gap_bytes, segments.freq_bytes,
           postings.terms, postings.counts, postings.gaps, postings.freqs
    FROM segments CROSS JOIN json_each(?) AS asked
    CROSS JOIN postings ON postings.key = segments.segment * {BUCKETS} + asked.value
    ORDER BY segments.segment"""


@dataclass(frozen=True)
class UnitPostings:
    """The postings of a run of units, numbered by position in the run (0, 1, ...), with
    each vocabulary term's hash bucket."""

    terms: list[str]
    buckets: Ints
    term_ids: Ints
    positions: Ints
    freqs: Ints
    lengths: Ints

    @property
    def unit_count(self) -> int:
        """How many units the run holds."""
        return len(self.lengths)

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled with 32-bit columns (half the bytes through a worker's pipe: ids, places
        and counts of one batch are far below 2**31), widened again on load."""
        columns = (self.buckets, self.term_ids, self.positions, self.freqs, self.lengths)
        return _widened, (self.terms, *(column.astype(np.int32) for column in columns))


def _widened(terms: list[str], *columns: npt.NDArray[np.int32]) -> UnitPostings:
    """A `UnitPostings` from its pickled form (`UnitPostings.__reduce__`)."""
    return UnitPostings(terms, *(column.astype(np.int64) for column in columns))


def count_postings(columns: Iterable[UnitTokens]) -> tuple[UnitPostings, Ints]:
    """Postings of units given as (title, heading, body) token lists, in order, and the
    number of units holding each body token (body df, aligned with the vocabulary),
    counted in the same pass into flat integer arrays rather than per-token objects."""
    vocabulary: defaultdict[str, int] = defaultdict(itertools.count().__next__)
    term_ids, positions, freqs = array("q"), array("q"), array("q")
    in_body, lengths = array("b"), array("q")
    for position, fields in enumerate(columns):
        weighted = Counter(fields[2])
        body_terms = len(weighted)
        for token in (*fields[0], *fields[1]):
            weighted[token] += 2
        # A unit's body tokens come first among its postings (the Counter keeps that order).
        in_body.extend(itertools.repeat(1, body_terms))
        in_body.extend(itertools.repeat(0, len(weighted) - body_terms))
        lengths.append(len(fields[0]) + len(fields[1]) + len(fields[2]))
        term_ids.extend(map(vocabulary.__getitem__, weighted))
        positions.extend(itertools.repeat(position, len(weighted)))
        freqs.extend(weighted.values())
    terms = list(vocabulary)
    ids = _from_array(term_ids)
    body_df = np.bincount(ids[np.frombuffer(in_body, dtype=np.int8) == 1], minlength=len(terms))
    postings = UnitPostings(
        terms,
        bucket_array(terms),
        ids,
        _from_array(positions),
        _from_array(freqs),
        _from_array(lengths),
    )
    return postings, body_df.astype(np.int64)


def united_vocabulary(parts: Sequence[UnitPostings]) -> tuple[list[str], list[Ints]]:
    """The terms of consecutive runs in first-seen order, and each run's term ids in it."""
    vocabulary: defaultdict[str, int] = defaultdict(itertools.count().__next__)
    mappings = [_ints(list(map(vocabulary.__getitem__, part.terms))) for part in parts]
    return list(vocabulary), mappings


def _merged_with(
    parts: Sequence[UnitPostings], terms: list[str], mappings: Sequence[Ints]
) -> UnitPostings:
    """One run from consecutive runs given their united vocabulary: positions shifted."""
    buckets = np.zeros(len(terms), dtype=np.int64)
    term_ids, positions, offset = [], [], 0
    for part, mapping in zip(parts, mappings, strict=True):
        buckets[mapping] = part.buckets
        term_ids.append(mapping[part.term_ids] if len(mapping) else part.term_ids)
        positions.append(part.positions + offset)
        offset += part.unit_count
    return UnitPostings(
        terms,
        buckets,
        _concatenated(term_ids),
        _concatenated(positions),
        _concatenated([part.freqs for part in parts]),
        _concatenated([part.lengths for part in parts]),
    )


@dataclass(frozen=True)
class BatchPostings:
    """SQLite's statistics of a batch: its units' postings and each vocabulary term's body
    document frequency (an array aligned with ``postings.terms``)."""

    postings: UnitPostings
    body_df: Ints

    def body_df_rows(self) -> Iterator[tuple[str, int]]:
        """(term, body df) for the terms some body holds (not those only in titles)."""
        counts = self.body_df.tolist()
        held = itertools.compress(self.postings.terms, counts)
        return zip(held, filter(None, counts), strict=True)


class PostingsCounter:
    """SQLite's ingest hook (`ingest.UnitStatistics`): postings and body df, counted in the
    analysis workers beside the analysis."""

    def derive(self, units: Sequence[UnitTokens]) -> BatchPostings:
        """The postings and body df of consecutive units."""
        return BatchPostings(*count_postings(units))

    def merge(self, parts: Sequence[BatchPostings]) -> BatchPostings:
        """One batch's postings and body df from its consecutive slices (vocabulary mapped
        once, df added as arrays)."""
        if len(parts) == 1:
            return parts[0]
        terms, mappings = united_vocabulary([part.postings for part in parts])
        body_df = np.zeros(len(terms), dtype=np.int64)
        for part, mapping in zip(parts, mappings, strict=True):
            body_df[mapping] += part.body_df  # a run's term ids are distinct
        postings = _merged_with([part.postings for part in parts], terms, mappings)
        return BatchPostings(postings, body_df)


def bucket_array(terms: Sequence[str]) -> Ints:
    """Each term's hash bucket, as an array."""
    return _ints([bucket_of(term) for term in terms])


def write_segment(
    connection: sqlite3.Connection, postings: UnitPostings, unit_ids: Sequence[int]
) -> None:
    """Store a run's postings as a new segment, its units having been given ``unit_ids``."""
    if not unit_ids:
        return
    ids = np.asarray(unit_ids, dtype=np.int64)
    segment = int(connection.execute(_NEXT_SEGMENT_SQL).fetchone()[0])
    buckets = postings.buckets[postings.term_ids] if len(postings.terms) else postings.term_ids
    order = _bucket_order(postings, buckets)
    terms, units = postings.term_ids[order], ids[postings.positions[order]]
    starts = np.flatnonzero(np.r_[True, terms[1:] != terms[:-1]]) if len(terms) else terms
    base = int(ids.min())
    gaps = np.diff(units, prepend=base)
    gaps[starts] = units[starts] - base
    freqs = postings.freqs[order]
    gap_type, freq_type = _width(gaps), _width(freqs)
    connection.execute(
        _INSERT_SEGMENT_SQL,
        (
            segment,
            base,
            int(ids.max()),
            gap_type.itemsize,
            freq_type.itemsize,
            ids.astype("<i8").tobytes(),
            postings.lengths.astype("<u4").tobytes(),
        ),
    )
    columns = _Columns(
        gaps.astype(gap_type).tobytes(),
        freqs.astype(freq_type).tobytes(),
        gap_type.itemsize,
        freq_type.itemsize,
    )
    connection.executemany(
        _INSERT_POSTING_SQL,
        _bucket_rows(segment, postings.terms, terms, starts, buckets[order], columns),
    )


def _bucket_order(postings: UnitPostings, buckets: Ints) -> Ints:
    """The postings' order by (bucket, term, position): one sort of a combined key (unique
    per posting) when it fits in 63 bits, else a three-key sort."""
    terms, units = max(len(postings.terms), 1), max(postings.unit_count, 1)
    if BUCKETS * terms * units < 2**62:
        return np.argsort((buckets * terms + postings.term_ids) * units + postings.positions)
    return np.lexsort((postings.positions, postings.term_ids, buckets))


@dataclass(frozen=True)
class _Columns:
    """A segment's encoded gaps and frequencies, and their widths in bytes."""

    gaps: bytes
    freqs: bytes
    gap_size: int
    freq_size: int


def _bucket_rows(
    segment: int,
    vocabulary: Sequence[str],
    terms: Ints,
    starts: Ints,
    buckets: Ints,
    columns: _Columns,
) -> list[tuple[int, str, bytes, bytes, bytes]]:
    """One row per bucket: its terms, their posting counts, and their slice of the columns."""
    if not len(starts):
        return []
    ends = np.r_[starts[1:], len(terms)]
    group_buckets = buckets[starts]
    cuts = np.flatnonzero(np.r_[True, group_buckets[1:] != group_buckets[:-1]]).tolist()
    rows = []
    g, f = columns.gap_size, columns.freq_size
    # Every term's name and posting count in segment order, made once for all buckets.
    names = [vocabulary[t] for t in terms[starts].tolist()]
    counts = (ends - starts).astype("<u4").tobytes()
    offsets, bounds = starts.tolist(), ends.tolist()
    for first, last in zip(cuts, [*cuts[1:], len(starts)], strict=True):
        low, high = offsets[first], bounds[last - 1]
        rows.append(
            (
                segment * BUCKETS + int(group_buckets[first]),
                TERM_SEPARATOR.join(names[first:last]),
                counts[4 * first : 4 * last],
                columns.gaps[g * low : g * high],
                columns.freqs[f * low : f * high],
            )
        )
    return rows


def bucket_of(term: str) -> int:
    """The term's hash bucket, the same in every process (crc32, not Python's hash)."""
    return zlib.crc32(term.encode("utf-8")) % BUCKETS


def mark_deleted(connection: sqlite3.Connection, unit_ids: Sequence[int]) -> None:
    """Give deleted units |D| = 0 in their segments, so readers skip their postings."""
    if not unit_ids:
        return
    dead = np.asarray(sorted(unit_ids), dtype=np.int64)
    rows = connection.execute(_OVERLAPPING_SQL, (int(dead[0]), int(dead[-1]))).fetchall()
    for segment, units, lengths in rows:
        hit = np.isin(np.frombuffer(units, dtype="<i8"), dead)
        if hit.any():
            kept = np.frombuffer(lengths, dtype="<u4").copy()
            kept[hit] = 0
            connection.execute(_SET_LENGTHS_SQL, (kept.tobytes(), segment))


def unit_lengths(connection: sqlite3.Connection) -> tuple[Ints, Ints]:
    """Every unit's id and |D| (0 for a dead unit), segment by segment."""
    ids, lengths = [], []
    for units, sizes in connection.execute(_SEGMENTS_SQL):
        ids.append(np.frombuffer(units, dtype="<i8").astype(np.int64))
        lengths.append(np.frombuffer(sizes, dtype="<u4").astype(np.int64))
    return _concatenated(ids), _concatenated(lengths)


class SQLitePostings:
    """The scorer's `PostingsSource` on one connection: token postings from the segments,
    a phrase's term from FTS5 (the bm25 of a one-phrase query is exactly that term)."""

    def __init__(self, connection: sqlite3.Connection):
        self.connection = connection

    def postings(
        self, tokens: Sequence[str], phrases: Sequence[str]
    ) -> dict[str, tuple[Ints, Ints]]:
        """Per token found, (unit ids, F) over all segments (phrases are FTS5's to score)."""
        return read_postings(self.connection, tokens) if tokens else {}

    def phrase_scores(self, phrase: str) -> tuple[Ints, Floats]:
        """(unit ids, c(phrase)) from FTS5."""
        rows = self.connection.execute(_PHRASE_SCORES_SQL, (quote_term(phrase),)).fetchall()
        units = np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))
        values = np.fromiter((row[1] for row in rows), dtype=np.float64, count=len(rows))
        return units, values

    def content_keys(self, unit_ids: Ints) -> list[tuple[str, int]]:
        """(document id, character offset) of each unit, in the order given."""
        asked = json_list(unit_ids.tolist(), "unit ids")
        found = {
            row[0]: (row[1], row[2]) for row in self.connection.execute(_CONTENT_KEYS_SQL, (asked,))
        }
        return [found[unit] for unit in unit_ids.tolist()]


def read_postings(
    connection: sqlite3.Connection, tokens: Sequence[str]
) -> dict[str, tuple[Ints, Ints]]:
    """Per token, (unit ids, F) over all segments, dead units included (merged segments
    make the ids unordered)."""
    wanted: dict[int, set[str]] = {}
    for token in tokens:
        wanted.setdefault(bucket_of(token), set()).add(token)
    pieces: dict[str, _Pieces] = {}
    rows = connection.execute(_POSTINGS_SQL, (json_list(sorted(wanted), "bucket"),))
    for bucket, base, gap_size, freq_size, names, counts, gaps, freqs in rows:
        terms = names.split(TERM_SEPARATOR)
        for name in wanted[bucket].intersection(terms):
            at = terms.index(name)
            sizes = _counts(counts)
            start = sum(sizes[:at])
            end = start + sizes[at]
            pieces.setdefault(name, _Pieces()).add(
                base,
                end - start,
                gaps[gap_size * start : gap_size * end],
                freqs[freq_size * start : freq_size * end],
                (gap_size, freq_size),
            )
    return {term: found.arrays() for term, found in pieces.items()}


def _counts(blob: bytes) -> array[int]:
    """A row's posting counts (little-endian u4) as a plain array, cheap to slice and sum."""
    values = array("I")
    values.frombytes(blob)
    if sys.byteorder == "big":
        values.byteswap()
    return values


class _Pieces:
    """One token's encoded postings from each segment, decoded together at the end: one
    pass per pair of column widths, so units and F stay in the same order."""

    def __init__(self) -> None:
        self.parts: dict[tuple[int, int], tuple[list[bytes], list[bytes], list[int]]] = {}

    def add(
        self, base: int, count: int, gaps: bytes, freqs: bytes, widths: tuple[int, int]
    ) -> None:
        """A segment's postings of this token: first unit id, count, both columns' bytes."""
        gap_parts, freq_parts, runs = self.parts.setdefault(widths, ([], [], []))
        gap_parts.append(gaps)
        freq_parts.append(freqs)
        runs.extend((base, count))

    def arrays(self) -> tuple[Ints, Ints]:
        """(unit ids, F): each segment's gaps summed from its base."""
        units, freqs = [], []
        for (gap_width, freq_width), (gap_parts, freq_parts, runs) in self.parts.items():
            bases, counts = np.array(runs, dtype=np.int64).reshape(-1, 2).T
            units.append(runs_summed(decoded(b"".join(gap_parts), gap_width), bases, counts))
            freqs.append(decoded(b"".join(freq_parts), freq_width))
        return _concatenated(units), _concatenated(freqs)


def runs_summed(gaps: Ints, bases: Ints, counts: Ints) -> Ints:
    """Consecutive runs of gaps (``counts`` long), each summed from its own base: unit ids."""
    total = gaps.cumsum()
    before = np.r_[0, total[np.cumsum(counts)[:-1] - 1]] if len(total) else total
    units: Ints = total - np.repeat(before - bases, counts)
    return units


def decoded(column: bytes, width: int) -> Ints:
    """A whole encoded column (little-endian unsigned of ``width`` bytes) as int64."""
    return np.frombuffer(column, dtype=f"<u{width}").astype(np.int64)


def _width(values: Ints) -> np.dtype[np.unsignedinteger]:
    """The narrowest little-endian unsigned type holding every value."""
    top = int(values.max()) if len(values) else 0
    for code in ("<u1", "<u2", "<u4"):
        if top <= np.iinfo(code).max:
            return np.dtype(code)
    return np.dtype("<u8")


def _from_array(values: array[int]) -> Ints:
    """An ``array("q")``'s values as an int64 array (one copy, no per-item conversion)."""
    copied: Ints = np.frombuffer(values, dtype=np.int64).copy()
    return copied


def _ints(values: Sequence[int]) -> Ints:
    """A list of ints as an int64 array."""
    return np.asarray(values, dtype=np.int64)


def _concatenated(arrays: Sequence[Ints]) -> Ints:
    """Arrays joined end to end (an empty int64 array for none)."""
    return np.concatenate(arrays) if arrays else np.zeros(0, dtype=np.int64)
