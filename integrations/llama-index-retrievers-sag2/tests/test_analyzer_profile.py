"""The analyzer profile is chosen through ``index_settings`` and kept by the index file."""

from __future__ import annotations

from pathlib import Path

import pytest
from llama_index.core.schema import Document
from llama_index.retrievers.sag2 import SAG2Retriever

from sag2_retrievers import IndexSettings, IndexSettingsMismatchError
from sag2_retrievers.judges import OverlapJudge

KOREAN = [Document(text="서울은 한국의 수도이다.", metadata={"title": "서울"})]


def test_from_defaults_builds_a_paper_index_that_reopens_with_its_profile(tmp_path: Path) -> None:
    path = tmp_path / "paper.db"
    paper = IndexSettings(analyzer_profile="paper")
    with SAG2Retriever.from_defaults(
        documents=KOREAN, judge=OverlapJudge(), persist_path=path, index_settings=paper
    ) as retriever:
        # Syllables are tokens under "paper", so the particle-bound 수도이다 matches 수도.
        assert [n.node.metadata["title"] for n in retriever.retrieve("수도")] == ["서울"]
    with SAG2Retriever.from_persist_path(path, judge=OverlapJudge()) as reopened:
        assert reopened.sqlite_index.settings.analyzer_profile == "paper"
    with pytest.raises(IndexSettingsMismatchError, match="analyzer_profile"):
        SAG2Retriever.from_defaults(
            documents=KOREAN,
            judge=OverlapJudge(),
            persist_path=path,
            index_settings=IndexSettings(),
        )


def test_the_default_profile_keeps_korean_words_whole(tmp_path: Path) -> None:
    with SAG2Retriever.from_defaults(documents=KOREAN, judge=OverlapJudge()) as retriever:
        assert retriever.sqlite_index.settings.analyzer_profile == "sag2"
        assert retriever.retrieve("수도") == []
        assert len(retriever.retrieve("수도이다")) == 1
