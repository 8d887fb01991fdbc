"""R@k, AE@k and their macro-averaged summary, checked against hand-computed values."""

from __future__ import annotations

import pytest

from sag2_retrievers.errors import InvalidInputError
from sag2_retrievers.eval import (
    QuestionResult,
    all_evidence_at,
    per_question_metrics,
    recall_at,
    summarize,
)

GOLD = ("g1", "g2")


def test_recall_counts_gold_within_first_k() -> None:
    retrieved = ["x", "g1", "y", "g2"]
    assert recall_at(GOLD, retrieved, 1) == 0.0
    assert recall_at(GOLD, retrieved, 2) == 0.5
    assert recall_at(GOLD, retrieved, 4) == 1.0


def test_recall_removes_duplicates_before_cutting_at_k() -> None:
    """A repeated passage must not use up a slot: the 3rd unique item is g2."""
    retrieved = ["g1", "g1", "x", "x", "g2"]
    assert recall_at(GOLD, retrieved, 2) == 0.5
    assert recall_at(GOLD, retrieved, 3) == 1.0


def test_recall_at_zero_is_zero() -> None:
    assert recall_at(GOLD, ["g1", "g2"], 0) == 0.0


def test_recall_with_k_beyond_the_list_uses_the_whole_list() -> None:
    assert recall_at(GOLD, ["g2"], 100) == 0.5


def test_recall_of_empty_retrieval_is_zero() -> None:
    assert recall_at(GOLD, [], 10) == 0.0


def test_recall_of_three_gold_gives_thirds() -> None:
    assert recall_at(("a", "b", "c"), ["c", "z", "a"], 3) == pytest.approx(2 / 3)


def test_recall_refuses_empty_gold() -> None:
    with pytest.raises(InvalidInputError, match="gold is empty"):
        recall_at((), ["a"], 5)


def test_negative_k_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="k must be >= 0"):
        recall_at(GOLD, ["g1"], -1)


def test_all_evidence_needs_every_gold_passage() -> None:
    retrieved = ["g1", "x", "g1", "g2"]
    assert all_evidence_at(GOLD, retrieved, 2) == 0.0
    assert all_evidence_at(GOLD, retrieved, 3) == 1.0


def test_all_evidence_at_zero_and_on_empty_retrieval_is_zero() -> None:
    assert all_evidence_at(GOLD, ["g1", "g2"], 0) == 0.0
    assert all_evidence_at(GOLD, [], 10) == 0.0


def test_per_question_metrics_names_each_cutoff() -> None:
    result = QuestionResult("q1", GOLD, ("g1", "x", "g2"))
    metrics = per_question_metrics(result, ks=(1, 3), ae_ks=(2, 3))
    assert metrics == {"R@1": 0.5, "R@3": 1.0, "AE@2": 0.0, "AE@3": 1.0}


def test_per_question_metrics_names_the_question_with_empty_gold() -> None:
    with pytest.raises(InvalidInputError, match="'q-empty' has no gold"):
        per_question_metrics(QuestionResult("q-empty", (), ("a",)))


def test_summarize_macro_averages_in_percent() -> None:
    results = [
        QuestionResult("q1", ("a", "b"), ("a", "x", "b")),
        QuestionResult("q2", ("c",), ("y", "c")),
        QuestionResult("q3", ("d", "e", "f", "g"), ()),
    ]
    summary = summarize(results, ks=(1, 2, 3), ae_ks=(2, 3))
    assert summary["n_questions"] == 3
    # R@1: (0.5 + 0 + 0) / 3; R@2: (0.5 + 1 + 0) / 3; R@3: (1 + 1 + 0) / 3.
    assert summary["recall_at"] == pytest.approx({"1": 50 / 3, "2": 50.0, "3": 200 / 3})
    assert summary["ae_at"] == pytest.approx({"2": 100 / 3, "3": 200 / 3})


def test_summarize_default_cutoffs() -> None:
    summary = summarize([QuestionResult("q1", ("a",), ("a",))])
    assert summary == {
        "n_questions": 1,
        "recall_at": {"1": 100.0, "2": 100.0, "5": 100.0, "10": 100.0},
        "ae_at": {"10": 100.0},
    }


def test_summarize_refuses_empty_gold_and_empty_input() -> None:
    with pytest.raises(InvalidInputError, match="'q2' has no gold"):
        summarize([QuestionResult("q1", ("a",), ()), QuestionResult("q2", (), ())])
    with pytest.raises(InvalidInputError, match="no question results"):
        summarize([])
