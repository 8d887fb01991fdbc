"""Re-running `from_documents` on the same loaded files writes nothing and returns the same
ids (issue 33, item 1, LangChain's half)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from langchain_core.documents import Document
from langchain_sag2 import SAG2Retriever

from sag2_retrievers.judges import OverlapJudge

QUESTION = "Where was the engineer of the Eiffel Tower born?"


def loaded(folder: Path) -> list[Document]:
    """The folder's files as a LangChain loader gives them: no id, the path in ``source``."""
    return [
        Document(page_content=path.read_text(), metadata={"source": str(path)})
        for path in sorted(folder.iterdir())
    ]


def every_row(db: Path) -> list[str]:
    """The whole database as SQL statements (a rewritten document gets new unit ids)."""
    with sqlite3.connect(db) as connection:
        return list(connection.iterdump())


def test_a_rerun_of_from_documents_writes_nothing_and_keeps_the_ids(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "tower.md").write_text("# Eiffel Tower\n\nDesigned by the engineer Gustave Eiffel.\n")
    (data / "gustave.txt").write_text("Gustave Eiffel was born in Dijon in 1832.\n")
    db = tmp_path / "index.sqlite"
    runs = []
    for _ in range(2):
        with SAG2Retriever.from_documents(loaded(data), db_path=db, judge=OverlapJudge()) as r:
            runs.append([(doc.id, doc.metadata["doc_id"]) for doc in r.invoke(QUESTION)])
        if len(runs) == 1:
            rows, size = every_row(db), db.stat().st_size
    assert runs[0] and runs[1] == runs[0]
    assert {doc_id for doc_id, _ in runs[0]} <= {str(path) for path in data.iterdir()}
    assert every_row(db) == rows
    assert db.stat().st_size == size


def test_pages_of_one_file_added_in_separate_calls_are_all_kept() -> None:
    """A loader's pages streamed one call at a time (lazy_load in batches) keep distinct ids:
    a later page must not overwrite an earlier one."""
    people = ["Alice was born in Paris.", "Bob was born in Rome.", "Carol was born in Oslo."]
    pages = [
        Document(page_content=text, metadata={"source": "report.pdf", "page": number})
        for number, text in enumerate(people)
    ]
    with SAG2Retriever(judge=OverlapJudge(), k=10) as retriever:
        ids = [retriever.add_documents([page])[0] for page in pages]
        found = {doc.page_content for doc in retriever.invoke("Who was born in Paris, Rome, Oslo?")}
    assert ids == [f"report.pdf#page={n}" for n in range(3)]
    assert found == set(people)
