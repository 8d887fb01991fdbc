"""BM25 alone as a retrieval: the top source documents by their best unit, with no judge.

The baseline a user compares SAG2 with on their own corpus (``sag2 query --method bm25``): the
same candidates SAG2's first round starts from, in the index's own order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from .backends.base import LexicalBackend
from .config import SAG2Config
from .judges.base import UsageSnapshot
from .query import check_limit, check_question, query_terms
from .results import RetrievalResult, RetrievedUnit


def bm25_retrieve(
    index: LexicalBackend, question: str, top_k: int = 10, config: SAG2Config | None = None
) -> RetrievalResult:
    """The BM25 top ``top_k`` unique source documents among the first
    ``config.candidates_per_round`` units, each shown by its best unit (scores are BM25's)."""
    check_question(question)
    check_limit(top_k, "top_k")
    config = config or SAG2Config()
    with index.snapshot():
        terms = query_terms(index, question, config.max_query_tokens)
        ranked = index.rank_expression(terms, config.candidates_per_round) if terms else []
        units = index.units(unit_id for unit_id, _ in ranked)
        ordered = [
            RetrievedUnit(
                unit.unit_id,
                unit.doc_id,
                unit.title,
                unit.body,
                score,
                0,
                rank,
                unit.char_start,
                unit.char_end,
            )
            for rank, (unit_id, score) in enumerate(ranked, start=1)
            if (unit := units.get(unit_id)) is not None
        ]
        hits = _first_of_each_source(ordered)[:top_k]
        metadata = index.metadata(hit.doc_id for hit in hits)
    return RetrievalResult(
        question,
        tuple(replace(hit, metadata=metadata.get(hit.doc_id, {})) for hit in hits),
        tuple(ordered),
        (),
        UsageSnapshot(),
        _stop_reason(terms, ordered),
    )


def _first_of_each_source(ordered: Sequence[RetrievedUnit]) -> list[RetrievedUnit]:
    """Each source document's first unit, in order."""
    seen: set[str] = set()
    kept = []
    for unit in ordered:
        if unit.doc_id not in seen:
            seen.add(unit.doc_id)
            kept.append(unit)
    return kept


def _stop_reason(terms: Sequence[str], ordered: Sequence[RetrievedUnit]) -> str:
    """Why the ranking ended, in the engine's words (so `results.why_empty` explains it)."""
    if not terms:
        return "no query expression"
    return "completed" if ordered else "no lexical match"
