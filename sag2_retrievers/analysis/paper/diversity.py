"""The "paper" profile's diversity step, as the authors' port runs it (§4.8, Appendix C).

Vectors: the casefolded letter-digit words of each unit's text (stopwords kept), weighted
(1 + ln count) x idf, idf = ln((1 + D) / (1 + df)) + 1 with D and df counted over the
corpus's documents (`word_document_frequencies`). Greedy MAP on L = diag(q) S diag(q): the
largest residual wins (earliest on ties), residuals never drop below 0, and the rest follow
in order once the best residual is within n ulps of the largest initial one.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

_WORD = re.compile(r"[^\W_]+")


def diversity_words(text: str) -> list[str]:
    """The casefolded words (runs of letters and digits) of a text, stopwords kept."""
    return _WORD.findall(text.casefold())


def word_document_frequencies(texts: Iterable[str]) -> Counter[str]:
    """How many of the texts hold each diversity word."""
    df: Counter[str] = Counter()
    for text in texts:
        df.update(set(diversity_words(text)))
    return df


def word_vectors(
    texts: Sequence[str], df: Mapping[str, int], documents: int
) -> list[dict[str, float]]:
    """L2-normalised (1 + ln count) x idf vectors of the texts' diversity words."""
    vectors = []
    for text in texts:
        weights = {
            word: (1 + math.log(count)) * (math.log((1 + documents) / (1 + df.get(word, 0))) + 1)
            for word, count in Counter(diversity_words(text)).items()
        }
        norm = math.sqrt(sum(value * value for value in weights.values()))
        vectors.append({w: value / norm for w, value in weights.items()} if norm > 0 else {})
    return vectors


def paper_dpp_order(quality: Sequence[float], vectors: Sequence[Mapping[str, float]]) -> list[int]:
    """Greedy DPP order of the items (indices), with the port's kernel, ties and stop."""
    size = len(quality)
    if not size:
        return []
    kernel = [
        [quality[i] * quality[j] * _dot(vectors[i], vectors[j]) for j in range(size)]
        for i in range(size)
    ]
    residuals = [q * q for q in quality]
    tolerance = size * math.ulp(max(residuals))
    factors: list[list[float]] = [[] for _ in range(size)]
    remaining, order = list(range(size)), list[int]()
    while remaining:
        winner = max(remaining, key=lambda i: residuals[i])
        if residuals[winner] <= tolerance:
            return order + remaining
        order.append(winner)
        remaining.remove(winner)
        root = math.sqrt(residuals[winner])
        for i in remaining:
            shared = sum(a * b for a, b in zip(factors[winner], factors[i], strict=True))
            projection = (kernel[winner][i] - shared) / root
            factors[i].append(projection)
            residuals[i] = max(0.0, residuals[i] - projection * projection)
    return order


def _dot(first: Mapping[str, float], second: Mapping[str, float]) -> float:
    """Sparse dot product, summed in the first vector's word order."""
    return sum(value * second.get(word, 0) for word, value in first.items())
