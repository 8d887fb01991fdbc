"""PostgreSQL's statistics of analysed units: positional postings, df and token totals.

All of a batch's statistics are counted in the analysis workers (`DocumentFrequencies`, the
backend's ingest hook): per unit and distinct token its weighted frequency F and its word
positions, numbered by the unit's place in the batch until the writer gives units ids; the
batch's body and any-field document frequencies; its token total.

A position is coded ``column << COLUMN_SHIFT | index`` (title 0, heading 1, body 2), so
positions one apart are adjacent words of one column and a phrase never spans two columns.
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ..ingest import UnitTokens

Ints = npt.NDArray[np.int64]

COLUMN_SHIFT = 32
BODY = 2


@dataclass(frozen=True)
class RunPostings:
    """The postings of a run of units: per posting its term, unit (place in the run, or id
    once written), F and number of positions; the positions of all postings end to end."""

    terms: list[str]
    term_ids: Ints
    units: Ints
    freqs: Ints
    counts: Ints
    codes: Ints
    lengths: Ints


@dataclass(frozen=True)
class BatchFrequencies:
    """What a batch adds to the index: postings, body df, any-field df, tokens."""

    postings: RunPostings
    body_df: Counter[str]
    any_df: Counter[str]
    tokens: int


class DocumentFrequencies:
    """PostgreSQL's ingest hook (`ingest.UnitStatistics`): a batch's postings, df and token
    total, counted in the analysis workers beside the analysis."""

    def derive(self, units: Sequence[UnitTokens]) -> BatchFrequencies:
        """The positional postings, body df, any-field df and token total of consecutive units."""
        vocabulary: defaultdict[str, int] = defaultdict(itertools.count().__next__)
        term_ids: list[int] = []
        places: list[int] = []
        counts: list[int] = []
        codes: list[int] = []
        lengths: list[int] = []
        body_df: Counter[str] = Counter()
        any_df: Counter[str] = Counter()
        for place, columns in enumerate(units):
            found = _positions(columns)
            body_df.update({token for token, at in found.items() if at[-1] >> COLUMN_SHIFT == BODY})
            any_df.update(found.keys())
            lengths.append(sum(len(at) for at in found.values()))
            for token, at in found.items():
                term_ids.append(vocabulary[token])
                counts.append(len(at))
                codes.extend(at)
            places.extend(itertools.repeat(place, len(found)))
        postings = _run(list(vocabulary), term_ids, places, counts, codes, lengths)
        return BatchFrequencies(postings, body_df, any_df, sum(lengths))

    def merge(self, parts: Sequence[BatchFrequencies]) -> BatchFrequencies:
        """One batch's frequencies from its consecutive slices."""
        body_df: Counter[str] = Counter()
        any_df: Counter[str] = Counter()
        for part in parts:
            body_df.update(part.body_df)
            any_df.update(part.any_df)
        postings = joined_runs([part.postings for part in parts])
        return BatchFrequencies(postings, body_df, any_df, sum(part.tokens for part in parts))


def weighted_frequencies(counts: Ints, codes: Ints) -> Ints:
    """F of each posting from its positions: 2 per title or heading word, 1 per body word."""
    weights = np.where(codes >> COLUMN_SHIFT == BODY, 1, 2)
    starts = np.r_[0, np.cumsum(counts)[:-1]] if len(counts) else counts
    return np.add.reduceat(weights, starts).astype(np.int64) if len(counts) else counts


def joined_runs(parts: Sequence[RunPostings]) -> RunPostings:
    """One run from consecutive runs: unit places shifted, vocabularies united."""
    vocabulary: defaultdict[str, int] = defaultdict(itertools.count().__next__)
    term_ids, units, offset = [], [], 0
    for part in parts:
        mapping = np.asarray([vocabulary[term] for term in part.terms], dtype=np.int64)
        term_ids.append(mapping[part.term_ids] if len(mapping) else part.term_ids)
        units.append(part.units + offset)
        offset += len(part.lengths)
    return RunPostings(
        list(vocabulary),
        concatenated(term_ids),
        concatenated(units),
        concatenated([part.freqs for part in parts]),
        concatenated([part.counts for part in parts]),
        concatenated([part.codes for part in parts]),
        concatenated([part.lengths for part in parts]),
    )


def _positions(columns: Sequence[Sequence[str]]) -> dict[str, list[int]]:
    """Per distinct token of a unit, its coded positions, column by column."""
    found: dict[str, list[int]] = {}
    for column, tokens in enumerate(columns):
        base = column << COLUMN_SHIFT
        for index, token in enumerate(tokens):
            found.setdefault(token, []).append(base | index)
    return found


def _run(
    terms: list[str],
    term_ids: list[int],
    places: list[int],
    counts: list[int],
    codes: list[int],
    lengths: list[int],
) -> RunPostings:
    """A run from its lists, F derived from the positions."""
    count_array, code_array = _ints(counts), _ints(codes)
    freqs = weighted_frequencies(count_array, code_array)
    return RunPostings(
        terms, _ints(term_ids), _ints(places), freqs, count_array, code_array, _ints(lengths)
    )


def _ints(values: Sequence[int]) -> Ints:
    """A list of ints as an int64 array."""
    return np.asarray(values, dtype=np.int64)


def concatenated(arrays: Sequence[Ints]) -> Ints:
    """Arrays joined end to end (an empty int64 array for none)."""
    return (
        np.concatenate(arrays).astype(np.int64, copy=False)
        if arrays
        else np.zeros(0, dtype=np.int64)
    )
