"""Per-term posting blocks in PostgreSQL: SQLite's segment design, written with COPY.

Every write transaction adds one segment: a row with its units' ids and token counts |D|,
and one block row per term holding that term's units (gaps from the segment's first unit),
weighted frequencies F = 2 x title + 2 x heading + body (the bm25 column weights) and word
positions (for phrases), each column in the segment's narrowest integer width. A round's
terms are read in one statement and decoded with numpy; deleted units keep their postings
but get |D| = 0, which marks them dead for every reader, and merges (`merge`) drop them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ..sqlite.postings import _width, decoded
from .postings import COLUMN_SHIFT, RunPostings, concatenated
from .schema import BLOCK_TYPES, SEGMENT_TYPES

Ints = npt.NDArray[np.int64]

MAX_SEGMENTS = 16
FAN_IN = 8


@dataclass(frozen=True)
class Segment:
    """A segment's header: id, first unit id, column widths and position span, with its
    units' ids and |D|."""

    segment: int
    base: int
    sizes: tuple[int, int, int, int]  # bytes per gap, F, position count, position
    span: int
    units: Ints
    lengths: Ints


@dataclass(frozen=True)
class Postings:
    """Postings sorted by term then unit id: term index into ``terms``, unit id, F, number
    of positions; then the coded positions of all postings end to end (postings.py)."""

    terms: list[str]
    term_ids: Ints
    units: Ints
    freqs: Ints
    counts: Ints
    codes: Ints


Positional = tuple[Ints, Ints, Ints]  # a term's units, their position counts, the positions


def from_units(run: RunPostings, unit_ids: Sequence[int]) -> Postings:
    """A batch's postings with its units given ``unit_ids`` (in order), sorted for a segment."""
    units = np.asarray(unit_ids, dtype=np.int64)[run.units]
    order = np.lexsort((units, run.term_ids))
    return _reordered(run.terms, run.term_ids, units, run.freqs, run.counts, run.codes, order)


def write_segment(
    cursor: Any,
    statements: tuple[Any, Any],
    segment: int,
    postings: Postings,
    units: tuple[Ints, Ints],
) -> None:
    """COPY one segment (its header row, then one block row per term) in this transaction.

    ``statements`` are the COPY statements of the segments and blocks tables; ``units`` the
    segment's unit ids and their |D|.
    """
    ids, lengths = units
    if not len(ids):
        return
    base = int(ids.min())
    terms = postings.term_ids
    starts = np.flatnonzero(np.r_[True, terms[1:] != terms[:-1]]) if len(terms) else terms
    gaps = np.diff(postings.units, prepend=base)
    gaps[starts] = postings.units[starts] - base
    indexes = postings.codes & ((1 << COLUMN_SHIFT) - 1)
    span = 1 << int(indexes.max() if len(indexes) else 0).bit_length()
    coded = (postings.codes >> COLUMN_SHIFT) * span + indexes
    columns = [gaps, postings.freqs, postings.counts, coded]
    types = [_width(column) for column in columns]
    encoded = [column.astype(kind).tobytes() for column, kind in zip(columns, types, strict=True)]
    sizes = [kind.itemsize for kind in types]
    header = (segment, base, int(ids.max()), *sizes, span)
    with cursor.copy(statements[0]) as copy:
        copy.set_types(SEGMENT_TYPES)
        copy.write_row((*header, ids.astype("<i8").tobytes(), lengths.astype("<u4").tobytes()))
    ends = np.r_[starts[1:], len(terms)].astype(np.int64)
    offsets = np.r_[0, np.cumsum(postings.counts)].astype(np.int64)
    names = [postings.terms[t] for t in terms[starts].tolist()]
    firsts, lasts = offsets[starts].tolist(), offsets[ends].tolist()
    bounds = zip(starts.tolist(), ends.tolist(), firsts, lasts, strict=True)
    g, f, c, w = sizes
    with cursor.copy(statements[1]) as copy:
        copy.set_types(BLOCK_TYPES)
        for name, (start, end, first, last) in zip(names, bounds, strict=True):
            copy.write_row(
                (
                    name,
                    segment,
                    encoded[0][g * start : g * end],
                    encoded[1][f * start : f * end],
                    encoded[2][c * start : c * end],
                    encoded[3][w * first : w * last],
                )
            )


