"""Passage -> term -> passage: seed term selection (§4.5) and per-term retrieval (§4.6)."""

from __future__ import annotations

import heapq
import math
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from .filters import Filters
from .index_reads import TermIndex

PHRASE_BATCH = 8  # phrases whose df is counted per round trip in `select_terms`


@dataclass(frozen=True)
class Seed:
    """An expansion seed: a unit's id, its judge score, and its sentences' expansion units.

    ``context`` optionally gives each sentence's own words for the question-connection test
    (the "paper" profile: all words of the sentence, even those crossing a name's edge);
    by default they are the words of its units.
    """

    unit_id: int
    score: float
    sentences: Sequence[Sequence[str]]
    context: Sequence[frozenset[str]] | None = None


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


def term_bases(
    seeds: Sequence[Seed], question_tokens: frozenset[str], question_idf: Mapping[str, float]
) -> dict[str, float]:
    """The df-free factor of each term's priority: max over seeds of (1 + ln tf)(1 + ctx) w.

    ctx(t, d) is the largest, over the sentences of d holding t, sum of idf over the distinct
    question tokens in that sentence. Terms made only of question tokens are left out.
    """
    weights = seed_weights(seeds)
    bases: dict[str, float] = {}
    for seed in seeds:
        tf: Counter[str] = Counter()
        connection: dict[str, float] = {}
        for position, sentence in enumerate(seed.sentences):
            tf.update(sentence)
            if seed.context is None:
                tokens = {token for term in sentence for token in term.split(" ")}
            else:
                tokens = set(seed.context[position])
            ctx = sum(question_idf[q] for q in tokens & question_tokens)
            for term in sentence:
                connection[term] = max(connection.get(term, 0.0), ctx)
        for term, count in tf.items():
            if question_tokens.issuperset(term.split(" ")):
                continue
            value = (1 + math.log(count)) * (1 + connection[term]) * weights[seed.unit_id]
            bases[term] = max(bases.get(term, 0.0), value)
    return bases


def term_priorities(
    seeds: Sequence[Seed],
    question_tokens: frozenset[str],
    df: Mapping[str, int],
    n_units: int,
) -> dict[str, float]:
    """priority(t) = max over seeds of (1 + ln tf) * idf(t) * (1 + ctx(t, d)) * w(d).

    ``df`` must hold every candidate term and question token; terms with df = 0 are skipped.
    """
    question_idf = {q: idf(df.get(q, 0), n_units) for q in question_tokens}
    bases = term_bases(seeds, question_tokens, question_idf)
    return {t: b * idf(df[t], n_units) for t, b in bases.items() if df.get(t, 0) > 0}


def top_terms(priorities: Mapping[str, float], limit: int) -> list[ExpansionTerm]:
    """The ``limit`` highest-priority terms; ties break by the term's text."""
    ranked = sorted(priorities.items(), key=lambda item: (-item[1], item[0]))
    return [ExpansionTerm(term, priority) for term, priority in ranked[:limit]]


def select_terms(
    index: TermIndex,
    seeds: Sequence[Seed],
    question_tokens: frozenset[str],
    limit: int,
    n_units: int | None = None,
) -> list[ExpansionTerm]:
    """Choose the expansion terms of a round from its seeds.

    Token df comes from one table lookup. Phrase df needs an FTS5 query each, so a phrase is
    looked up only if it could still enter the top ``limit``: its priority cannot exceed its
    base times the idf of df = 1 (it occurs in its seed). Phrases are looked up a few at a
    time, highest ceiling first, and the cut-off (the ``limit``-th priority so far) only
    rises, so the phrases left once it passes their ceiling are skipped without changing the
    result. ``n_units`` (N) may be passed by a caller that already counted the units.
    """
    n_units = index.unit_count() if n_units is None else n_units
    candidates = candidate_terms(seeds, question_tokens)
    tokens = [t for t in candidates if " " not in t]
    df = index.document_frequencies([*tokens, *question_tokens])
    question_idf = {q: idf(df.get(q, 0), n_units) for q in question_tokens}
    bases = term_bases(seeds, question_tokens, question_idf)
    priorities = {t: bases[t] * idf(df[t], n_units) for t in tokens if df.get(t, 0) > 0}
    ceiling = idf(1, n_units)
    phrases = sorted((t for t in candidates if " " in t), key=lambda t: -bases[t])
    for start in range(0, len(phrases), PHRASE_BATCH):
        cutoff = _cutoff(priorities, limit)
        batch = [t for t in phrases[start : start + PHRASE_BATCH] if bases[t] * ceiling >= cutoff]
        if not batch:
            break
        phrase_df = index.document_frequencies(batch)
        priorities.update({t: bases[t] * idf(n, n_units) for t, n in phrase_df.items() if n > 0})
    return top_terms(priorities, limit)


