"""Per-term expansion retrieval against a real index (ARCHITECTURE §4.6)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sag2_retrievers import Document, SQLiteIndex
from sag2_retrievers.expansion import ExpansionTerm, expansion_candidates

TEXTS = [
    ("Orchard", "The orchard grows apples and pears near the river."),
    ("Mill", "A mill on the river ground wheat for the village bakers."),
    ("Bakery", "The village bakery sells bread made from local wheat."),
    ("Bridge", "An old stone bridge crosses the river by the mill."),
    ("Apples", "Apples from the orchard are pressed into cider each autumn."),
    ("Cider", "Cider festivals draw visitors to the village every autumn."),
    ("Pears", "Pears ripen later than apples in the orchard."),
]


@pytest.fixture
def index(tmp_path: Path) -> SQLiteIndex:
    index = SQLiteIndex(tmp_path / "expansion.db")
    index.add_documents(Document(str(n), text, title) for n, (title, text) in enumerate(TEXTS))
    return index


ALL = 1_000


def test_expand_ranks_a_terms_units_exactly_as_the_whole_expression_does(
    index: SQLiteIndex,
) -> None:
    """Scores summed per phrase on the candidates equal FTS5's score of the whole OR."""
    terms = ["river", "wheat", "village", "autumn", "old stone"]
    whole = index.rank_expression(terms, ALL)
    ranked = index.expand(["village"], terms, set(), ALL)["village"]
    village = set(index.term_members(["village"])["village"])
    assert ranked == [unit_id for unit_id, _ in whole if unit_id in village]


def test_each_term_list_holds_only_unseen_units_ranked_by_the_whole_expression(
    index: SQLiteIndex,
) -> None:
    seen = {unit_id for unit_id, _ in index.rank_expression(["orchard"], ALL)}
    terms = [ExpansionTerm("wheat", 2.0), ExpansionTerm("village", 1.0)]
    new = expansion_candidates(index, terms, ["river"], seen, None, 100, 100)
    assert not set(new) & seen
    whole = dict(index.rank_expression(["river", "wheat", "village"], ALL))
    wheat = [u for u in index.term_members(["wheat"])["wheat"] if u not in seen]
    best_wheat = min(wheat, key=lambda u: (-whole[u], u))
    assert new[0] == best_wheat


def test_interleaving_alternates_between_terms_in_priority_order(index: SQLiteIndex) -> None:
    terms = [ExpansionTerm("cider", 3.0), ExpansionTerm("bread", 2.0)]
    new = expansion_candidates(index, terms, [], set(), None, 100, 100)
    cider = set(index.term_members(["cider"])["cider"])
    bread = set(index.term_members(["bread"])["bread"])
    assert new[0] in cider and new[1] in bread
    assert set(new) == cider | bread


def test_a_multiword_name_without_unseen_match_falls_back_to_a_title_subphrase(
    tmp_path: Path,
) -> None:
    index = SQLiteIndex(tmp_path / "titles.db")
    index.add_documents(
        [
            Document("a", "Visitors praised the Grand Harbour Lighthouse Museum.", "Notes"),
            Document("b", "The harbour lighthouse was built in 1820.", "Harbour Lighthouse"),
        ]
    )
    seen = {u for u, _ in index.rank_expression(["visitors"], ALL)}
    terms = [ExpansionTerm("grand harbour lighthouse museum", 1.0)]
    new = expansion_candidates(index, terms, [], seen, None, 100, 100)
    document_of = {u.unit_id: u.doc_id for u in index.units(new).values()}
    assert [document_of[u] for u in new] == ["b"]


def test_filters_restrict_the_new_candidates_inside_the_query(tmp_path: Path) -> None:
    index = SQLiteIndex(tmp_path / "filtered.db")
    index.add_documents(
        Document(str(n), text, title, {"keep": n == 2}) for n, (title, text) in enumerate(TEXTS)
    )
    terms = [ExpansionTerm("village", 1.0)]
    new = expansion_candidates(index, terms, [], set(), {"keep": True}, 100, 100)
    assert [unit.doc_id for unit in index.units(new).values()] == ["2"]
