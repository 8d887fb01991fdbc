"""After long churn (unit ids only grow) a question's arrays follow the live units, not the
highest id ever written, and its scores are those of a fresh index of the same documents."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from pathlib import Path

from sag2_retrievers import Document, SQLiteIndex

KEPT = [
    Document("kept-1", "Port Varna lies in Ostrel by the sea.", "Varna"),
    Document("kept-2", "Ostrel harbour ships sail to Varna every morning.", "Ostrel"),
    Document("kept-3", "The ferry from Varna crosses the Ostrel strait.", "Ferry"),
]
CHURN_ROUNDS, CHURN_BATCH = 10, 2_000  # 20,000 unit ids written and deleted


def _churned(path: Path) -> SQLiteIndex:
    """An index holding KEPT after 20,000 other units were added and deleted."""
    index = SQLiteIndex(path)
    index.add_documents(KEPT, parallel=False)
    for round_ in range(CHURN_ROUNDS):
        batch = [
            Document(f"c{round_}-{n}", f"Ostrel ferry {n} sails to Varna daily.")
            for n in range(CHURN_BATCH)
        ]
        index.add_documents(batch, parallel=False)
        index.delete([document.id for document in batch])
    return index


def _memory(step: Callable[[], object]) -> tuple[int, int]:
    """The memory Python and numpy still hold after ``step`` (its result dropped), and the
    most they held at once during it."""
    tracemalloc.start()
    try:
        step()
        return tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()


def test_question_arrays_are_sized_by_live_units_after_churn(tmp_path: Path) -> None:
    churned = _churned(tmp_path / "churned.db")
    fresh = SQLiteIndex(tmp_path / "fresh.db")
    fresh.add_documents(KEPT, parallel=False)
    terms = churned.query_terms("Which ferry sails from Varna to Ostrel?")
    kept_ids = set(churned.document_units(["kept-1", "kept-2", "kept-3"]))
    assert min(kept_ids) < 10 and churned.unit_count() == 3

    def question() -> object:
        ranked = churned.rank_expression(terms, 10)
        expanded = churned.expand(["ostrel", "varna"], terms, set(), 5)
        return ranked, expanded, churned.score_units(terms, kept_ids)

    # Arrays over 20,000 ids would take 160 KB each; the live units need a few bytes. The
    # first question also reads this generation's statistics, which the index keeps.
    kept, _ = _memory(question)
    assert kept < 64_000
    _, peak = _memory(question)
    assert peak < 64_000

    fresh_scores = [score for _, score in fresh.rank_expression(terms, 10)]
    assert [score for _, score in churned.rank_expression(terms, 10)] == fresh_scores
    churned.close()
    fresh.close()
