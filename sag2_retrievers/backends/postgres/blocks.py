"""Per-term posting blocks in PostgreSQL: SQLite's segment design, written with COPY.

Every write transaction adds one segment: a row with its units' ids and token counts |D|,
and one block row per term holding that term's units (gaps from the segment's first unit)
and weighted frequencies F = 2 x title + 2 x heading + body (the bm25 column weights), each
column in the segment's narrowest integer width. A round's terms are read in one statement
and decoded with numpy; deleted units keep their postings but get |D| = 0, which marks them
dead for every reader, and merges (`merge`) drop them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ..sqlite.postings import UnitPostings, _concatenated, _width, decode

Ints = npt.NDArray[np.int64]

MAX_SEGMENTS = 16
FAN_IN = 8


@dataclass(frozen=True)
class Segment:
    """A segment's header: its id, first unit id and column widths, with |D| by position."""

    segment: int
    base: int
    gap_size: int
    freq_size: int
    units: Ints
    lengths: Ints


@dataclass(frozen=True)
class Postings:
    """Posting triples (term index into ``terms``, unit id, F), sorted by term then unit."""

    terms: list[str]
    term_ids: Ints
    units: Ints
    freqs: Ints


def from_units(postings: UnitPostings, unit_ids: Sequence[int]) -> Postings:
    """A batch's postings with its units given ``unit_ids`` (in order), sorted for a segment."""
    ids = np.asarray(unit_ids, dtype=np.int64)
    units = ids[postings.positions]
    order = np.lexsort((units, postings.term_ids))
    return Postings(postings.terms, postings.term_ids[order], units[order], postings.freqs[order])


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
    gap_type, freq_type = _width(gaps), _width(postings.freqs)
    header = (segment, base, int(ids.max()), gap_type.itemsize, freq_type.itemsize)
    with cursor.copy(statements[0]) as copy:
        copy.write_row((*header, ids.astype("<i8").tobytes(), lengths.astype("<u4").tobytes()))
    gap_bytes = gaps.astype(gap_type).tobytes()
    freq_bytes = postings.freqs.astype(freq_type).tobytes()
    g, f = gap_type.itemsize, freq_type.itemsize
    ends = np.r_[starts[1:], len(terms)].tolist()
    names = [postings.terms[t] for t in terms[starts].tolist()]
    with cursor.copy(statements[1]) as copy:
        for name, start, end in zip(names, starts.tolist(), ends, strict=True):
            copy.write_row(
                (name, segment, gap_bytes[g * start : g * end], freq_bytes[f * start : f * end])
            )


def read_segment(row: Sequence[Any]) -> Segment:
    """A segment header row (id, base, widths, unit ids, |D|) decoded."""
    segment, base, gap_size, freq_size, units, lengths = row
    return Segment(
        int(segment),
        int(base),
        int(gap_size),
        int(freq_size),
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
) -> dict[str, tuple[Ints, Ints]]:
    """Per term, (unit ids, F) over the block rows (term, segment, gaps, freqs) read."""
    pieces: dict[str, tuple[list[Ints], list[Ints]]] = {}
    for term, segment_id, gaps, freqs in rows:
        segment = segments[int(segment_id)]
        count = len(gaps) // segment.gap_size
        units, weights = pieces.setdefault(term, ([], []))
        units.append(decode(gaps, segment.gap_size, 0, count).cumsum() + segment.base)
        weights.append(decode(freqs, segment.freq_size, 0, count))
    return {
        term: (_concatenated(units), _concatenated(weights))
        for term, (units, weights) in pieces.items()
    }


def merged(segments: Sequence[Segment], rows: Sequence[Sequence[Any]]) -> Postings:
    """The live postings of ``segments`` from all their block rows, as one sorted run."""
    by_id = {segment.segment: segment for segment in segments}
    vocabulary: dict[str, int] = {}
    term_ids, units, freqs = [], [], []
    for term, segment_id, gaps, weights in rows:
        segment = by_id[int(segment_id)]
        count = len(gaps) // segment.gap_size
        ids = decode(gaps, segment.gap_size, 0, count).cumsum() + segment.base
        term_ids.append(np.full(count, vocabulary.setdefault(term, len(vocabulary))))
        units.append(ids)
        freqs.append(decode(weights, segment.freq_size, 0, count))
    live = length_table(segments)
    all_units = _concatenated(units)
    keep = live[all_units] > 0
    all_terms, all_units, all_freqs = (
        _concatenated(term_ids)[keep],
        all_units[keep],
        _concatenated(freqs)[keep],
    )
    order = np.lexsort((all_units, all_terms))
    return Postings(list(vocabulary), all_terms[order], all_units[order], all_freqs[order])


def live_units(segments: Sequence[Segment]) -> tuple[Ints, Ints]:
    """The live units of ``segments`` and their |D|, by unit id."""
    ids = _concatenated([segment.units for segment in segments])
    lengths = _concatenated([segment.lengths for segment in segments])
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
