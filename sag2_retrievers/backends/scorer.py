"""FTS5's bm25 over postings arrays: top-k search, per-term expansion and pool scoring.

FTS5 scores a row for ``p1 OR p2 ...`` as 0.0 + c(p1) + c(p2) + ... in phrase order, each
c(p) = idf(p) * F(k1 + 1) / (F + k1 (1 - b + b |D| / avgdl)) (bm25.py). Here c(p) is computed
for all of a token's units at once from its postings, and for a multiword phrase by the
backend's full-text index (a one-phrase query returns exactly c(p)), then summed into a dense
array in the same order: the scores are FTS5's, bit for bit, and only the units of the terms
asked are ever touched. Ranking is score descending, then document id and character offset:
equal scores are ordered by what the units are, never by the ids writes gave them, so identical
documents rank alike whatever the index's history (keys are read for tied units only).

Nothing here knows SQL: a backend hands the scorer a `PostingsSource` and a `Statistics`.
Arrays are indexed by a unit's slot (its rank among the live unit ids), so every per-question
array is as long as the live units, however high ids have grown through deletes.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from ..bm25 import K1, B, idf

Ints = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]
Flags = npt.NDArray[np.bool_]
# A term's live units as slots, and c(term) for each.
Contribution = tuple[Ints, Floats]
# Given slots with equal scores, each one's rank in content order (document id, offset).
TieRanks = Callable[[Ints], Ints]

CACHE_POSTINGS = 4_000_000  # cached (unit, contribution) pairs, about 64 MB
# Dense score arrays kept for reuse: a question's terms are scored by search, then by pool
# scoring, then as the prefix of each expansion's scoring terms.
CACHE_DENSE = 4
# Past this many ids written per live unit (long churn), no id -> slot table is kept.
SPARSE_IDS = 4


class PostingsSource(Protocol):
    """What a backend reads for the scorer, inside one consistent snapshot."""

    def postings(
        self, tokens: Sequence[str], phrases: Sequence[str]
    ) -> dict[str, tuple[Ints, Ints]]:
        """(unit ids, weighted frequency F), dead units included, per token found and per
        multiword phrase the backend has postings for (PostgreSQL does, from positions; all
        in one read)."""

    def phrase_scores(self, phrase: str) -> tuple[Ints, Floats]:
        """(unit ids, c(phrase)) of a multiword phrase given no postings, from the
        full-text index."""

    def content_keys(self, unit_ids: Ints) -> list[tuple[str, int]]:
        """(document id, character offset) of each unit, in the order given."""


@dataclass(frozen=True)
class Statistics:
    """What bm25 needs of the whole index at one generation: N, avgdl and the live units'
    ids (ascending) with their |D| > 0; ``slots`` maps an id to its slot (-1 for none), or
    is None when ids are too sparse for a table (then ids are found by binary search)."""

    generation: str
    rows: int
    avgdl: float
    ids: Ints
    lengths: Ints
    slots: Ints | None

    @classmethod
    def of_units(cls, generation: str, rows: int, ids: Ints, lengths: Ints) -> Statistics:
        """Statistics from every unit's (id, |D|), N counted by the backend; |D| = 0 is dead."""
        top = int(ids.max()) + 1 if len(ids) else 0
        live = lengths > 0
        ids, lengths = ids[live], lengths[live]
        order = np.argsort(ids, kind="stable")
        ids, lengths = ids[order], lengths[order]
        slots = None
        if top <= SPARSE_IDS * max(len(ids), 1):
            # Every id written has a place, dead ones too, so postings need no bounds check.
            slots = np.full(top, -1, dtype=np.int64)
            slots[ids] = np.arange(len(ids), dtype=np.int64)
        return cls(generation, rows, int(lengths.sum()) / max(rows, 1), ids, lengths, slots)

    def slots_of(self, unit_ids: Ints) -> Ints:
        """Each id's slot, -1 for an id that is dead or was never used."""
        if self.slots is None:
            found = np.searchsorted(self.ids, unit_ids).clip(max=max(len(self.ids) - 1, 0))
            hit = self.ids[found] == unit_ids if len(self.ids) else np.zeros(len(unit_ids), bool)
            return np.where(hit, found, -1)
        table = self.slots
        if len(unit_ids) and unit_ids.min() >= 0 and unit_ids.max() < len(table):
            inside: Ints = table[unit_ids]
            return inside
        within = (unit_ids >= 0) & (unit_ids < len(table))
        found = np.full(len(unit_ids), -1, dtype=np.int64)
        found[within] = table[unit_ids[within]]
        return found


