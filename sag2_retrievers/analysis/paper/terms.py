"""The index as term selection and expansion see it under the "paper" profile.

That profile's expansion units and question words are the port's words before unicode61
("peer-reviewed", "104.7", "é"); the index holds their unicode61 terms. This view looks each
word or space-joined name up as the phrase of its terms (`analyzer.match_phrase`), so
the words keep their own identity (for ties, the question-word test and the trace) and match
what the port matches.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence

from ...filters import Filters
from ...index_reads import TermIndex
from .analyzer import match_phrase


class PhraseTermIndex:
    """A backend whose term lookups take words and names, matched as their phrases."""

    def __init__(self, index: TermIndex) -> None:
        self._index = index

    def unit_count(self) -> int:
        """The number of units (N)."""
        return self._index.unit_count()

    def document_frequencies(self, terms: Iterable[str]) -> dict[str, int]:
        """Body-level df of each term's phrase (0 for a term with no indexed terms)."""
        phrases = {term: match_phrase(term) for term in terms}
        df = self._index.document_frequencies({p for p in phrases.values() if p})
        return {term: df.get(phrase, 0) if phrase else 0 for term, phrase in phrases.items()}

    def expand(
        self,
        required_terms: Sequence[str],
        scoring_terms: Sequence[str],
        exclude: Collection[int],
        limit: int,
        *,
        filters: Filters | None = None,
    ) -> dict[str, list[int]]:
        """`TermIndex.expand` with every term replaced by its phrase (repeats count)."""
        required = {term: match_phrase(term) for term in required_terms}
        scoring = [phrase for phrase in map(match_phrase, scoring_terms) if phrase]
        ranked = self._index.expand(
            [p for p in required.values() if p], scoring, exclude, limit, filters=filters
        )
        return {term: ranked.get(phrase, []) if phrase else [] for term, phrase in required.items()}

    def title_phrases(self, phrases: Collection[str]) -> set[str]:
        """The given names whose phrases are multiword corpus titles."""
        matched = {phrase: match_phrase(phrase) for phrase in phrases}
        titles = self._index.title_phrases(set(matched.values()))
        return {phrase for phrase, terms in matched.items() if terms in titles}
