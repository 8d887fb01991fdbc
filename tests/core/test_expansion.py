"""Term selection and interleaving rules of SAG2 expansion (ARCHITECTURE §4.5-§4.6)."""

from __future__ import annotations

import math

import pytest

from sag2_retrievers.expansion import (
    Seed,
    candidate_terms,
    idf,
    interleave,
    seed_weights,
    term_priorities,
    top_terms,
)


def test_idf_matches_the_bm25_rarity_formula() -> None:
    assert idf(3, 100) == pytest.approx(math.log(1 + (100 - 3 + 0.5) / (3 + 0.5)))


def test_seed_weights_scale_from_half_to_one_by_score() -> None:
    seeds = [Seed(1, 0.8, []), Seed(2, 0.4, []), Seed(3, 0.0, [])]
    assert seed_weights(seeds) == {1: 1.0, 2: 0.75, 3: 0.5}


def test_seed_weights_are_half_when_every_score_is_zero() -> None:
    assert seed_weights([Seed(1, 0.0, []), Seed(2, 0.0, [])]) == {1: 0.5, 2: 0.5}


def test_term_priority_on_a_hand_computed_example() -> None:
    """Two seeds; "bridge" appears twice in seed 1 (one sentence shares a question token)."""
    question = frozenset({"capital", "river"})
    seeds = [
        Seed(1, 0.9, [["bridge", "capital"], ["bridge", "tower"]]),
        Seed(2, 0.45, [["bridge", "river", "capital"]]),
    ]
    df = {"bridge": 4, "tower": 10, "capital": 20, "river": 5}
    n = 100
    priorities = term_priorities(seeds, question, df, n)

    idf_capital, idf_river = idf(20, n), idf(5, n)
    seed1 = (1 + math.log(2)) * idf(4, n) * (1 + idf_capital) * 1.0
    seed2 = (1 + math.log(1)) * idf(4, n) * (1 + idf_capital + idf_river) * 0.75
    assert priorities["bridge"] == pytest.approx(max(seed1, seed2))
    assert priorities["tower"] == pytest.approx(idf(10, n) * (1 + 0.0) * 1.0)


def test_terms_made_only_of_question_tokens_are_skipped() -> None:
    question = frozenset({"paris", "france"})
    seeds = [Seed(1, 1.0, [["paris france", "paris", "louvre"]])]
    assert candidate_terms(seeds, question) == ["louvre"]
    priorities = term_priorities(seeds, question, {"louvre": 1, "paris": 9, "france": 9}, 50)
    assert set(priorities) == {"louvre"}


def test_a_name_counts_as_one_term_not_as_its_words() -> None:
    seeds = [Seed(1, 1.0, [["jean-luc picard", "captain"], ["picard"]])]
    df = {"jean-luc picard": 2, "captain": 7, "picard": 3}
    priorities = term_priorities(seeds, frozenset(), df, 100)
    assert priorities["jean-luc picard"] == pytest.approx(idf(2, 100))
    assert priorities["picard"] == pytest.approx(idf(3, 100)), "tf of picard is 1, not 2"
    assert "jean-luc" not in priorities


def test_terms_with_zero_document_frequency_are_skipped() -> None:
    seeds = [Seed(1, 1.0, [["ghost", "real"]])]
    assert set(term_priorities(seeds, frozenset(), {"ghost": 0, "real": 1}, 10)) == {"real"}


def test_question_connection_uses_words_inside_names() -> None:
    """A sentence whose name contains a question word connects its other terms."""
    question = frozenset({"picard"})
    seeds = [Seed(1, 1.0, [["jean-luc picard", "starship"]])]
    df = {"jean-luc picard": 1, "starship": 2, "picard": 4}
    priorities = term_priorities(seeds, question, df, 100)
    assert priorities["starship"] == pytest.approx(idf(2, 100) * (1 + idf(4, 100)))


def test_top_terms_break_priority_ties_by_text() -> None:
    ranked = top_terms({"zeta": 2.0, "alpha": 2.0, "mid": 3.0, "low": 1.0}, 3)
    assert [t.term for t in ranked] == ["mid", "alpha", "zeta"]


def test_interleave_takes_rank_one_of_every_list_first_and_drops_duplicates() -> None:
    lists = [[1, 2, 3], [2, 4], [5, 1, 6]]
    assert interleave(lists, 10) == [1, 2, 5, 4, 3, 6]


def test_interleave_stops_at_the_limit() -> None:
    assert interleave([[1, 2, 3], [4, 5, 6]], 3) == [1, 4, 2]


def test_interleave_of_nothing_is_empty() -> None:
    assert interleave([], 5) == []
    assert interleave([[], []], 5) == []
