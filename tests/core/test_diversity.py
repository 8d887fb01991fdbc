"""The greedy DPP reorder of the top ten (ARCHITECTURE §4.8)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sag2_retrievers.analysis.sag2.diversity import cosine_matrix, greedy_dpp_order, tfidf_vectors


def test_tfidf_weights_follow_the_sublinear_smoothed_formula() -> None:
    [vector] = tfidf_vectors([["a", "a", "b"]], {"a": 1, "b": 9}, 9)
    a = (1 + math.log(2)) * (math.log(10 / 2) + 1)
    b = 1 * (math.log(10 / 10) + 1)
    norm = math.hypot(a, b)
    assert vector == pytest.approx({"a": a / norm, "b": b / norm})


def test_cosine_of_identical_texts_is_one_and_disjoint_is_zero() -> None:
    vectors = tfidf_vectors([["x", "y"], ["x", "y"], ["z"]], {}, 10)
    matrix = cosine_matrix(vectors)
    assert matrix[0, 1] == pytest.approx(1.0)
    assert matrix[0, 2] == 0.0


def test_a_near_duplicate_is_pushed_below_a_distinct_item() -> None:
    similarity = np.array([[1.0, 0.99, 0.0], [0.99, 1.0, 0.0], [0.0, 0.0, 1.0]])
    assert greedy_dpp_order([0.9, 0.85, 0.8], similarity) == [0, 2, 1]


def test_without_similarity_the_order_is_the_score_order() -> None:
    assert greedy_dpp_order([0.9, 0.7, 0.5, 0.1], np.eye(4)) == [0, 1, 2, 3]


def test_items_whose_residual_vanishes_follow_in_original_order() -> None:
    similarity = np.ones((3, 3))
    assert greedy_dpp_order([0.9, 0.8, 0.7], similarity) == [0, 1, 2]


def test_all_zero_quality_keeps_the_order() -> None:
    assert greedy_dpp_order([0.0, 0.0, 0.0], np.eye(3)) == [0, 1, 2]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(0.0, 1.0), min_size=1, max_size=10),
    st.integers(0, 2**31 - 1),
)
def test_dpp_is_a_permutation_that_keeps_the_first_item(quality: list[float], seed: int) -> None:
    quality = sorted(quality, reverse=True)
    rng = np.random.default_rng(seed)
    points = rng.random((len(quality), 4))
    points /= np.linalg.norm(points, axis=1, keepdims=True)
    order = greedy_dpp_order(quality, points @ points.T)
    assert sorted(order) == list(range(len(quality)))
    assert order[0] == 0
