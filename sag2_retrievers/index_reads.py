"""What neutral code asks of a lexical index and gets back: term lookups and a BM25 hit.

Term selection and expansion (`expansion.py`) and the "paper" profile's phrase view
(`analysis/paper/terms.py`) read an index through `TermIndex`; searches return `SearchHit`.
Every backend (`backends.base.LexicalBackend`) provides these reads, and this module needs
no backend, so the arrows run from the backends down to it.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from .filters import Filters


@dataclass(frozen=True)
class SearchHit:
    """A BM25 match: the unit, its source document, and a positive score (higher is better)."""

    unit_id: int
    doc_id: str
    title: str
    text: str
    score: float
    char_start: int
    char_end: int


class TermIndex(Protocol):
    """The index reads term selection and expansion make (a `LexicalBackend` has them all;
    the "paper" profile passes a `analysis.paper.terms.PhraseTermIndex`)."""

    def unit_count(self) -> int:
        """The number of units."""
        ...

    def document_frequencies(self, terms: Iterable[str]) -> dict[str, int]:
        """Body-level df per term."""
        ...

    def expand(
        self,
        required_terms: Sequence[str],
        scoring_terms: Sequence[str],
        exclude: Collection[int],
        limit: int,
        *,
        filters: Filters | None = None,
    ) -> dict[str, list[int]]:
        """Per required term, its top unseen units under the scoring terms."""
        ...

    def title_phrases(self, phrases: Collection[str]) -> set[str]:
        """The given phrases that are multiword corpus titles."""
        ...
