"""Passage -> term -> passage: seed term selection (§4.5) and per-term retrieval (§4.6)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from .index import SQLiteIndex


@dataclass(frozen=True)
class Seed:
    """An expansion seed: a unit's id, its judge score, and its sentences' expansion units."""

    unit_id: int
    score: float
    sentences: Sequence[Sequence[str]]


@dataclass(frozen=True)
class ExpansionTerm:
    """A selected term (token or space-joined name phrase) and its expansion priority."""

    term: str
    priority: float


def idf(df: int, n_units: int) -> float:
    """BM25-style rarity: ln(1 + (N - df + 0.5) / (df + 0.5))."""
    return math.log(1.0 + (n_units - df + 0.5) / (df + 0.5))


def seed_weights(seeds: Sequence[Seed]) -> dict[int, float]:
    """w(d) = 0.5 + 0.5 * s(d) / max s over the seeds; 0.5 for all when every score is 0."""
    top = max((seed.score for seed in seeds), default=0.0)
    if top <= 0:
        return {seed.unit_id: 0.5 for seed in seeds}
    return {seed.unit_id: 0.5 + 0.5 * seed.score / top for seed in seeds}


def candidate_terms(seeds: Sequence[Seed], question_tokens: frozenset[str]) -> list[str]:
    """Distinct seed terms, minus those made only of question tokens (first-seen order)."""
    terms: dict[str, None] = {}
    for seed in seeds:
        for sentence in seed.sentences:
            for term in sentence:
                if not question_tokens.issuperset(term.split(" ")):
                    terms.setdefault(term)
    return list(terms)


def term_priorities(
    seeds: Sequence[Seed],
    question_tokens: frozenset[str],
    df: Mapping[str, int],
    n_units: int,
) -> dict[str, float]:
    """priority(t) = max over seeds of (1 + ln tf) * idf(t) * (1 + ctx(t, d)) * w(d).

    ``df`` must hold every candidate term and question token. Terms with df = 0 and terms
    made only of question tokens are skipped. ctx(t, d) is the largest, over the sentences
    of d holding t, sum of idf over the distinct question tokens in that sentence.
    """
    weights = seed_weights(seeds)
    question_idf = {q: idf(df.get(q, 0), n_units) for q in question_tokens}
    priorities: dict[str, float] = {}
    for seed in seeds:
        tf: Counter[str] = Counter()
        connection: dict[str, float] = {}
        for sentence in seed.sentences:
            tf.update(sentence)
            tokens = {token for term in sentence for token in term.split(" ")}
            ctx = sum(question_idf[q] for q in tokens & question_tokens)
            for term in sentence:
                connection[term] = max(connection.get(term, 0.0), ctx)
        for term, count in tf.items():
            if df.get(term, 0) == 0 or question_tokens.issuperset(term.split(" ")):
                continue
            value = (1 + math.log(count)) * idf(df[term], n_units)
            value *= (1 + connection[term]) * weights[seed.unit_id]
            priorities[term] = max(priorities.get(term, 0.0), value)
    return priorities


def top_terms(priorities: Mapping[str, float], limit: int) -> list[ExpansionTerm]:
    """The ``limit`` highest-priority terms; ties break by the term's text."""
    ranked = sorted(priorities.items(), key=lambda item: (-item[1], item[0]))
    return [ExpansionTerm(term, priority) for term, priority in ranked[:limit]]


def select_terms(
    index: SQLiteIndex, seeds: Sequence[Seed], question_tokens: frozenset[str], limit: int
) -> list[ExpansionTerm]:
    """Choose the expansion terms of a round from its seeds (one df query for all terms)."""
    terms = candidate_terms(seeds, question_tokens)
    if not terms:
        return []
    df = index.document_frequencies([*terms, *question_tokens])
    return top_terms(term_priorities(seeds, question_tokens, df, index.unit_count()), limit)


def interleave(lists: Sequence[Sequence[int]], limit: int) -> list[int]:
    """Round-robin by rank over the lists (in order), dropping duplicates, up to ``limit``."""
    picked: dict[int, None] = {}
    depth = max((len(items) for items in lists), default=0)
    for rank in range(depth):
        for items in lists:
            if rank < len(items) and items[rank] not in picked:
                picked[items[rank]] = None
                if len(picked) == limit:
                    return list(picked)
    return list(picked)


def expansion_candidates(
    index: SQLiteIndex,
    terms: Sequence[ExpansionTerm],
    query_terms: Sequence[str],
    excluded: set[int],
    allowed: set[int] | None,
    per_term_limit: int,
    limit: int,
) -> list[int]:
    """New units for a round: per term, unseen units holding it ranked by BM25 of the
    whole expression (all terms OR the question's terms), interleaved in priority order."""
    eligible = _eligible_members(index, [t.term for t in terms], excluded, allowed)
    scores = index.expression_scores([*eligible, *query_terms])
    lists = [
        sorted(members, key=lambda unit_id: (-scores.get(unit_id, 0.0), unit_id))[:per_term_limit]
        for members in eligible.values()
    ]
    return interleave(lists, limit)


def _eligible_members(
    index: SQLiteIndex, terms: Sequence[str], excluded: set[int], allowed: set[int] | None
) -> dict[str, list[int]]:
    """Unseen (and allowed) units per term, after the lexical repairs of §3.2.

    A term matching nothing is replaced by the title it is an accent alias of; a multiword
    name with no unseen match falls back to its longest sub-phrase that is a corpus title and
    has one. Keys are the terms actually used, in priority order.
    """
    repaired = index.repair_terms(terms)
    members = index.term_members(repaired)

    def usable(units: Sequence[int]) -> list[int]:
        return [u for u in units if u not in excluded and (allowed is None or u in allowed)]

    eligible: dict[str, list[int]] = {}
    for term in repaired:
        units = usable(members[term])
        if not units and " " in term:
            term, units = _title_subphrase(index, term, usable)
        if units and term not in eligible:
            eligible[term] = units
    return eligible


def _title_subphrase(
    index: SQLiteIndex, name: str, usable: Callable[[Sequence[int]], list[int]]
) -> tuple[str, list[int]]:
    """The longest sub-phrase (>= 2 words) of a name that is a title with unseen matches."""
    words = name.split(" ")
    titles = index.title_catalog().phrases
    options = [
        " ".join(words[start : start + size])
        for size in range(len(words) - 1, 1, -1)
        for start in range(len(words) - size + 1)
        if " ".join(words[start : start + size]) in titles
    ]
    if not options:
        return name, []
    members = index.term_members(options)
    for option in options:
        units = usable(members[option])
        if units:
            return option, units
    return name, []
