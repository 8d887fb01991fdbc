"""What a new user meets first (issue 23, item 10): titles in results, a warning for an empty
corpus, and a misspelt option named in the caller's words."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_sag2 import SAG2Retriever

from sag2_retrievers.judges import OverlapJudge


def test_results_carry_the_title_that_was_searched(tmp_path: Path) -> None:
    """A title from the markdown H1 (no title metadata) reaches metadata["title"]."""
    retriever = SAG2Retriever.from_documents(
        [Document(page_content="# Port Varna\n\nPort Varna lies in Ostrel.", id="varna")],
        db_path=tmp_path / "t.sqlite",
        judge=OverlapJudge(),
    )
    (hit,) = retriever.invoke("Where does Port Varna lie?")
    assert hit.metadata["title"] == "Port Varna"


def test_a_title_in_the_callers_metadata_is_kept(tmp_path: Path) -> None:
    retriever = SAG2Retriever.from_documents(
        [Document(page_content="Lies in Ostrel.", metadata={"title": "Varna", "name": "x"})],
        db_path=tmp_path / "t.sqlite",
        judge=OverlapJudge(),
        title_key="name",
    )
    (hit,) = retriever.invoke("What lies in Ostrel?")
    assert hit.metadata["title"] == "Varna"


def test_from_documents_of_nothing_warns(tmp_path: Path) -> None:
    with pytest.warns(UserWarning, match="got no documents"):
        SAG2Retriever.from_documents([], db_path=tmp_path / "e.sqlite", judge=OverlapJudge())


def test_a_misspelt_invoke_option_is_named_without_private_methods(tmp_path: Path) -> None:
    retriever = SAG2Retriever.from_documents(
        [Document(page_content="Port Varna lies in Ostrel.")],
        db_path=tmp_path / "k.sqlite",
        judge=OverlapJudge(),
    )
    with pytest.raises(TypeError, match="unknown option") as raised:
        retriever.invoke("Port Varna?", kk=3)
    assert "'kk'" in str(raised.value) and "_get_relevant" not in str(raised.value)


async def test_a_misspelt_ainvoke_option_is_named_too(tmp_path: Path) -> None:
    retriever = SAG2Retriever.from_documents(
        [Document(page_content="Port Varna lies in Ostrel.")],
        db_path=tmp_path / "a.sqlite",
        judge=OverlapJudge(),
    )
    with pytest.raises(TypeError, match="'kk'"):
        await retriever.ainvoke("Port Varna?", kk=3)
