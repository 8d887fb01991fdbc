"""PostgreSQL's statistics of analysed units: postings, body and any-field df, token totals.

All of a batch's statistics are counted in the analysis workers (`DocumentFrequencies`, the
backend's ingest hook): its units' postings (SQLite's `count_postings`, numbered by position
in the batch until the writer gives the units ids), its document frequencies and its tokens.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from ..ingest import PreparedUnit
from ..sqlite.postings import UnitPostings, count_postings, merged_postings


@dataclass(frozen=True)
class BatchFrequencies:
    """What a batch adds to the index: postings, body df, any-field df, tokens."""

    postings: UnitPostings
    body_df: Counter[str]
    any_df: Counter[str]
    tokens: int


class DocumentFrequencies:
    """PostgreSQL's ingest hook (`ingest.UnitStatistics`): a batch's postings, df and token
    total, counted in the analysis workers beside the analysis."""

    def derive(self, units: Sequence[PreparedUnit]) -> BatchFrequencies:
        """The postings, body df, any-field df and token total of consecutive units."""
        postings, body_df = count_postings(
            (unit.title_tokens, unit.heading_tokens, unit.body_tokens) for unit in units
        )
        # One posting per unit and distinct token in any field: the any-field df.
        any_df = Counter(postings.terms[t] for t in postings.term_ids.tolist())
        return BatchFrequencies(postings, body_df, any_df, int(postings.lengths.sum()))

    def merge(self, parts: Sequence[BatchFrequencies]) -> BatchFrequencies:
        """One batch's frequencies from its consecutive slices."""
        body_df: Counter[str] = Counter()
        any_df: Counter[str] = Counter()
        for part in parts:
            body_df.update(part.body_df)
            any_df.update(part.any_df)
        postings = merged_postings([part.postings for part in parts])
        return BatchFrequencies(postings, body_df, any_df, sum(part.tokens for part in parts))


def token_columns(unit: PreparedUnit) -> tuple[list[str], list[str], list[str]]:
    """A unit's title, heading and body tokens, as the units table stores them."""
    return unit.title_tokens.split(), unit.heading_tokens.split(), unit.body_tokens.split()
