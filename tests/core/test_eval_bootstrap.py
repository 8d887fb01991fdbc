"""Paired percentile bootstrap: determinism, coverage of the observed mean, input checks."""

from __future__ import annotations

import numpy as np
import pytest

from sag2_retrievers.errors import InvalidInputError
from sag2_retrievers.eval import BootstrapResult, paired_bootstrap


def _scores(seed: int, size: int = 200) -> tuple[list[float], list[float]]:
    """Two correlated per-question score series, b slightly better than a."""
    rng = np.random.default_rng(seed)
    a = rng.uniform(0.0, 100.0, size)
    b = np.clip(a + rng.normal(5.0, 10.0, size), 0.0, 100.0)
    return a.tolist(), b.tolist()


def test_same_seed_gives_the_same_interval() -> None:
    a, b = _scores(1)
    assert paired_bootstrap(a, b) == paired_bootstrap(a, b)


def test_different_seed_moves_the_interval_but_not_the_mean() -> None:
    a, b = _scores(1)
    first, second = paired_bootstrap(a, b, seed=1), paired_bootstrap(a, b, seed=2)
    assert first.mean_difference == second.mean_difference
    assert (first.low, first.high) != (second.low, second.high)


def test_mean_difference_is_mean_of_b_minus_a() -> None:
    result = paired_bootstrap([0.0, 1.0, 0.5], [1.0, 1.0, 1.0])
    assert result.mean_difference == pytest.approx(0.5)


def test_interval_contains_the_observed_mean_difference() -> None:
    a, b = _scores(7)
    result = paired_bootstrap(a, b)
    assert result.low < result.mean_difference < result.high
    assert result.low > 0.0


def test_wider_confidence_gives_a_wider_interval() -> None:
    a, b = _scores(3)
    narrow = paired_bootstrap(a, b, confidence=0.5)
    wide = paired_bootstrap(a, b, confidence=0.99)
    assert wide.low < narrow.low and narrow.high < wide.high


def test_identical_inputs_give_a_zero_interval() -> None:
    a, _ = _scores(5)
    assert paired_bootstrap(a, list(a)) == BootstrapResult(0.0, 0.0, 0.0)


def test_pairing_is_preserved_across_methods() -> None:
    """A constant per-question shift has zero variance only if pairs stay together."""
    a = [0.0, 10.0, 20.0, 30.0, 40.0]
    b = [value + 2.0 for value in a]
    result = paired_bootstrap(a, b)
    assert result.low == pytest.approx(2.0) and result.high == pytest.approx(2.0)


def test_unequal_lengths_are_refused() -> None:
    with pytest.raises(InvalidInputError, match="got 2 and 3"):
        paired_bootstrap([1.0, 2.0], [1.0, 2.0, 3.0])


def test_empty_input_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="at least one question"):
        paired_bootstrap([], [])


def test_non_finite_values_are_refused() -> None:
    with pytest.raises(InvalidInputError, match="finite"):
        paired_bootstrap([1.0, float("nan")], [1.0, 2.0])


def test_zero_resamples_are_refused() -> None:
    with pytest.raises(InvalidInputError, match="resamples"):
        paired_bootstrap([1.0], [2.0], resamples=0)


def test_confidence_of_one_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="confidence"):
        paired_bootstrap([1.0], [2.0], confidence=1.0)