def read_segment(row: Sequence[Any]) -> Segment:
    """A segment header row (id, base, four widths, span, unit ids, |D|) decoded."""
    segment, base, gap, freq, count, position, span, units, lengths = row
    return Segment(
        int(segment),
        int(base),
        (int(gap), int(freq), int(count), int(position)),
        int(span),
        np.frombuffer(units, dtype="<i8").astype(np.int64),
        np.frombuffer(lengths, dtype="<u4").astype(np.int64),
    )


def length_table(segments: Sequence[Segment]) -> Ints:
    """|D| of every unit by id (0 for ids that are dead or were never used)."""
    size = max((int(s.units.max()) for s in segments if len(s.units)), default=0) + 1
    table = np.zeros(size, dtype=np.int64)
    for segment in segments:
        table[segment.units] = segment.lengths
    return table


def decode_blocks(
    segments: dict[int, Segment], rows: Sequence[Sequence[Any]]
) -> tuple[dict[str, tuple[Ints, Ints]], dict[str, Positional]]:
    """Per term, (unit ids, F) over the block rows (term, segment, gaps, freqs, position
    counts, positions) read; and per term whose positions were read, its positions."""
    plain = [row for row in rows if row[4] is None]
    positional = [row for row in rows if row[4] is not None]
    terms, (term_ids, units, freqs, _, _) = _decoded_rows(segments, plain, positions=False)
    postings = {
        terms[t]: (term_units, term_freqs)
        for t, (term_units, term_freqs) in _split_by_term(term_ids, [units, freqs]).items()
    }
    terms, (term_ids, units, freqs, counts, codes) = _decoded_rows(
        segments, positional, positions=True
    )
    order = np.argsort(term_ids, kind="stable")
    moved = _reordered(terms, term_ids, units, freqs, counts, codes, order)
    located: dict[str, Positional] = {}
    offsets = np.r_[0, np.cumsum(moved.counts)].astype(np.int64)
    for t, (first, last) in _term_bounds(moved.term_ids).items():
        low, high = int(offsets[first]), int(offsets[last])
        pair = (moved.units[first:last], moved.freqs[first:last])
        postings[terms[t]] = pair
        located[terms[t]] = (pair[0], moved.counts[first:last], moved.codes[low:high])
    return postings, located


def _decoded_rows(
    segments: dict[int, Segment], rows: Sequence[Sequence[Any]], *, positions: bool
) -> tuple[list[str], tuple[Ints, Ints, Ints, Ints, Ints]]:
    """Block rows of any segments decoded, segment by segment: the terms, and per posting
    its term number, unit id, F and position count, then the positions (empty without)."""
    grouped: dict[int, list[Sequence[Any]]] = {}
    for row in rows:
        grouped.setdefault(int(row[1]), []).append(row)
    vocabulary: dict[str, int] = {}
    parts = [
        _segment_postings(segments[key], found, vocabulary, positions=positions)
        for key, found in grouped.items()
    ]
    columns = tuple(concatenated([part[k] for part in parts]) for k in range(5))
    return list(vocabulary), columns  # type: ignore[return-value]


def _term_bounds(term_ids: Ints) -> dict[int, tuple[int, int]]:
    """Per term number of postings sorted by term, its slice of them."""
    if not len(term_ids):
        return {}
    starts = np.flatnonzero(np.r_[True, term_ids[1:] != term_ids[:-1]])
    ends = np.r_[starts[1:], len(term_ids)]
    return {
        int(term_ids[first]): (int(first), int(last))
        for first, last in zip(starts.tolist(), ends.tolist(), strict=True)
    }


def _split_by_term(term_ids: Ints, columns: list[Ints]) -> dict[int, tuple[Ints, ...]]:
    """Per term number, its entries of each column (entries taken in order)."""
    order = np.argsort(term_ids, kind="stable")
    ordered = term_ids[order]
    sorted_columns = [column[order] for column in columns]
    return {
        t: tuple(column[first:last] for column in sorted_columns)
        for t, (first, last) in _term_bounds(ordered).items()
    }


