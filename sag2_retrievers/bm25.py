"""FTS5's ``bm25()`` as a pure function, operation for operation, for rows read back by id.

Used where asking FTS5 would cost a pass over every row matching the query (scoring a few
chosen units). Per query phrase p, in phrase order::

    score += idf(p) * ((F * (k1 + 1)) / (F + k1 * ((1 - b) + b * |D| / avgdl)))

with F the phrase's instances weighted per column (title 2, heading 2, body 1), |D| the row's
unweighted token count, avgdl = all tokens / rows, idf(p) = ln((N - n_p + 0.5) / (n_p + 0.5))
(1e-6 when not positive) and n_p the rows matching p in any column (SQLite's
``ext/fts5/fts5_aux.c``). The same double operations in the same order give the same bits.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

K1 = 1.2
B = 0.75
WEIGHTS = (2.0, 2.0, 1.0)


def idf(rows: int, matching: int) -> float:
    """FTS5's idf of a phrase matched by ``matching`` of ``rows`` rows."""
    value = math.log((rows - matching + 0.5) / (matching + 0.5))
    return 1e-6 if value <= 0.0 else value


def instances(tokens: Sequence[str], words: Sequence[str]) -> int:
    """How many times the phrase ``words`` occurs as consecutive tokens."""
    size = len(words)
    if size == 1:
        return list(tokens).count(words[0])
    return sum(
        1 for start in range(len(tokens) - size + 1) if list(tokens[start : start + size]) == words
    )


def row_score(
    columns: Sequence[Sequence[str]],
    phrases: Sequence[str],
    matching: Mapping[str, int],
    rows: int,
    avgdl: float,
) -> float | None:
    """A row's bm25 for the OR of ``phrases`` (tokens joined by spaces), None if none occurs."""
    length = float(sum(len(column) for column in columns))
    score = 0.0
    found = False
    for phrase in phrases:
        words = phrase.split()
        weighted = 0.0
        for weight, column in zip(WEIGHTS, columns, strict=True):
            weighted += weight * instances(column, words)
        if weighted:
            found = True
            score += idf(rows, matching[phrase]) * (
                (weighted * (K1 + 1.0)) / (weighted + K1 * (1 - B + B * length / avgdl))
            )
    return score if found else None
