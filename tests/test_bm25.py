"""The pure bm25 model used to score chosen rows (FTS5's formula, tested against FTS5 in the
backend contract suite)."""

from __future__ import annotations

import math

import pytest

from sag2_retrievers.bm25 import idf, instances, row_score


def test_idf_is_floored_for_phrases_in_most_rows() -> None:
    assert idf(10, 9) == 1e-6
    assert idf(10, 1) == pytest.approx(math.log(9.5 / 1.5))


def test_instances_count_consecutive_tokens_only() -> None:
    assert instances(["new", "york", "city", "new", "york"], ["new", "york"]) == 2
    assert instances(["york", "new"], ["new", "york"]) == 0
    assert instances(["a", "b", "a"], ["a"]) == 2


def test_title_instances_weigh_twice_the_body() -> None:
    in_title = row_score([["kiln"], [], ["bowls"]], ["kiln"], {"kiln": 1}, 10, 2.0)
    in_body = row_score([["bowls"], [], ["kiln"]], ["kiln"], {"kiln": 1}, 10, 2.0)
    assert in_title is not None and in_body is not None and in_title > in_body


def test_a_row_holding_no_phrase_has_no_score() -> None:
    assert row_score([["mill"], [], ["wheat"]], ["kiln"], {"kiln": 3}, 10, 2.0) is None
