"""FTS5's bm25 over PostgreSQL's posting blocks, with SQLite's scorer functions.

A term's contribution c(term) to all its live units comes from `token_contribution` (the
function SQLite's scorer uses): for a token from its posting blocks, for a multiword phrase
from its instances per column, found from its tokens' word positions in the same read. Scores are
summed in phrase order into a dense array and cut by `top_k`, as in SQLite, so both backends
give the same bits. Contributions are cached per index generation.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ..sqlite.scorer import CACHE_POSTINGS, Contribution, Statistics, token_contribution, top_k
from .blocks import Positional, Segment, decode_blocks
from .postings import BODY, COLUMN_SHIFT

# A phrase start is keyed unit << _UNIT_SHIFT | coded position (column bits included).
_UNIT_SHIFT = COLUMN_SHIFT + 2

Ints = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]
Rows = list[tuple[Any, ...]]
# (units, F, body instances) of a phrase's live units: what scoring and df both need.
PhraseHits = tuple[Ints, Ints, Ints]


@dataclass(frozen=True)
class Generation:
    """One index generation as readers see it: bm25's statistics and the segment headers."""

    stats: Statistics
    segments: dict[int, Segment]


# The one read the scorer needs: the block rows of some terms, positions only for others.
BlockRead = Callable[[list[str], list[str]], Rows]


class BlockScorer:
    """Per-term contributions for one PostgreSQL index, cached per generation (thread-safe)."""

    def __init__(self, read: BlockRead, budget: int = CACHE_POSTINGS):
        self._read = read
        self._budget = budget
        self._lock = threading.Lock()
        self._generation: str | None = None
        self._cache: OrderedDict[str, Contribution] = OrderedDict()
        self._cached = 0
        self._phrase_df: dict[str, tuple[int, int]] = {}

    def dense(self, state: Generation, phrases: Sequence[str]) -> tuple[Floats, npt.NDArray[Any]]:
        """Scores of the OR of ``phrases`` for every unit id (phrase order kept, repeats
        count), and which units match any phrase."""
        parts = self.contributions(state, phrases)
        stats = state.stats
        size = max([len(stats.lengths), *(int(u.max()) + 1 for u, _ in parts.values() if len(u))])
        scores = np.zeros(size, dtype=np.float64)
        touched = np.zeros(size, dtype=bool)
        for phrase in phrases:
            units, values = parts[phrase]
            scores[units] += values
            touched[units] = True
        return scores, touched

    def ranking(self, state: Generation, terms: Sequence[str]) -> tuple[Ints, Floats]:
        """Every unit matching the OR of the distinct terms, best first (ties by id), and
        the scores by unit id."""
        scores, touched = self.dense(state, list(dict.fromkeys(terms)))
        ids = np.flatnonzero(touched)
        return ids[np.lexsort((ids, -scores[ids]))], scores

    def search(self, state: Generation, terms: Sequence[str], k: int) -> list[tuple[int, float]]:
        """Top ``k`` (unit, bm25 of the OR of the distinct terms), best first, ties by id."""
        scores, touched = self.dense(state, list(dict.fromkeys(terms)))
        ids = np.flatnonzero(touched)
        return [(int(u), float(scores[u])) for u in top_k(ids, scores[ids], k)]

    def expand(
        self,
        state: Generation,
        required: Sequence[str],
        scoring: Sequence[str],
        exclude: Collection[int],
        limit: int,
    ) -> dict[str, list[int]]:
        """Per required term: its top ``limit`` units not excluded, by bm25 of the OR of
        ``scoring`` (repeats count; 0.0 for a unit matching none of it), ties by unit id."""
        scores, _ = self.dense(state, scoring)
        blocked = np.zeros(len(scores), dtype=bool)
        excluded = np.fromiter((u for u in exclude if 0 <= u < len(scores)), dtype=np.int64)
        blocked[excluded] = True
        members = self.contributions(state, required)
        ranked = {}
        for term in required:
            units = members[term][0]
            units = units[units < len(scores)]
            units = units[~blocked[units]]
            ranked[term] = [int(u) for u in top_k(units, scores[units], limit)]
        return ranked

    def score_units(
        self, state: Generation, terms: Sequence[str], unit_ids: Collection[int]
    ) -> dict[int, float]:
        """bm25 of the OR of the distinct terms for the given units matching any of them."""
        scores, touched = self.dense(state, list(dict.fromkeys(terms)))
        inside = [u for u in unit_ids if 0 <= u < len(scores)]
        return {int(u): float(scores[u]) for u in inside if touched[u]}

    def contributions(self, state: Generation, terms: Sequence[str]) -> dict[str, Contribution]:
        """Per distinct term, (its live unit ids, c(term) for each): cached ones, then one
        read of the missing tokens' blocks and of the missing phrases' words' positions."""
        stats = state.stats
        found = self._cached_terms(stats.generation, terms)
        missing = [t for t in dict.fromkeys(terms) if t not in found]
        phrases = [t for t in missing if " " in t]
        postings, positional = self._blocks(state, [t for t in missing if " " not in t], phrases)
        computed = {t: token_contribution(stats, *pair) for t, pair in postings.items()}
        hits = phrase_hits(stats, phrases, positional)
        computed.update(self._phrases_seen(stats, hits))
        self._remember(stats.generation, computed)
        return {**found, **computed}

    def phrase_frequencies(
        self, state: Generation, phrases: Sequence[str]
    ) -> dict[str, tuple[int, int]]:
        """Per multiword phrase, (units holding it in any field, in the body): remembered
        for this generation, else from one read of its words' positions."""
        generation = state.stats.generation
        with self._lock:
            self._align(generation)
            known = {p: self._phrase_df[p] for p in phrases if p in self._phrase_df}
        missing = [p for p in dict.fromkeys(phrases) if p not in known]
        if missing:
            hits = phrase_hits(state.stats, missing, self._blocks(state, [], missing)[1])
            self._remember(generation, self._phrases_seen(state.stats, hits))
            known.update({p: _df(hit) for p, hit in hits.items()})
        return known

    def _phrases_seen(
        self, stats: Statistics, hits: dict[str, PhraseHits]
    ) -> dict[str, Contribution]:
        """Each phrase's contribution from its hits; its document frequencies remembered."""
        with self._lock:
            if self._generation == stats.generation:
                self._phrase_df.update({phrase: _df(hit) for phrase, hit in hits.items()})
        return {p: token_contribution(stats, units, freqs) for p, (units, freqs, _) in hits.items()}

    def _blocks(
        self, state: Generation, tokens: list[str], phrases: Sequence[str]
    ) -> tuple[dict[str, tuple[Ints, Ints]], dict[str, Positional]]:
        """Each token's (units, F) and each phrase word's positions, in one read (a term
        without blocks has no units)."""
        words = list(dict.fromkeys(w for phrase in phrases for w in phrase.split()))
        asked = list(dict.fromkeys([*tokens, *words]))
        rows = self._read(asked, words) if asked else []
        postings, positional = decode_blocks(state.segments, rows)
        empty = np.zeros(0, dtype=np.int64)
        return (
            {token: postings.get(token, (empty, empty)) for token in tokens},
            {word: positional.get(word, (empty, empty, empty)) for word in words},
        )

    def _cached_terms(self, generation: str, terms: Sequence[str]) -> dict[str, Contribution]:
        """The cached contributions of ``terms`` at this generation (the cache is emptied
        when the generation changed)."""
        with self._lock:
            self._align(generation)
            found = {t: self._cache[t] for t in dict.fromkeys(terms) if t in self._cache}
            for term in found:
                self._cache.move_to_end(term)
        return found

    def _align(self, generation: str) -> None:
        """Empty the caches when the index moved to another generation (hold the lock)."""
        if self._generation != generation:
            self._generation, self._cache, self._cached = generation, OrderedDict(), 0
            self._phrase_df = {}

    def _remember(self, generation: str, computed: dict[str, Contribution]) -> None:
        """Keep new contributions, dropping the least recently used beyond the budget."""
        with self._lock:
            if self._generation != generation:
                return
            for term, value in computed.items():
                if term not in self._cache and len(value[0]) <= self._budget:
                    self._cache[term] = value
                    self._cached += len(value[0])
            while self._cached > self._budget:
                _, (units, _) = self._cache.popitem(last=False)
                self._cached -= len(units)


