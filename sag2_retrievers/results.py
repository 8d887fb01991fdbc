"""What a retrieval returns: ranked evidence mapped to sources, and a trace of every round."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .judges.base import UsageSnapshot


@dataclass(frozen=True)
class RetrievedUnit:
    """One piece of evidence: the unit, its source document and offsets, and how it was found.

    ``score`` is the judge's latest yes-probability (the BM25 score in lexical fallbacks),
    ``round_found`` the round whose candidates first held it (0 = initial BM25 list), and
    ``rank`` its 1-based position in the final ranking of units.
    """

    unit_id: int
    doc_id: str
    title: str
    text: str
    score: float
    round_found: int
    rank: int
    char_start: int
    char_end: int
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RoundTrace:
    """What one scoring round did: its seeds and terms, new candidates, pool and context.

    ``pool`` lists the units judged this round, in pool order, and ``scores`` their judge
    scores, position by position.
    """

    round: int
    seeds: tuple[int, ...]
    terms: tuple[tuple[str, float], ...]
    new_candidates: tuple[int, ...]
    pool_size: int
    context_size: int
    judgments: int
    local_seconds: float
    judge_seconds: float
    pool: tuple[int, ...] = ()
    scores: tuple[float, ...] = ()


@dataclass(frozen=True)
class RetrievalResult:
    """A retrieval's answer: unique source documents (``hits``) and the unit ranking behind them.

    ``hits`` holds at most ``top_k`` results, at most ``units_per_document`` per source
    document (by default one: its best unit).
    ``units`` is the full final unit ranking (up to ``keep``), before source de-duplication.
    ``degraded`` is True when the judge failed and lexical order was returned instead.
    """

    question: str
    hits: tuple[RetrievedUnit, ...]
    units: tuple[RetrievedUnit, ...]
    trace: tuple[RoundTrace, ...]
    usage: UsageSnapshot
    stop_reason: str
    degraded: bool = False

    @property
    def judgments(self) -> int:
        """Judgments spent on this question across all rounds."""
        return sum(round_.judgments for round_ in self.trace)


# Why a retrieval can come back empty, in words for a user's debug log (README "Limits").
_EMPTY_REASONS = {
    "no query expression": "the question has no searchable term (only stopwords, "
    "punctuation or nothing)",
    "no lexical match": "no indexed passage shares a term with the question; SAG2 starts "
    "from BM25 matches, so a question worded unlike the corpus (synonyms, another language) "
    "finds nothing",
    "top_k is 0": "top_k is 0",
}


def why_empty(result: RetrievalResult) -> str | None:
    """Why the retrieval returned no hits, in words; None when it returned some."""
    if result.hits:
        return None
    return _EMPTY_REASONS.get(
        result.stop_reason, f"no passage survived ({result.stop_reason}); check the filters"
    )