class ArrayScorer:
    """Per-term contributions for one index, cached per generation (thread-safe)."""

    def __init__(self, budget: int = CACHE_POSTINGS):
        self._budget = budget
        self._lock = threading.Lock()
        self._generation: str | None = None
        self._cache: OrderedDict[str, Contribution] = OrderedDict()
        self._cached = 0
        self._dense_cache: OrderedDict[tuple[str, ...], tuple[Floats, Flags]] = OrderedDict()

    def search(
        self, source: PostingsSource, stats: Statistics, terms: Sequence[str], k: int
    ) -> list[tuple[int, float]]:
        """Top ``k`` (unit, bm25 of the OR of the distinct terms), best first, ties by
        document id and offset."""
        scores, touched = self._dense(source, stats, list(dict.fromkeys(terms)))
        slots = np.flatnonzero(touched)
        best = top_k(slots, scores[slots], k, _tie_ranks(source, stats))
        return [(int(u), float(s)) for u, s in zip(stats.ids[best], scores[best], strict=True)]

    def ranking(
        self, source: PostingsSource, stats: Statistics, terms: Sequence[str], size: int
    ) -> Iterator[tuple[Ints, Floats]]:
        """Every unit matching the OR of the distinct terms with its score, best first (ties
        by document id and offset), in parts of about ``size``: what a backend filters
        itself walks down, reading tied units' keys only for the parts it walks."""
        scores, touched = self._dense(source, stats, list(dict.fromkeys(terms)))
        slots = np.flatnonzero(touched)
        slots = slots[np.argsort(-scores[slots], kind="stable")]
        descending = -scores[slots]
        ties = _tie_ranks(source, stats)
        start = 0
        while start < len(slots):
            end = min(start + size, len(slots))
            # A part ends after the last unit sharing its last score, so ties stay together.
            end = int(np.searchsorted(descending, descending[end - 1], side="right"))
            part = ordered(slots[start:end], scores[slots[start:end]], ties)
            yield stats.ids[part], scores[part]
            start = end

    def expand(
        self,
        source: PostingsSource,
        stats: Statistics,
        required: Sequence[str],
        scoring: Sequence[str],
        exclude: Collection[int],
        limit: int,
    ) -> dict[str, list[int]]:
        """Per required term: its top ``limit`` units not excluded, by bm25 of the OR of
        ``scoring`` (repeats count; 0.0 for a unit matching none of it), ties by document id
        and offset."""
        scores, _ = self._dense(source, stats, list(scoring))
        blocked = np.zeros(len(scores), dtype=bool)
        excluded = stats.slots_of(np.fromiter(exclude, dtype=np.int64, count=len(exclude)))
        blocked[excluded[excluded >= 0]] = True
        members = self.contributions(source, stats, required)
        ties = _tie_ranks(source, stats)
        ranked = {}
        for term in required:
            slots = members[term][0]
            slots = slots[~blocked[slots]]
            ranked[term] = stats.ids[top_k(slots, scores[slots], limit, ties)].tolist()
        return ranked

    def score_units(
        self,
        source: PostingsSource,
        stats: Statistics,
        terms: Sequence[str],
        unit_ids: Collection[int],
    ) -> dict[int, float]:
        """bm25 of the OR of the distinct terms for the given units matching any of them."""
        scores, touched = self._dense(source, stats, list(dict.fromkeys(terms)))
        ids = np.fromiter(unit_ids, dtype=np.int64, count=len(unit_ids))
        slots = stats.slots_of(ids)
        hit = slots >= 0
        hit[hit] = touched[slots[hit]]
        return dict(zip(ids[hit].tolist(), scores[slots[hit]].tolist(), strict=True))

    def contributions(
        self, source: PostingsSource, stats: Statistics, terms: Sequence[str]
    ) -> dict[str, Contribution]:
        """Per distinct term, (its live units' slots, c(term) for each)."""
        with self._lock:
            self._check_generation(stats.generation)
            found = {t: self._cache[t] for t in dict.fromkeys(terms) if t in self._cache}
            for term in found:
                self._cache.move_to_end(term)
        missing = [t for t in dict.fromkeys(terms) if t not in found]
        tokens = [t for t in missing if " " not in t]
        phrases = [t for t in missing if " " in t]
        postings = source.postings(tokens, phrases) if missing else {}
        computed = {t: token_contribution(stats, *postings[t]) for t in postings}
        for term in missing:
            if term not in computed:
                units, values = source.phrase_scores(term)
                computed[term] = _in_slots(stats, units, values)
        self._remember(stats.generation, computed)
        return {**found, **computed}

    def _check_generation(self, generation: str) -> None:
        """Drop every cached array of an older generation (call with the lock)."""
        if self._generation != generation:
            self._generation, self._cache, self._cached = generation, OrderedDict(), 0
            self._dense_cache = OrderedDict()

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
        self, source: PostingsSource, stats: Statistics, phrases: list[str]
    ) -> tuple[Floats, Flags]:
        """Scores of the OR of ``phrases`` for every slot (phrase order kept), and which
        slots match any phrase; read-only, and reused for a later call they are a prefix of."""
        key = tuple(phrases)
        start, base = self._dense_prefix(stats.generation, key)
        if start == len(key) and base is not None:
            return base
        parts = self.contributions(source, stats, phrases[start:])
        if base is None:
            scores = np.zeros(len(stats.ids), dtype=np.float64)
            touched = np.zeros(len(stats.ids), dtype=bool)
        else:
            scores, touched = base[0].copy(), base[1].copy()
        for phrase in phrases[start:]:
            slots, values = parts[phrase]
            scores[slots] += values
            touched[slots] = True
        scores.flags.writeable = touched.flags.writeable = False
        with self._lock:
            if self._generation == stats.generation:
                self._dense_cache[key] = (scores, touched)
                while len(self._dense_cache) > CACHE_DENSE:
                    self._dense_cache.popitem(last=False)
        return scores, touched

    def _dense_prefix(
        self, generation: str, key: tuple[str, ...]
    ) -> tuple[int, tuple[Floats, Flags] | None]:
        """The longest cached dense scores whose phrases begin ``key``, and their count."""
        with self._lock:
            self._check_generation(generation)
            best: tuple[str, ...] = ()
            for cached in self._dense_cache:
                if len(best) < len(cached) <= len(key) and key[: len(cached)] == cached:
                    best = cached
            if not best:
                return 0, None
            self._dense_cache.move_to_end(best)
            return len(best), self._dense_cache[best]


