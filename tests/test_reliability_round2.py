"""Regression tests for the second reliability round (issue 12): one test per defect found."""

from __future__ import annotations

from pathlib import Path

import pytest

from sag2_retrievers.documents import Document
from sag2_retrievers.errors import InvalidInputError
from sag2_retrievers.index import SQLiteIndex


def test_nul_in_a_document_id_is_rejected() -> None:
    """Defect 1: json_each cuts ids at NUL, so an id holding one could never be found again."""
    with pytest.raises(InvalidInputError, match="NUL"):
        Document("a\x00b", "delta echo")


def test_delete_with_a_nul_id_is_rejected_and_deletes_nothing(index_path: Path) -> None:
    """Defect 1: 'victim\\x00anything' used to delete the document 'victim'."""
    with SQLiteIndex(index_path) as index:
        index.add_documents([Document("victim", "alpha bravo")], parallel=False)
        with pytest.raises(InvalidInputError, match="NUL"):
            index.delete(["victim\x00anything"])
        with pytest.raises(InvalidInputError, match="NUL"):
            index.metadata(["victim\x00anything"])
        assert index.document("victim") is not None
        assert index.document_count() == 1
