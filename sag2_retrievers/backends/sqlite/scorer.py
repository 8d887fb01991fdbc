"""FTS5's bm25 over postings arrays: top-k search, per-term expansion and pool scoring.

FTS5 scores a row for ``p1 OR p2 ...`` as 0.0 + c(p1) + c(p2) + ... in phrase order, each
c(p) = idf(p) * F(k1 + 1) / (F + k1 (1 - b + b |D| / avgdl)) (bm25.py). Here c(p) is computed
for all of a token's units at once from its postings (postings.py), and for a multiword
phrase by FTS5 itself (a one-phrase query returns exactly c(p)), then summed into a dense
array in the same order: the scores are FTS5's, bit for bit, and only the units of the
terms asked are ever touched. Ranking is score descending, then unit id.
"""

from __future__ import annotations

import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ..bm25 import K1, B, idf
from .fts import quote_term
from .postings import read_postings
from .schema import BM25_SCORE

Ints = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]
Contribution = tuple[Ints, Floats]

CACHE_POSTINGS = 4_000_000  # cached (unit, contribution) pairs, about 64 MB
PHRASE_SCORES_SQL = f"SELECT rowid, {BM25_SCORE} FROM units_fts WHERE units_fts MATCH ?"


@dataclass(frozen=True)
class Statistics:
    """What bm25 needs of the whole index at one generation: N, avgdl, |D| by unit id."""

    generation: str
    rows: int
    avgdl: float
    lengths: Ints


class ArrayScorer:
    """Per-term contributions for one index, cached per generation (thread-safe)."""

    def __init__(self, budget: int = CACHE_POSTINGS):
        self._budget = budget
        self._lock = threading.Lock()
        self._generation: str | None = None
        self._cache: OrderedDict[str, Contribution] = OrderedDict()
        self._cached = 0

    def search(
        self, connection: sqlite3.Connection, stats: Statistics, terms: Sequence[str], k: int
    ) -> list[tuple[int, float]]:
        """Top ``k`` (unit, bm25 of the OR of the distinct terms), best first, ties by id."""
        scores, touched = self._dense(connection, stats, list(dict.fromkeys(terms)))
        ids = np.flatnonzero(touched)
        return [(int(u), float(scores[u])) for u in top_k(ids, scores[ids], k)]

    def expand(
        self,
        connection: sqlite3.Connection,
        stats: Statistics,
        required: Sequence[str],
        scoring: Sequence[str],
        exclude: Collection[int],
        limit: int,
    ) -> dict[str, list[int]]:
        """Per required term: its top ``limit`` units not excluded, by bm25 of the OR of
        ``scoring`` (repeats count; 0.0 for a unit matching none of it), ties by unit id."""
        scores, _ = self._dense(connection, stats, list(scoring))
        blocked = np.zeros(len(scores), dtype=bool)
        excluded = np.fromiter((u for u in exclude if 0 <= u < len(scores)), dtype=np.int64)
        blocked[excluded] = True
        members = self.contributions(connection, stats, required)
        ranked = {}
        for term in required:
            units = members[term][0]
            units = units[~blocked[units]]
            ranked[term] = [int(u) for u in top_k(units, scores[units], limit)]
        return ranked

    def score_units(
        self,
        connection: sqlite3.Connection,
        stats: Statistics,
        terms: Sequence[str],
        unit_ids: Collection[int],
    ) -> dict[int, float]:
        """bm25 of the OR of the distinct terms for the given units matching any of them."""
        scores, touched = self._dense(connection, stats, list(dict.fromkeys(terms)))
        inside = [u for u in unit_ids if 0 <= u < len(scores)]
        return {int(u): float(scores[u]) for u in inside if touched[u]}

    def contributions(
        self, connection: sqlite3.Connection, stats: Statistics, terms: Sequence[str]
    ) -> dict[str, Contribution]:
        """Per distinct term, (its live unit ids, c(term) for each)."""
        with self._lock:
            if self._generation != stats.generation:
                self._generation, self._cache, self._cached = stats.generation, OrderedDict(), 0
            found = {t: self._cache[t] for t in dict.fromkeys(terms) if t in self._cache}
            for term in found:
                self._cache.move_to_end(term)
        missing = [t for t in dict.fromkeys(terms) if t not in found]
        tokens = [t for t in missing if " " not in t]
        postings = read_postings(connection, tokens) if tokens else {}
        computed = {t: token_contribution(stats, *postings[t]) for t in postings}
        for term in missing:
            if term not in computed:
                computed[term] = phrase_contribution(connection, term)
        self._remember(stats.generation, computed)
        return {**found, **computed}

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

    def _dense(
        self, connection: sqlite3.Connection, stats: Statistics, phrases: list[str]
    ) -> tuple[Floats, npt.NDArray[np.bool_]]:
        """Scores of the OR of ``phrases`` for every unit id (phrase order kept), and which
        units match any phrase."""
        parts = self.contributions(connection, stats, phrases)
        size = max([len(stats.lengths), *(int(u.max()) + 1 for u, _ in parts.values() if len(u))])
        scores = np.zeros(size, dtype=np.float64)
        touched = np.zeros(size, dtype=bool)
        for phrase in phrases:
            units, values = parts[phrase]
            scores[units] += values
            touched[units] = True
        return scores, touched


def token_contribution(stats: Statistics, units: Ints, freqs: Ints) -> Contribution:
    """c(token) for its live units, with FTS5's operations in FTS5's order."""
    inside = units < len(stats.lengths)
    units, freqs = units[inside], freqs[inside]
    lengths = stats.lengths[units]
    live = lengths > 0
    units, weighted, size = units[live], freqs[live].astype(np.float64), lengths[live]
    rarity = idf(stats.rows, len(units))
    factor = K1 * (1 - B + B * size.astype(np.float64) / stats.avgdl)
    return units, rarity * ((weighted * (K1 + 1.0)) / (weighted + factor))


def phrase_contribution(connection: sqlite3.Connection, phrase: str) -> Contribution:
    """c(phrase) from FTS5 itself: the bm25 of a one-phrase query is exactly that term."""
    rows = connection.execute(PHRASE_SCORES_SQL, (quote_term(phrase),)).fetchall()
    units = np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))
    values = np.fromiter((row[1] for row in rows), dtype=np.float64, count=len(rows))
    return units, values


def top_k(ids: Ints, scores: Floats, k: int) -> Ints:
    """The ``k`` ids with the highest scores, ties by smaller id, best first."""
    if len(ids) > k > 0:
        threshold = np.partition(scores, len(scores) - k)[len(scores) - k]
        keep = scores >= threshold
        ids, scores = ids[keep], scores[keep]
    return ids[np.lexsort((ids, -scores))][:k]
