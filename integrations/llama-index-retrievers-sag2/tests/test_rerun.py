"""Re-running the README's flow (SimpleDirectoryReader -> SentenceSplitter ->
`from_defaults(nodes=..., persist_path=...)`) on unchanged files writes nothing and returns
the same ids (issue 33, item 1)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from llama_index.core import SimpleDirectoryReader
from llama_index.core.node_parser import SentenceSplitter
from llama_index.retrievers.sag2 import SAG2Retriever

from sag2_retrievers.judges import OverlapJudge

QUESTION = "Where was the engineer of the Eiffel Tower born?"


def readme_flow(data: Path, db: Path) -> list[tuple[str, str | None]]:
    """One run of the README's script: (node id, source id) of each node retrieved."""
    documents = SimpleDirectoryReader(str(data)).load_data()
    nodes = SentenceSplitter(chunk_size=48, chunk_overlap=0).get_nodes_from_documents(documents)
    with SAG2Retriever.from_defaults(nodes=nodes, persist_path=db, judge=OverlapJudge()) as r:
        return [(hit.node.node_id, hit.node.ref_doc_id) for hit in r.retrieve(QUESTION)]


def every_row(db: Path) -> list[str]:
    """The whole database as SQL statements: equal dumps mean no row was rewritten (a rewritten
    document gets new unit ids, which only grow)."""
    with sqlite3.connect(db) as connection:
        return list(connection.iterdump())


def test_a_rerun_on_unchanged_files_writes_nothing_and_keeps_the_ids(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "tower.md").write_text(
        "# Eiffel Tower\n\nThe Eiffel Tower was designed by the engineer Gustave Eiffel. "
        "It stands in Paris and was built for the World's Fair of 1889 from wrought iron.\n"
    )
    (data / "gustave.txt").write_text(
        "Gustave Eiffel was born in Dijon in 1832. He studied in Paris and later built "
        "bridges and viaducts across Europe and South America.\n"
    )
    db = tmp_path / "index.sqlite"
    first = readme_flow(data, db)
    rows, size = every_row(db), db.stat().st_size
    second = readme_flow(data, db)
    assert first and second == first
    assert all(source is not None and source.startswith(str(data)) for _, source in first)
    assert every_row(db) == rows
    assert db.stat().st_size == size


def test_chunks_of_each_page_name_their_page_as_the_source() -> None:
    """Pages of one file (random ids, one file_path) give their chunks distinct sources, the
    ids the same pages get when indexed whole, so offsets are never mixed across pages."""
    from llama_index.core import Document

    pages = [
        Document(
            text="Alice was born in Paris. " * 3,
            metadata={"file_path": "/d/n.pdf", "page_label": "1"},
        ),
        Document(
            text="Bob was born in Rome. " * 3, metadata={"file_path": "/d/n.pdf", "page_label": "2"}
        ),
    ]
    nodes = SentenceSplitter(chunk_size=1024).get_nodes_from_documents(pages)
    question = "Who was born in Paris or Rome?"
    with SAG2Retriever.from_defaults(nodes=nodes, judge=OverlapJudge(), similarity_top_k=5) as r:
        chunked = {hit.node.ref_doc_id for hit in r.retrieve(question)}
    with SAG2Retriever.from_defaults(
        documents=pages, judge=OverlapJudge(), similarity_top_k=5
    ) as r:
        whole = {hit.node.ref_doc_id for hit in r.retrieve(question)}
    assert chunked == whole == {"/d/n.pdf#page_label=1", "/d/n.pdf#page_label=2"}
