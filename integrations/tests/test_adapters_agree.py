"""Both framework adapters store the same folder under the same ids (one rule, sources.py)."""

from __future__ import annotations

import warnings
from pathlib import Path

from langchain_core.documents import Document as LangChainDocument
from langchain_sag2 import SAG2Retriever as LangChainRetriever
from llama_index.core import SimpleDirectoryReader
from llama_index.core.schema import Document as LlamaDocument
from llama_index.retrievers.sag2 import SAG2Retriever as LlamaRetriever

from sag2_retrievers import SQLiteIndex
from sag2_retrievers.judges import OverlapJudge


def stored_ids(index: SQLiteIndex) -> set[str]:
    """Every document id in an index."""
    return {unit.doc_id for unit in index.units(index.allowed_units({})).values()}


def test_a_folder_gets_the_same_ids_and_titles_in_both_adapters(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "tower.md").write_text("# Eiffel Tower\n\nDesigned by Gustave Eiffel.\n")
    (folder / "dijon.txt").write_text("Dijon is known for its mustard.\n")
    (folder / "blank.txt").write_text(" \n")
    langchain_documents = [
        LangChainDocument(page_content=path.read_text(), metadata={"source": str(path)})
        for path in sorted(folder.iterdir())
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        llama = LlamaRetriever.from_defaults(
            documents=SimpleDirectoryReader(str(folder)).load_data(), judge=OverlapJudge()
        )
        chain = LangChainRetriever.from_documents(langchain_documents, judge=OverlapJudge())
    with llama, chain:
        assert stored_ids(llama.sqlite_index) == stored_ids(chain.index)
        assert stored_ids(chain.index) == {str(folder / "tower.md"), str(folder / "dijon.txt")}
        for doc_id in stored_ids(chain.index):
            assert llama.sqlite_index.document(doc_id).title == chain.index.document(doc_id).title  # type: ignore[union-attr]


def test_documents_without_paths_get_the_same_content_ids_in_both_adapters() -> None:
    metadata = {"topic": "food"}
    with (
        LlamaRetriever.from_defaults(
            documents=[LlamaDocument(text="Dijon mustard.", metadata=metadata)],
            judge=OverlapJudge(),
        ) as llama,
        LangChainRetriever.from_texts(
            ["Dijon mustard."], metadatas=[metadata], judge=OverlapJudge()
        ) as chain,
    ):
        assert stored_ids(llama.sqlite_index) == stored_ids(chain.index)
