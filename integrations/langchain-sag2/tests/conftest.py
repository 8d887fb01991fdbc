"""Shared test data: a four-document, two-hop corpus about the Eiffel Tower, and a retriever."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_sag2 import SAG2Retriever

from sag2_retrievers.judges import OverlapJudge


@pytest.fixture(scope="session")
def eiffel_documents() -> list[Document]:
    """The designer's birthplace (Dijon) is only reachable through the designer's name."""
    rows = [
        (
            "paris",
            "Paris",
            "en",
            "Paris is the capital of France. The Eiffel Tower stands in Paris.",
        ),
        (
            "tower",
            "Eiffel Tower",
            "en",
            "The Eiffel Tower was designed by the engineering company of Gustave Eiffel.",
        ),
        ("eiffel", "Gustave Eiffel", "fr", "Gustave Eiffel was born in Dijon in 1832."),
        ("dijon", "Dijon", "fr", "Dijon is known for its mustard."),
    ]
    return [
        Document(id=doc_id, page_content=text, metadata={"title": title, "lang": lang})
        for doc_id, title, lang, text in rows
    ]


@pytest.fixture
def eiffel_path(tmp_path: Path) -> Path:
    """Where the Eiffel index file of one test lives."""
    return tmp_path / "eiffel.sqlite"


@pytest.fixture
def eiffel_retriever(
    eiffel_documents: list[Document], eiffel_path: Path
) -> Iterator[SAG2Retriever]:
    """A retriever over the Eiffel corpus with the deterministic overlap judge and k=3."""
    with SAG2Retriever.from_documents(
        eiffel_documents, db_path=eiffel_path, judge=OverlapJudge(), k=3
    ) as retriever:
        yield retriever