def token_contribution(stats: Statistics, units: Ints, freqs: Ints) -> Contribution:
    """c(token) for its live units, with FTS5's operations in FTS5's order."""
    slots = stats.slots_of(units)
    live = slots >= 0
    slots, weighted = slots[live], freqs[live].astype(np.float64)
    size = stats.lengths[slots]
    rarity = idf(stats.rows, len(slots))
    factor = K1 * (1 - B + B * size.astype(np.float64) / stats.avgdl)
    return slots, rarity * ((weighted * (K1 + 1.0)) / (weighted + factor))


def _in_slots(stats: Statistics, units: Ints, values: Floats) -> Contribution:
    """A contribution given by unit ids, as slots (units without one dropped)."""
    slots = stats.slots_of(units)
    live = slots >= 0
    return slots[live], values[live]


def top_k(slots: Ints, scores: Floats, k: int, ties: TieRanks) -> Ints:
    """The ``k`` slots with the highest scores, best first, ties in content order (every
    unit tied with the k-th is weighed, so which of them make the cut is content-decided)."""
    if len(slots) > k > 0:
        threshold = np.partition(scores, len(scores) - k)[len(scores) - k]
        keep = scores >= threshold
        slots, scores = slots[keep], scores[keep]
    return ordered(slots, scores, ties)[:k]


def ordered(slots: Ints, scores: Floats, ties: TieRanks) -> Ints:
    """Slots by score descending, equal scores in content order (asked of tied slots only)."""
    order = np.argsort(-scores, kind="stable")
    slots, scores = slots[order], scores[order]
    same = scores[1:] == scores[:-1]
    tied = np.zeros(len(slots), dtype=bool)
    tied[1:] |= same
    tied[:-1] |= same
    if not tied.any():
        return slots
    content = np.zeros(len(slots), dtype=np.int64)
    content[tied] = ties(slots[tied])
    return slots[np.lexsort((content, -scores))]


def content_ranks(keys: Sequence[tuple[str, int]]) -> Ints:
    """Each key's position when the keys are sorted (document id, then offset)."""
    ranks = np.empty(len(keys), dtype=np.int64)
    ranks[sorted(range(len(keys)), key=keys.__getitem__)] = np.arange(len(keys))
    return ranks


def _tie_ranks(source: PostingsSource, stats: Statistics) -> TieRanks:
    """Content ranks of slots, read from ``source`` for the slots asked."""
    return lambda slots: content_ranks(source.content_keys(stats.ids[slots]))
