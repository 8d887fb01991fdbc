"""FTS5's idf as the array scorer uses it (the scores themselves are checked against FTS5 in
tests/backends/test_array_scores.py)."""

from __future__ import annotations

import math

import pytest

from sag2_retrievers.bm25 import idf


def test_idf_is_floored_for_phrases_in_most_rows() -> None:
    assert idf(10, 9) == 1e-6
    assert idf(10, 1) == pytest.approx(math.log(9.5 / 1.5))
