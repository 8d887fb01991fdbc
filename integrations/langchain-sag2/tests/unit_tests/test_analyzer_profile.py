"""The analyzer profile is chosen through ``index_settings`` and kept by the index file."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_sag2 import SAG2Retriever

from sag2_retrievers import IndexSettings, IndexSettingsMismatchError
from sag2_retrievers.judges import OverlapJudge

KOREAN = [Document(page_content="서울은 한국의 수도이다.", metadata={"title": "서울"})]


def test_from_documents_builds_a_paper_index_that_reopens_with_its_profile(
    tmp_path: Path,
) -> None:
    path = tmp_path / "paper.db"
    paper = IndexSettings(analyzer_profile="paper")
    retriever = SAG2Retriever.from_documents(
        KOREAN, db_path=path, judge=OverlapJudge(), index_settings=paper
    )
    # Syllables are tokens under "paper", so the particle-bound 수도이다 matches 수도.
    assert [d.page_content for d in retriever.invoke("수도")] == [KOREAN[0].page_content]
    retriever.close()
    reopened = SAG2Retriever(db_path=path, judge=OverlapJudge(), create=False)
    assert reopened.index.settings.analyzer_profile == "paper"
    reopened.close()
    with pytest.raises(IndexSettingsMismatchError, match="analyzer_profile"):
        SAG2Retriever(db_path=path, judge=OverlapJudge(), index_settings=IndexSettings())


def test_the_default_profile_keeps_korean_words_whole(tmp_path: Path) -> None:
    retriever = SAG2Retriever.from_documents(
        KOREAN, db_path=tmp_path / "x.db", judge=OverlapJudge()
    )
    assert retriever.index.settings.analyzer_profile == "sag2"
    assert retriever.invoke("수도") == []
    retriever.close()
