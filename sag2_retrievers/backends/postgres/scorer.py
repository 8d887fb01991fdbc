"""PostgreSQL's posting blocks as the shared scorer's `PostingsSource`.

`backends/scorer.py` (the scorer SQLite uses) computes FTS5's bm25 from (unit ids, weighted
frequency F) per term. Here a token's postings come from its blocks, and a multiword
phrase's from its words' positions in the same read (a start matches where word j sits j
positions after it), so both backends give the same bits and a round's terms cost one round
trip. Phrase document frequencies found on the way are remembered per generation.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ..scorer import Statistics, token_contribution
from .blocks import Positional, Segment, decode_blocks
from .postings import BODY, COLUMN_SHIFT

# A phrase start is keyed unit << _UNIT_SHIFT | coded position (column bits included).
_UNIT_SHIFT = COLUMN_SHIFT + 2

Ints = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]
Rows = list[tuple[Any, ...]]
# (units, F, body instances) of a phrase's live units: what scoring and df both need.
PhraseHits = tuple[Ints, Ints, Ints]
# The one read a round needs: the block rows of some terms, positions only for others.
BlockRead = Callable[[list[str], list[str]], Rows]
# (document id, character offset) of each unit asked, in the order asked.
KeysRead = Callable[[list[int]], list[tuple[str, int]]]


@dataclass(frozen=True)
class Generation:
    """One index generation as readers see it: bm25's statistics and the segment headers."""

    stats: Statistics
    segments: dict[int, Segment]


class PhraseFrequencies:
    """Each phrase's (units holding it in any field, in the body) at one generation."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._generation: str | None = None
        self._known: dict[str, tuple[int, int]] = {}

    def remember(self, generation: str, hits: dict[str, PhraseHits]) -> None:
        """Keep the frequencies of phrases just read (a new generation forgets the rest)."""
        with self._lock:
            self._align(generation)
            self._known.update({phrase: _df(hit) for phrase, hit in hits.items()})

    def known(self, generation: str, phrases: Sequence[str]) -> dict[str, tuple[int, int]]:
        """The remembered frequencies of ``phrases`` at this generation."""
        with self._lock:
            self._align(generation)
            return {p: self._known[p] for p in phrases if p in self._known}

    def _align(self, generation: str) -> None:
        """Forget every phrase of another generation (hold the lock)."""
        if self._generation != generation:
            self._generation, self._known = generation, {}


class BlockPostings:
    """The scorer's source at one generation: tokens' and phrases' postings in one read."""

    def __init__(
        self,
        read: BlockRead,
        state: Generation,
        frequencies: PhraseFrequencies,
        read_keys: KeysRead,
    ):
        self._read = read
        self._state = state
        self._frequencies = frequencies
        self._read_keys = read_keys

    def postings(
        self, tokens: Sequence[str], phrases: Sequence[str]
    ) -> dict[str, tuple[Ints, Ints]]:
        """Per token and per phrase, (unit ids, F); a term without blocks has no units."""
        found, positional = self._blocks(tokens, phrases)
        hits = self.phrase_hits(phrases, positional)
        found.update({phrase: (units, freqs) for phrase, (units, freqs, _) in hits.items()})
        return found

    def phrase_scores(self, phrase: str) -> tuple[Ints, Floats]:
        """(unit ids, c(phrase)) from the phrase's postings (the scorer asks `postings`)."""
        slots, values = token_contribution(self._state.stats, *self.postings([], [phrase])[phrase])
        return self._state.stats.ids[slots], values

    def content_keys(self, unit_ids: Ints) -> list[tuple[str, int]]:
        """(document id, character offset) of each unit, in the order given."""
        return self._read_keys(unit_ids.tolist())

    def phrase_frequencies(self, phrases: Sequence[str]) -> dict[str, tuple[int, int]]:
        """Per multiword phrase, (units holding it in any field, in the body): remembered
        for this generation, else from one read of its words' positions."""
        generation = self._state.stats.generation
        known = self._frequencies.known(generation, phrases)
        missing = [p for p in dict.fromkeys(phrases) if p not in known]
        if missing:
            hits = self.phrase_hits(missing, self._blocks([], missing)[1])
            known.update({p: _df(hit) for p, hit in hits.items()})
        return known

    def phrase_hits(
        self, phrases: Sequence[str], positional: dict[str, Positional]
    ) -> dict[str, PhraseHits]:
        """Per phrase, its live units' hits from its words' positions (frequencies kept)."""
        hits = {phrase: _phrase_hits(self._state.stats, phrase, positional) for phrase in phrases}
        self._frequencies.remember(self._state.stats.generation, hits)
        return hits

    def _blocks(
        self, tokens: Sequence[str], phrases: Sequence[str]
    ) -> tuple[dict[str, tuple[Ints, Ints]], dict[str, Positional]]:
        """Each token's (units, F) and each phrase word's positions, in one read."""
        words = list(dict.fromkeys(w for phrase in phrases for w in phrase.split()))
        asked = list(dict.fromkeys([*tokens, *words]))
        rows = self._read(asked, words) if asked else []
        postings, positional = decode_blocks(self._state.segments, rows)
        empty = np.zeros(0, dtype=np.int64)
        return (
            {token: postings.get(token, (empty, empty)) for token in tokens},
            {word: positional.get(word, (empty, empty, empty)) for word in words},
        )


def _phrase_hits(stats: Statistics, phrase: str, positional: dict[str, Positional]) -> PhraseHits:
    """A phrase's live units with F and body instances, from its words' positions."""
    starts: Ints | None = None
    for offset, word in enumerate(phrase.split()):
        units, counts, codes = positional[word]
        keys = (np.repeat(units, counts) << _UNIT_SHIFT | codes) - offset
        starts = keys if starts is None else np.intersect1d(starts, keys, assume_unique=True)
    found = starts if starts is not None else np.zeros(0, dtype=np.int64)
    units = found >> _UNIT_SHIFT
    live = stats.slots_of(units) >= 0
    found, units = found[live], units[live]
    in_body = (found >> COLUMN_SHIFT & 3) == BODY
    ids, place = np.unique(units, return_inverse=True)
    weighted = np.bincount(place, weights=np.where(in_body, 1, 2), minlength=len(ids))
    body = np.bincount(place, weights=in_body, minlength=len(ids))
    return ids, weighted.astype(np.int64), body.astype(np.int64)


def _df(hits: PhraseHits) -> tuple[int, int]:
    """A phrase's units in any field and in the body, from its hits."""
    return len(hits[0]), int(np.count_nonzero(hits[2]))
