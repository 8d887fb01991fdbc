"""PostgreSQL's statistics of analysed units: posting rows, body and any-field df, token totals.

The document frequencies and token total of a batch are counted in the analysis workers
(`DocumentFrequencies`, the backend's ingest hook); a unit's posting rows, which need its id,
are made on the writer as the unit is copied.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from ..ingest import PreparedUnit

PostingRow = tuple[str, int, int, int, int, int]


@dataclass(frozen=True)
class BatchFrequencies:
    """What a batch adds to the df tables and totals: body df, any-field df, tokens."""

    body_df: Counter[str]
    any_df: Counter[str]
    tokens: int


class DocumentFrequencies:
    """PostgreSQL's ingest hook (`ingest.UnitStatistics`): a batch's df and token total,
    counted in the analysis workers beside the analysis."""

    def derive(self, units: Sequence[PreparedUnit]) -> BatchFrequencies:
        """The body df, any-field df and token total of consecutive units."""
        body_df: Counter[str] = Counter()
        any_df: Counter[str] = Counter()
        tokens = 0
        for unit in units:
            title, heading, body = token_columns(unit)
            tokens += len(title) + len(heading) + len(body)
            body_df.update(set(body))
            any_df.update({*title, *heading, *body})
        return BatchFrequencies(body_df, any_df, tokens)

    def merge(self, parts: Sequence[BatchFrequencies]) -> BatchFrequencies:
        """One batch's frequencies from its consecutive slices."""
        body_df: Counter[str] = Counter()
        any_df: Counter[str] = Counter()
        for part in parts:
            body_df.update(part.body_df)
            any_df.update(part.any_df)
        return BatchFrequencies(body_df, any_df, sum(part.tokens for part in parts))


def token_columns(unit: PreparedUnit) -> tuple[list[str], list[str], list[str]]:
    """A unit's title, heading and body tokens, as the units table stores them."""
    return unit.title_tokens.split(), unit.heading_tokens.split(), unit.body_tokens.split()


def posting_rows(unit_id: int, columns: Sequence[list[str]], length: int) -> list[PostingRow]:
    """(term, unit, title tf, heading tf, body tf, |D|) for every distinct term of a unit."""
    counts = [Counter(column) for column in columns]
    return [
        (term, unit_id, counts[0][term], counts[1][term], counts[2][term], length)
        for term in set().union(*counts)
    ]
