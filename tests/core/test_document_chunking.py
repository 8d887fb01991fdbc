"""The document-collection chunking setting: ~1,000-character units, results per source."""

from __future__ import annotations

from pathlib import Path

from sag2_retrievers import Document, IndexSettings, SAG2Engine, SQLiteIndex
from sag2_retrievers.judges.fakes import OverlapJudge

SENTENCES = [
    f"Report {n} says the lighthouse keeper logged {n} ships near the northern harbour."
    for n in range(80)
]


def long_documents() -> list[Document]:
    """Three documents of about 6,000 characters, each mentioning the harbour throughout."""
    return [Document(f"doc{d}", " ".join(SENTENCES[d::3] * 3), f"Logbook {d}") for d in range(3)]


def test_document_collections_are_cut_into_units_of_about_a_thousand_characters(
    tmp_path: Path,
) -> None:
    settings = IndexSettings.for_document_collections()
    with SQLiteIndex(tmp_path / "docs.db", settings) as index:
        index.add_documents(long_documents())
        units = index.units(range(1, 100)).values()
        sizes = [unit.char_end - unit.char_start for unit in units]
    assert settings.chunk_chars == 1000
    assert len(sizes) >= 15 and max(sizes) <= 1200
    assert sorted(sizes)[3] >= 800  # only each document's last unit may be shorter


def test_results_over_chunked_documents_hold_each_source_once(tmp_path: Path) -> None:
    with SQLiteIndex(tmp_path / "docs.db", IndexSettings.for_document_collections()) as index:
        index.add_documents(long_documents())
        engine = SAG2Engine(index, OverlapJudge())
        result = engine.retrieve("Which keeper logged ships near the northern harbour?", 10)
        engine.close()
    sources = [hit.doc_id for hit in result.hits]
    assert sorted(sources) == ["doc0", "doc1", "doc2"]
    assert len({unit.doc_id for unit in result.units}) == 3 < len(result.units)
