"""Gradient-boosted decision trees evaluated in numpy, read from a LightGBM model dump.

The pool judge's model is trained with LightGBM (``benchmarks/quality/fit_pool_judge.py``) but runs
without it: the trees are flattened into arrays once, and a batch of feature rows walks all
trees level by level at once, each (row, tree) pair leaving the walk at its leaf.
`TreeEnsemble.raw_scores` equals LightGBM's ``raw_score`` prediction for finite inputs
(tested against the library on random rows).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt

Matrix = npt.NDArray[np.float64]
Vector = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class TreeEnsemble:
    """All trees as padded node arrays: feature (-1 at a leaf), threshold, children, value.

    A row goes left when ``x[feature] <= threshold``; a leaf's children point to itself, so
    walking ``depth`` levels lands every row on a leaf.
    """

    feature: IntArray  # (trees, nodes)
    threshold: Matrix
    left: IntArray
    right: IntArray
    value: Matrix
    depth: int

    def raw_scores(self, rows: Matrix) -> Vector:
        """The summed leaf values of every row (LightGBM's raw score, before any link)."""
        x = np.asarray(rows, dtype=np.float64)
        if x.ndim != 2 or not np.isfinite(x).all():
            raise ValueError("tree features must be a 2-D array of finite numbers")
        roots, feature, threshold, left, right, value = self._flat
        node = np.tile(roots, len(x))  # one entry per (row, tree) pair
        cell_start = np.repeat(np.arange(len(x)) * x.shape[1], len(roots))
        cells = x.ravel()
        walking = np.flatnonzero(feature[node] >= 0)
        for _ in range(self.depth):
            if not walking.size:
                break  # every pair has reached a leaf
            at = node[walking]
            goes_left = cells[cell_start[walking] + feature[at]] <= threshold[at]
            node[walking] = np.where(goes_left, left[at], right[at])
            walking = walking[feature[node[walking]] >= 0]  # pairs at a leaf stop walking
        return np.asarray(value[node].reshape(len(x), len(roots)).sum(axis=1), dtype=np.float64)

    @cached_property
    def _flat(self) -> tuple[IntArray, IntArray, Vector, IntArray, IntArray, Vector]:
        """Each tree's root and the node arrays flattened across trees (children as flat
        positions), so a level of the walk is one gather per array."""
        roots = np.arange(self.feature.shape[0]) * self.feature.shape[1]
        offset = roots[:, None]
        return (
            roots,
            self.feature.ravel(),
            self.threshold.ravel(),
            (self.left + offset).ravel(),
            (self.right + offset).ravel(),
            self.value.ravel(),
        )

    def to_json(self) -> dict[str, Any]:
        """The padded arrays as nested lists, one row per tree."""
        return {
            "depth": self.depth,
            "feature": self.feature.tolist(),
            "threshold": self.threshold.tolist(),
            "left": self.left.tolist(),
            "right": self.right.tolist(),
            "value": self.value.tolist(),
        }

    @classmethod
    def from_json(cls, payload: Mapping[str, Any]) -> TreeEnsemble:
        """Read the arrays written by `to_json`, checking that their shapes agree."""
        feature = np.asarray(payload["feature"], dtype=np.int64)
        arrays = [np.asarray(payload[k]) for k in ("threshold", "left", "right", "value")]
        if feature.ndim != 2 or any(a.shape != feature.shape for a in arrays):
            raise ValueError("tree arrays of different shapes")
        left, right = (a.astype(np.int64) for a in arrays[1:3])
        if feature.size and (
            min(left.min(), right.min()) < 0 or max(left.max(), right.max()) >= feature.shape[1]
        ):
            raise ValueError("a tree child points outside its tree")
        return cls(
            feature,
            arrays[0].astype(np.float64),
            left,
            right,
            arrays[3].astype(np.float64),
            int(payload["depth"]),
        )


def from_lightgbm_dump(dump: Mapping[str, Any]) -> TreeEnsemble:
    """Flatten LightGBM's ``Booster.dump_model()`` (numerical splits only) into arrays."""
    flat = [_flatten(tree["tree_structure"]) for tree in dump["tree_info"]]
    width = max(len(nodes) for nodes in flat)
    shape = (len(flat), width)
    feature = np.full(shape, -1, dtype=np.int64)
    threshold = np.zeros(shape)
    left = np.zeros(shape, dtype=np.int64)
    right = np.zeros(shape, dtype=np.int64)
    value = np.zeros(shape)
    depth = 0
    for t, nodes in enumerate(flat):
        for i, (f, thr, lo, hi, v, d) in enumerate(nodes):
            feature[t, i], threshold[t, i], value[t, i] = f, thr, v
            left[t, i], right[t, i] = (lo, hi) if f >= 0 else (i, i)
            depth = max(depth, d)
        left[t, len(nodes) :] = right[t, len(nodes) :] = np.arange(len(nodes), width)
    return TreeEnsemble(feature, threshold, left, right, value, depth)


Node = tuple[int, float, int, int, float, int]


def _flatten(root: Mapping[str, Any]) -> list[Node]:
    """Pre-order list of (feature, threshold, left, right, leaf value, depth) of one tree."""
    nodes: list[Node] = []

    def visit(node: Mapping[str, Any], depth: int) -> int:
        position = len(nodes)
        if "leaf_value" in node:
            nodes.append((-1, 0.0, position, position, float(node["leaf_value"]), depth))
            return position
        if node.get("decision_type", "<=") != "<=":
            raise ValueError("only numerical '<=' splits are supported")
        nodes.append((int(node["split_feature"]), float(node["threshold"]), 0, 0, 0.0, depth))
        lo = visit(node["left_child"], depth + 1)
        hi = visit(node["right_child"], depth + 1)
        f, thr, _, _, v, d = nodes[position]
        nodes[position] = (f, thr, lo, hi, v, d)
        return position

    visit(root, 0)
    return nodes


def sigmoid(values: Sequence[float] | Vector) -> Vector:
    """The logistic function in its overflow-free tanh form."""
    return np.asarray(0.5 + 0.5 * np.tanh(0.5 * np.asarray(values, dtype=np.float64)))
