"""A retrieval's result: the top units, diversified, at most so many per source document."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

from ..analysis.paper.diversity import diversity_words, paper_dpp_order, word_vectors
from ..analysis.sag2.diversity import cosine_matrix, greedy_dpp_order, tfidf_vectors
from ..backends.base import LexicalBackend
from ..config import SAG2Config
from ..documents import Unit
from ..judges.base import UsageSnapshot
from ..results import RetrievalResult, RetrievedUnit
from .state import Retrieval


def finish(
    index: LexicalBackend,
    config: SAG2Config,
    state: Retrieval,
    top_k: int,
    usage: UsageSnapshot,
    degraded: bool,
) -> RetrievalResult:
    """Keep the top units, diversify the first ones, and keep at most
    ``units_per_document`` units of each source document (1: unique sources)."""
    if degraded or not state.ranking:
        ranked = [(u, s) for u, s in state.lexical][: config.keep]
    else:
        ranking = diversified(index, config, state, state.ranking[: config.keep])
        ranked = [(u, state.scores[u]) for u in ranking]
    # Read again: the output reflects the index as it is now, without units deleted by a
    # concurrent writer while the judge was working.
    units = index.units(u for u, _ in ranked)
    ordered = [
        _retrieved(units[u], score, state.found.get(u, 0), rank)
        for rank, (u, score) in enumerate(ranked, start=1)
        if u in units
    ]
    hits = per_source(ordered, config.units_per_document)[:top_k]
    metadata = index.metadata(hit.doc_id for hit in hits)
    hits = [replace(hit, metadata=metadata.get(hit.doc_id, {})) for hit in hits]
    return RetrievalResult(
        state.question,
        tuple(hits),
        tuple(ordered),
        tuple(state.trace),
        usage,
        "judge failed; lexical order" if degraded else state.stop_reason,
        degraded,
    )


def diversified(
    index: LexicalBackend, config: SAG2Config, state: Retrieval, ranking: list[int]
) -> list[int]:
    """Reorder the first ``diversity_top`` units by greedy DPP; the rest keep their order.

    "sag2" vectors use the stored analyzer tokens with unit-level df over the index;
    "paper" ones follow the port (`analysis/paper/diversity.py`).
    """
    top = ranking[: config.diversity_top]
    if len(top) <= 2:
        return ranking
    if index.settings.analyzer_profile == "paper":
        return _paper_diversified(index, state, top) + ranking[len(top) :]
    sentences = index.expansion_units(top)
    token_lists = [
        [tok for s in sentences.get(u, []) for term in s for tok in term.split()] for u in top
    ]
    df = index.document_frequencies({t for tokens in token_lists for t in tokens})
    vectors = tfidf_vectors(token_lists, df, state.n_units)
    quality = [state.scores[u] for u in top]
    order = greedy_dpp_order(quality, cosine_matrix(vectors))
    return [top[i] for i in order] + ranking[len(top) :]


def _paper_diversified(index: LexicalBackend, state: Retrieval, top: list[int]) -> list[int]:
    """The port's diversity step: body words, idf over the corpus's documents."""
    bodies = [state.units[u].body for u in top]
    words = {w for body in bodies for w in diversity_words(body)}
    documents, df = index.word_document_frequencies(words)
    order = paper_dpp_order([state.scores[u] for u in top], word_vectors(bodies, df, documents))
    return [top[i] for i in order]


def _retrieved(unit: Unit, score: float, round_found: int, rank: int) -> RetrievedUnit:
    """A result record for a unit."""
    return RetrievedUnit(
        unit.unit_id,
        unit.doc_id,
        unit.title,
        unit.body,
        score,
        round_found,
        rank,
        unit.char_start,
        unit.char_end,
    )


def per_source(ordered: Sequence[RetrievedUnit], limit: int) -> list[RetrievedUnit]:
    """The first ``limit`` units of each source document, in order."""
    taken: Counter[str] = Counter()
    kept = []
    for hit in ordered:
        if taken[hit.doc_id] < limit:
            taken[hit.doc_id] += 1
            kept.append(hit)
    return kept