def phrase_hits(
    stats: Statistics, phrases: Sequence[str], positional: dict[str, Positional]
) -> dict[str, PhraseHits]:
    """Per multiword phrase, its live units with F and body instances, from its words'
    positions: a start matches where word j sits j positions after it."""
    hits = {}
    for phrase in phrases:
        starts: Ints | None = None
        for offset, word in enumerate(phrase.split()):
            units, counts, codes = positional[word]
            keys = (np.repeat(units, counts) << _UNIT_SHIFT | codes) - offset
            starts = keys if starts is None else np.intersect1d(starts, keys, assume_unique=True)
        found = starts if starts is not None else np.zeros(0, dtype=np.int64)
        units = found >> _UNIT_SHIFT
        live = _live(stats, units)
        found, units = found[live], units[live]
        in_body = (found >> COLUMN_SHIFT & 3) == BODY
        ids, place = np.unique(units, return_inverse=True)
        weighted = np.bincount(place, weights=np.where(in_body, 1, 2), minlength=len(ids))
        body = np.bincount(place, weights=in_body, minlength=len(ids))
        hits[phrase] = (ids, weighted.astype(np.int64), body.astype(np.int64))
    return hits


def _live(stats: Statistics, units: Ints) -> npt.NDArray[np.bool_]:
    """Which of ``units`` are live at this generation (|D| > 0)."""
    inside = units < len(stats.lengths)
    live = np.zeros(len(units), dtype=bool)
    live[inside] = stats.lengths[units[inside]] > 0
    return live


def _df(hits: PhraseHits) -> tuple[int, int]:
    """A phrase's units in any field and in the body, from its hits."""
    return len(hits[0]), int(np.count_nonzero(hits[2]))