def _cutoff(priorities: Mapping[str, float], limit: int) -> float:
    """The ``limit``-th highest priority, or 0.0 while there are fewer."""
    if len(priorities) < limit:
        return 0.0
    return heapq.nlargest(limit, priorities.values())[-1]


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
    index: TermIndex,
    terms: Sequence[ExpansionTerm],
    query_terms: Sequence[str],
    excluded: Collection[int],
    filters: Filters | None,
    per_term_limit: int,
    limit: int,
) -> list[int]:
    """New units for a round: per term, unseen units holding it, ranked by BM25 of the whole
    expression (the question's terms OR all terms), interleaved in term-priority order.

    The backend ranks each term's units and returns only its top ``per_term_limit``. Usually
    every name has unseen matches and one call does; a repaired name changes the scoring
    expression, so the terms are then ranked again.
    """
    names = [t.term for t in terms]
    ranked = index.expand(names, [*query_terms, *names], excluded, per_term_limit, filters=filters)
    unmatched = {term for term in names if " " in term and not ranked[term]}
    used = _repaired_terms(index, names, unmatched, excluded, filters) if unmatched else names
    if used != names:
        ranked = index.expand(
            used, [*query_terms, *used], excluded, per_term_limit, filters=filters
        )
    return interleave([ranked[term] for term in used if ranked[term]], limit)


def _repaired_terms(
    index: TermIndex,
    terms: Sequence[str],
    unmatched: set[str],
    excluded: Collection[int],
    filters: Filters | None,
) -> list[str]:
    """The terms to expand with, after the lexical repairs of §3.2, in priority order.

    A multiword name with no unseen match (``unmatched``) falls back to its longest
    sub-phrase that is a corpus title and has one. (The accent-alias repair of §3.2 cannot
    apply here: a selected term has body df > 0, so it always matches.) A term repaired into
    one already used is dropped.
    """
    used = [
        _title_subphrase(index, term, excluded, filters) if term in unmatched else term
        for term in terms
    ]
    return list(dict.fromkeys(used))


def _with_unseen_match(
    index: TermIndex,
    terms: Sequence[str],
    excluded: Collection[int],
    filters: Filters | None,
) -> set[str]:
    """The terms held by at least one unit that is not excluded and passes the filters."""
    if not terms:
        return set()
    found = index.expand(terms, terms, excluded, 1, filters=filters)
    return {term for term, units in found.items() if units}


def _title_subphrase(
    index: TermIndex, name: str, excluded: Collection[int], filters: Filters | None
) -> str:
    """The longest sub-phrase (>= 2 words) of a name that is a title with unseen matches."""
    words = name.split(" ")
    spans = [
        " ".join(words[start : start + size])
        for size in range(len(words) - 1, 1, -1)
        for start in range(len(words) - size + 1)
    ]
    titles = index.title_phrases(spans)
    options = [span for span in spans if span in titles]
    matched = _with_unseen_match(index, options, excluded, filters)
    return next((option for option in options if option in matched), name)
