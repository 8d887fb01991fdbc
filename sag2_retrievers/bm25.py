"""FTS5's ``bm25()`` constants and idf, for scoring outside FTS5 with FTS5's numbers.

Per query phrase p, in phrase order, FTS5 adds::

    score += idf(p) * ((F * (k1 + 1)) / (F + k1 * ((1 - b) + b * |D| / avgdl)))

with F the phrase's instances weighted per column (title 2, heading 2, body 1), |D| the row's
unweighted token count, avgdl = all tokens / rows, idf(p) = ln((N - n_p + 0.5) / (n_p + 0.5))
(1e-6 when not positive) and n_p the rows matching p in any column (SQLite's
``ext/fts5/fts5_aux.c``). The same double operations in the same order give the same bits
(``backends/scorer.py``, ``backends/postgres/schema.py``).
"""

from __future__ import annotations

import math

K1 = 1.2
B = 0.75
BM25_WEIGHTS = (2.0, 2.0, 1.0)  # title, heading, body


def idf(rows: int, matching: int) -> float:
    """FTS5's idf of a phrase matched by ``matching`` of ``rows`` rows."""
    value = math.log((rows - matching + 0.5) / (matching + 0.5))
    return 1e-6 if value <= 0.0 else value
