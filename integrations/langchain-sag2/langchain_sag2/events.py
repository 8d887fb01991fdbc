"""What a retrieval tells LangChain's callbacks: one ``sag2_round`` custom event and text line
per round as it is scored, then one ``sag2_result`` event and line for the outcome."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from sag2_retrievers import RetrievalResult, RoundTrace

ROUND_EVENT = "sag2_round"
RESULT_EVENT = "sag2_result"

Report = tuple[str, str, dict[str, Any]]


def result_report(result: RetrievalResult) -> Report:
    """The event and text line describing the retrieval's outcome."""
    outcome = {
        "stop_reason": result.stop_reason,
        "degraded": result.degraded,
        "judgments": result.judgments,
        "documents": [hit.doc_id for hit in result.hits],
        "usage": asdict(result.usage),
    }
    text = (
        f"SAG2 finished ({result.stop_reason}): {len(result.hits)} documents, "
        f"{result.judgments} judgments\n"
    )
    return RESULT_EVENT, text, outcome


def round_report(trace: RoundTrace, sources: Mapping[int, str]) -> Report:
    """The event and text line describing one round of the trace."""
    data = {
        "round": trace.round,
        "seeds": _located(trace.seeds, sources),
        "terms": [{"term": term, "priority": priority} for term, priority in trace.terms],
        "new_candidates": _located(trace.new_candidates, sources),
        "pool_size": trace.pool_size,
        "context_size": trace.context_size,
        "judgments": trace.judgments,
        "local_seconds": trace.local_seconds,
        "judge_seconds": trace.judge_seconds,
    }
    parts = [f"new candidates: {len(trace.new_candidates)}", f"judgments: {trace.judgments}"]
    if trace.seeds:
        seed_docs = dict.fromkeys(sources.get(u, "?") for u in trace.seeds)
        terms = ", ".join(term for term, _ in trace.terms)
        parts[:0] = [f"seeds from {', '.join(seed_docs)}", f"terms: {terms}"]
    return ROUND_EVENT, f"SAG2 round {trace.round}: {'; '.join(parts)}\n", data


def _located(unit_ids: Sequence[int], sources: Mapping[int, str]) -> list[dict[str, Any]]:
    """Unit ids paired with their source document ids (None if the unit is gone)."""
    return [{"unit_id": unit_id, "doc_id": sources.get(unit_id)} for unit_id in unit_ids]
