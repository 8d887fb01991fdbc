"""SQLite judgment cache: replay stored scores, resume interrupted runs, keep paid totals.

`CachedJudge` wraps any judge. Each judgment is stored under a sha256 key of everything that
can change its score (judge identity, instruction, question, candidate, shared context and
note), so a rerun only pays for judgments it has never made. Each row also records what that
judgment cost, so the totals of `CachedJudge.total_paid` survive restarts.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from .._sqlite import connect_cache, write_cache
from ..errors import IndexFullError, JudgeError
from .base import CallEstimate, Candidate, Judge, JudgeRequest, UsageSnapshot, track_usage

# Bump when the key's ingredients change, so old rows are never mistaken for new ones.
KEY_FORMAT = "sag2-judgment/1"


CREATE_TABLE = """
CREATE TABLE IF NOT EXISTS judgment_cache (
    key TEXT PRIMARY KEY,
    judge TEXT NOT NULL,
    score REAL NOT NULL,
    http_calls INTEGER NOT NULL,
    input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    cost_usd REAL NOT NULL,
    created_at REAL NOT NULL
)
"""

SELECT_SCORE = "SELECT score FROM judgment_cache WHERE key = ?"

# A race (two processes missing the same key) keeps the first score and adds the second spend.
UPSERT_JUDGMENT = """
INSERT INTO judgment_cache
    (key, judge, score, http_calls, input_tokens, output_tokens, cost_usd, created_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT(key) DO UPDATE SET
    http_calls = http_calls + excluded.http_calls,
    input_tokens = input_tokens + excluded.input_tokens,
    output_tokens = output_tokens + excluded.output_tokens,
    cost_usd = cost_usd + excluded.cost_usd
"""

SELECT_TOTALS = """
SELECT COUNT(*), COALESCE(SUM(http_calls), 0), COALESCE(SUM(input_tokens), 0),
       COALESCE(SUM(output_tokens), 0), COALESCE(SUM(cost_usd), 0.0)
FROM judgment_cache WHERE judge = ?
"""


@dataclass(frozen=True)
class _Share:
    """The part of one inner call's usage charged to a single judgment."""

    http_calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: float


class CachedJudge(Judge):
    """A judge that answers from a SQLite cache and asks its inner judge only for misses.

    The table ``judgment_cache`` may live in the index file; no other table is read or
    written, but the file is switched to WAL mode so several threads and processes can share
    it. Hits count as judgments yet add no HTTP calls, tokens or cost to ``usage``. Each inner
    request's own usage (tracked per task, so concurrent retrievals never swap theirs) is
    added to ``usage`` and charged to the judgments it stored; a request that fails or gets a
    stand-in score stores nothing, and its usage is counted in ``usage`` only.
    """

    def __init__(self, inner: Judge, path: str | os.PathLike[str]) -> None:
        super().__init__()
        self._inner = inner
        self.sends_data_off_machine = inner.sends_data_off_machine
        self._lock = threading.Lock()
        self._connection = _open(os.fspath(path))

    def __repr__(self) -> str:
        return f"CachedJudge(inner={self._inner!r})"

    @property
    def identity(self) -> str:
        """The inner judge's identity: a cache is transparent to whoever reads scores."""
        return self._inner.identity

    def estimate(self, request: JudgeRequest) -> CallEstimate:
        """The inner judge's estimate: an upper bound, since stored judgments cost nothing."""
        return self._inner.estimate(request)

    def precompute(self, candidates: Sequence[Candidate], *, progress: bool = False) -> int:
        """The inner judge's passage-side preparation (the cache holds judgments, not passages)."""
        return self._inner.precompute(candidates, progress=progress)

    async def _score(self, request: JudgeRequest) -> list[float]:
        """Return stored scores for hits and ask the inner judge once for all misses."""
        keys = judgment_keys(self.identity, request, self._inner.scores_whole_request)
        stored = await asyncio.to_thread(self._lookup, keys)
        misses = [
            (key, candidate)
            for key, candidate in dict(zip(keys, request.candidates, strict=True)).items()
            if key not in stored
        ]
        if misses:
            stored.update(await self._judge_misses(request, misses))
        return [stored[key] for key in keys]

    def total_paid(self) -> UsageSnapshot:
        """Judgments stored for this judge and the HTTP calls, tokens and cost they took."""
        with self._lock:
            row = self._connection.execute(SELECT_TOTALS, (self.identity,)).fetchone()
        return UsageSnapshot(int(row[0]), int(row[1]), int(row[2]), int(row[3]), float(row[4]))

    def close(self) -> None:
        """Close the cache's SQLite connection."""
        with self._lock:
            self._connection.close()

    async def aclose(self) -> None:
        """Close the cache and the inner judge."""
        self.close()
        await self._inner.aclose()

    async def _judge_misses(
        self, request: JudgeRequest, misses: list[tuple[str, Candidate]]
    ) -> dict[str, float]:
        """Score the misses in one inner request, charge its usage, and store the results."""
        miss_request = JudgeRequest(
            question=request.question,
            candidates=tuple(candidate for _, candidate in misses),
            context=request.context,
            note=request.note,
            instruction=request.instruction,
        )
        # This request's own usage: concurrent retrievals share the inner judge's counters.
        with track_usage(self._inner.usage) as collected:
            try:
                scores = await self._inner.score(miss_request)
            finally:
                spent = collected.snapshot()
                self._charge(spent)
        judged = {key: score for (key, _), score in zip(misses, scores, strict=True)}
        # A stand-in score for an unreadable answer is no judgment: storing it would replay it
        # for good, so a request with any is not stored (and is asked again next time).
        if not spent.degraded:
            await asyncio.to_thread(self._store, judged, split_usage(spent, len(judged)))
        return judged

    def _charge(self, spent: UsageSnapshot) -> None:
        """Add an inner request's HTTP calls, tokens, cost and stand-ins to ``usage``."""
        self.usage.add(
            http_calls=spent.http_calls,
            input_tokens=spent.input_tokens,
            output_tokens=spent.output_tokens,
            cost_usd=spent.cost_usd,
            cached_input_tokens=spent.cached_input_tokens,
            cache_reports=spent.cache_reports,
            degraded=spent.degraded,
        )

    def _lookup(self, keys: Sequence[str]) -> dict[str, float]:
        """Stored scores of the keys that are in the cache."""
        found: dict[str, float] = {}
        with self._lock:
            for key in keys:
                row = self._connection.execute(SELECT_SCORE, (key,)).fetchone()
                if row is not None:
                    found[key] = float(row[0])
        return found

    def _store(self, judged: dict[str, float], shares: list[_Share]) -> None:
        """Write the new judgments and their usage shares in one transaction."""
        now = time.time()
        rows = [
            (
                key,
                self.identity,
                score,
                share.http_calls,
                share.input_tokens,
                share.output_tokens,
                share.cost_usd,
                now,
            )
            for (key, score), share in zip(judged.items(), shares, strict=True)
        ]
        with self._lock:
            try:
                write_cache(self._connection, UPSERT_JUDGMENT, rows, "judgments")
            except (sqlite3.Error, IndexFullError) as error:
                raise JudgeError(
                    f"could not write judgments to the cache: {error}; check that the cache "
                    "file is writable and not locked by a long transaction"
                ) from error


def judgment_keys(identity: str, request: JudgeRequest, whole_request: bool = False) -> list[str]:
    """One cache key per candidate: sha256 of the judge, request and candidate contents.

    With ``whole_request`` (a judge whose scores depend on every candidate, see
    `Judge.scores_whole_request`) each key also covers all candidates, their engine facts and
    the candidate's position, so a score is reused only for the very same request.
    """
    batch = (
        [
            [c.title, c.text, c.round_found, c.question_bm25, c.previous_score]
            for c in request.candidates
        ]
        if whole_request
        else None
    )
    shared = _digest(
        [
            KEY_FORMAT,
            identity,
            request.instruction,
            request.question,
            request.note,
            [[passage.title, passage.text, passage.previous_score] for passage in request.context],
            *([batch] if whole_request else []),
        ]
    )
    return [
        _digest([shared, candidate.title, candidate.text, *([position] if whole_request else [])])
        for position, candidate in enumerate(request.candidates)
    ]


def split_usage(spent: UsageSnapshot, parts: int) -> list[_Share]:
    """Divide a call's usage over its judgments; integer counts are split exactly."""
    calls = _split_count(spent.http_calls, parts)
    inputs = _split_count(spent.input_tokens, parts)
    outputs = _split_count(spent.output_tokens, parts)
    cost = spent.cost_usd / parts
    return [_Share(calls[i], inputs[i], outputs[i], cost) for i in range(parts)]


def _split_count(total: int, parts: int) -> list[int]:
    """Split an integer into near-equal parts that sum to it, larger parts first."""
    quotient, remainder = divmod(total, parts)
    return [quotient + (1 if i < remainder else 0) for i in range(parts)]


def _digest(value: object) -> str:
    """sha256 hex digest of a value's canonical JSON form."""
    encoded = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(encoded.encode("utf-8")).hexdigest()


def _open(path: str) -> sqlite3.Connection:
    """Open the cache file for use from any thread, in WAL mode, with the table created."""
    try:
        connection = connect_cache(path)
        connection.execute(CREATE_TABLE)
    except sqlite3.Error as error:
        raise JudgeError(
            f"could not open the judgment cache at {path!r}: {error}; "
            "check that the path is a writable SQLite file"
        ) from error
    return connection
