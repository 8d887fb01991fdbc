"""Greedy determinantal (DPP) reordering of the top results, with sparse TF-IDF similarity."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np

RESIDUAL_EPSILON = 1e-10


def tfidf_vectors(
    token_lists: Sequence[Sequence[str]], df: Mapping[str, int], n_units: int
) -> list[dict[str, float]]:
    """L2-normalised sparse vectors: (1 + ln count) * (ln((1 + N) / (1 + df)) + 1) per token."""
    vectors = []
    for tokens in token_lists:
        weights = {
            token: (1 + math.log(count)) * (math.log((1 + n_units) / (1 + df.get(token, 0))) + 1)
            for token, count in Counter(tokens).items()
        }
        norm = math.sqrt(sum(w * w for w in weights.values()))
        vectors.append({t: w / norm for t, w in weights.items()} if norm > 0 else {})
    return vectors


def cosine_matrix(vectors: Sequence[Mapping[str, float]]) -> np.ndarray:
    """Pairwise cosine similarities of normalised sparse vectors (1 on the diagonal)."""
    size = len(vectors)
    matrix = np.eye(size)
    for i in range(size):
        for j in range(i + 1, size):
            small, large = sorted((vectors[i], vectors[j]), key=len)
            value = sum(w * large.get(t, 0.0) for t, w in small.items())
            matrix[i, j] = matrix[j, i] = value
    return matrix


def greedy_dpp_order(quality: Sequence[float], similarity: np.ndarray) -> list[int]:
    """Order items by greedy MAP inference on L = diag(q) S diag(q), incremental Cholesky.

    The first item always stays first; each next pick has the largest residual (earliest on
    ties); once residuals vanish the remaining items follow in their original order.
    """
    size = len(quality)
    if size <= 1:
        return list(range(size))
    q = np.asarray(quality, dtype=float)
    kernel = similarity * np.outer(q, q)
    residual = np.diag(kernel).copy()
    factors = np.zeros((size, size))
    order = [0]
    remaining = list(range(1, size))
    while remaining:
        last = order[-1]
        if residual[last] > RESIDUAL_EPSILON:
            step = len(order) - 1
            root = math.sqrt(residual[last])
            for i in remaining:
                e = (kernel[last, i] - factors[last, :step] @ factors[i, :step]) / root
                factors[i, step] = e
                residual[i] -= e * e
        best = max(remaining, key=lambda i: (residual[i], -i))
        if residual[best] <= RESIDUAL_EPSILON:
            return order + remaining
        order.append(best)
        remaining.remove(best)
    return order
