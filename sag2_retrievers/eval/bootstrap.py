"""Paired percentile bootstrap of a per-question metric difference between two methods."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from sag2_retrievers.errors import InvalidInputError

PAPER_SEED = 20261015


@dataclass(frozen=True)
class BootstrapResult:
    """Observed mean of (b - a) and its percentile confidence interval."""

    mean_difference: float
    low: float
    high: float


def paired_bootstrap(
    a: Sequence[float],
    b: Sequence[float],
    *,
    resamples: int = 2000,
    seed: int = PAPER_SEED,
    confidence: float = 0.95,
) -> BootstrapResult:
    """Interval for mean(b - a), resampling questions so each keeps its pair across methods."""
    differences = _paired_differences(a, b)
    if resamples < 1:
        raise InvalidInputError(f"resamples must be >= 1, got {resamples}")
    if not 0.0 < confidence < 1.0:
        raise InvalidInputError(f"confidence must be strictly between 0 and 1, got {confidence}")
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, differences.size, size=(resamples, differences.size))
    resampled_means = differences[picks].mean(axis=1)
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(resampled_means, [tail, 1.0 - tail])
    return BootstrapResult(
        mean_difference=float(differences.mean()), low=float(low), high=float(high)
    )


def _paired_differences(a: Sequence[float], b: Sequence[float]) -> npt.NDArray[np.float64]:
    """Per-question b - a, after checking the two series pair up and are finite."""
    if len(a) != len(b):
        raise InvalidInputError(
            f"paired bootstrap needs one value per question from each method; "
            f"got {len(a)} and {len(b)}"
        )
    if len(a) == 0:
        raise InvalidInputError("paired bootstrap needs at least one question")
    differences = np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64)
    if not np.all(np.isfinite(differences)):
        raise InvalidInputError("per-question values must be finite numbers (no NaN or infinity)")
    return differences
