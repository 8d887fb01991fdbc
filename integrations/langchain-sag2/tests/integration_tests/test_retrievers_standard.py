"""LangChain's standard retriever tests, unmodified, over a small index and a fake judge."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_sag2 import SAG2Retriever
from langchain_tests.integration_tests import RetrieversIntegrationTests

from sag2_retrievers.judges import OverlapJudge


class TestSAG2RetrieverStandard(RetrieversIntegrationTests):
    """Runs every test of ``RetrieversIntegrationTests`` against ``SAG2Retriever``."""

    index_file: Path

    @pytest.fixture(autouse=True, scope="class")
    @classmethod
    def _build_index_file(
        cls,
        tmp_path_factory: pytest.TempPathFactory,
        eiffel_documents: list[Document],
    ) -> None:
        """Build the index once; every constructed retriever reopens the same file."""
        path = tmp_path_factory.mktemp("standard") / "eiffel.sqlite"
        SAG2Retriever.from_documents(eiffel_documents, db_path=path, judge=OverlapJudge()).close()
        cls.index_file = path

    @property
    def retriever_constructor(self) -> type[SAG2Retriever]:
        """The class under test."""
        return SAG2Retriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        """Open the prebuilt file with the deterministic overlap judge."""
        return {"db_path": self.index_file, "judge": OverlapJudge()}

    @property
    def retriever_query_example(self) -> str:
        """A two-hop question that reaches all four documents."""
        return "Where was the designer of the Eiffel Tower born?"