def merged(
    segments: Sequence[Segment], rows_of: Callable[[int], Sequence[Sequence[Any]]]
) -> Postings:
    """The live postings of ``segments`` as one sorted run; ``rows_of`` fetches a segment's
    block rows, one segment at a time, so only one segment's rows are held as objects."""
    vocabulary: dict[str, int] = {}
    parts = [
        _segment_postings(segment, rows, vocabulary, positions=True)
        for segment in segments
        if (rows := rows_of(segment.segment))
    ]
    term_ids, units, freqs, counts, codes = (
        concatenated([part[k] for part in parts]) for k in range(5)
    )
    keep = length_table(segments)[units] > 0
    codes = codes[np.repeat(keep, counts)]
    term_ids, units, freqs, counts = term_ids[keep], units[keep], freqs[keep], counts[keep]
    order = np.lexsort((units, term_ids))
    return _reordered(list(vocabulary), term_ids, units, freqs, counts, codes, order)


def _segment_postings(
    segment: Segment, rows: Sequence[Sequence[Any]], vocabulary: dict[str, int], *, positions: bool
) -> tuple[Ints, Ints, Ints, Ints, Ints]:
    """All block rows of one segment decoded at once: per posting its term (numbered in
    ``vocabulary``), unit id, F and position count; then the positions (without
    ``positions``, the last two are empty)."""
    g, f, c, w = segment.sizes
    sizes = np.fromiter((len(row[2]) // g for row in rows), dtype=np.int64, count=len(rows))
    names = [vocabulary.setdefault(row[0], len(vocabulary)) for row in rows]
    gaps = _column(rows, 2, g).cumsum()
    starts = np.r_[0, np.cumsum(sizes)[:-1]].astype(np.int64)
    before = np.where(starts > 0, gaps[np.maximum(starts - 1, 0)], 0)
    units = gaps - np.repeat(before, sizes) + segment.base
    term_ids = np.repeat(np.asarray(names, dtype=np.int64), sizes)
    if not positions:
        empty = np.zeros(0, dtype=np.int64)
        return term_ids, units, _column(rows, 3, f), empty, empty
    column, index = np.divmod(_column(rows, 5, w), segment.span)
    universal = column << COLUMN_SHIFT | index
    return term_ids, units, _column(rows, 3, f), _column(rows, 4, c), universal


def _column(rows: Sequence[Sequence[Any]], field: int, width: int) -> Ints:
    """One packed column of many block rows, joined and decoded."""
    joined = b"".join(bytes(row[field]) for row in rows)
    return decoded(joined, width)


def _reordered(
    terms: list[str],
    term_ids: Ints,
    units: Ints,
    freqs: Ints,
    counts: Ints,
    codes: Ints,
    order: Ints,
) -> Postings:
    """Postings permuted by ``order``, each posting's positions moved with it."""
    starts = np.r_[0, np.cumsum(counts)[:-1]].astype(np.int64) if len(counts) else counts
    moved = counts[order]
    first = np.r_[0, np.cumsum(moved)[:-1]].astype(np.int64) if len(moved) else moved
    gather = np.repeat(starts[order] - first, moved) + np.arange(int(moved.sum()), dtype=np.int64)
    return Postings(terms, term_ids[order], units[order], freqs[order], moved, codes[gather])


def live_units(segments: Sequence[Segment]) -> tuple[Ints, Ints]:
    """The live units of ``segments`` and their |D|, by unit id."""
    ids = concatenated([segment.units for segment in segments])
    lengths = concatenated([segment.lengths for segment in segments])
    keep = lengths > 0
    order = np.argsort(ids[keep])
    return ids[keep][order], lengths[keep][order]


def deleted(segment: Segment, dead: Ints) -> Ints | None:
    """The segment's |D| with ``dead`` units set to 0, or None when it holds none of them."""
    hit = np.isin(segment.units, dead)
    if not hit.any():
        return None
    lengths: Ints = segment.lengths.copy()
    lengths[hit] = 0
    return lengths
