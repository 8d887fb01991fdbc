"""The numpy tree evaluator against LightGBM's own predictions, and its file round trip."""

from __future__ import annotations

import numpy as np
import pytest

from sag2_retrievers.judges.offline.trees import TreeEnsemble, from_lightgbm_dump, sigmoid

lightgbm = pytest.importorskip("lightgbm")


def _booster(objective: str, seed: int) -> tuple[object, np.ndarray]:
    """A small booster on an interaction-heavy random problem, and fresh random rows."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(1500, 6))
    y = (x[:, 0] * x[:, 1] + np.sin(x[:, 2]) > 0).astype(float)
    params = {"objective": objective, "num_leaves": 15, "min_data_in_leaf": 5, "verbose": -1}
    booster = lightgbm.train(params, lightgbm.Dataset(x, y), 40)
    return booster, rng.normal(size=(400, 6)) * 2.0


@pytest.mark.parametrize(("objective", "seed"), [("binary", 1), ("regression", 2)])
def test_numpy_trees_equal_lightgbm_raw_scores(objective: str, seed: int) -> None:
    booster, rows = _booster(objective, seed)
    trees = from_lightgbm_dump(booster.dump_model())  # type: ignore[attr-defined]
    expected = booster.predict(rows, raw_score=True)  # type: ignore[attr-defined]
    assert np.abs(trees.raw_scores(rows) - expected).max() < 1e-9


def test_binary_probabilities_equal_lightgbm() -> None:
    booster, rows = _booster("binary", 3)
    trees = from_lightgbm_dump(booster.dump_model())  # type: ignore[attr-defined]
    expected = booster.predict(rows)  # type: ignore[attr-defined]
    assert np.abs(sigmoid(trees.raw_scores(rows)) - expected).max() < 1e-9


def test_a_json_round_trip_keeps_every_prediction() -> None:
    booster, rows = _booster("binary", 4)
    trees = from_lightgbm_dump(booster.dump_model())  # type: ignore[attr-defined]
    again = TreeEnsemble.from_json(trees.to_json())
    assert np.array_equal(again.raw_scores(rows), trees.raw_scores(rows))


def test_non_finite_features_are_refused() -> None:
    booster, rows = _booster("binary", 5)
    trees = from_lightgbm_dump(booster.dump_model())  # type: ignore[attr-defined]
    rows[0, 0] = np.nan
    with pytest.raises(ValueError, match="finite"):
        trees.raw_scores(rows)


def test_children_outside_their_tree_are_refused() -> None:
    booster, _ = _booster("binary", 6)
    payload = from_lightgbm_dump(booster.dump_model()).to_json()  # type: ignore[attr-defined]
    payload["left"][0][0] = 10_000
    with pytest.raises(ValueError, match="outside"):
        TreeEnsemble.from_json(payload)
