"""Ingest as users run it: loader output from a folder, re-runs, blank files, opening by path."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Sequence
from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_sag2 import SAG2Retriever

from sag2_retrievers import Candidate, IndexUnavailableError, InvalidInputError
from sag2_retrievers.judges import OverlapJudge


class RecordingJudge(OverlapJudge):
    """The overlap judge, remembering the passages it was asked to prepare."""

    def __init__(self) -> None:
        super().__init__()
        self.prepared: list[Candidate] = []

    def precompute(self, candidates: Sequence[Candidate], *, progress: bool = False) -> int:
        self.prepared.extend(candidates)
        return len(candidates)


def load(folder: Path) -> list[Document]:
    """What a LangChain file loader returns: one document per file, ``source`` = its path."""
    return [
        Document(page_content=path.read_text(), metadata={"source": str(path)})
        for path in sorted(folder.iterdir())
    ]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """Markdown with an H1, a text file, and a blank file."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "tower.md").write_text("# Eiffel Tower\n\nDesigned by Gustave Eiffel.\n")
    (data / "gustave_eiffel.txt").write_text("Gustave Eiffel was born in Dijon in 1832.\n")
    (data / "blank.txt").write_text("\n \n")
    return data


def test_running_from_documents_twice_does_not_duplicate_the_corpus(
    folder: Path, tmp_path: Path
) -> None:
    db = tmp_path / "i.sqlite"
    counts = []
    for _ in range(2):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            retriever = SAG2Retriever.from_documents(load(folder), db_path=db, judge=OverlapJudge())
        with retriever:
            counts.append(retriever.index.document_count())
    assert counts == [2, 2]


def test_stored_ids_are_the_file_paths_and_titles_follow_the_documented_order(
    folder: Path,
) -> None:
    with pytest.warns(UserWarning, match=r"blank\.txt"):
        retriever = SAG2Retriever.from_documents(load(folder), judge=OverlapJudge())
    with retriever:
        ids = retriever.add_documents(load(folder)[1:])
        titles = [retriever.index.document(doc_id).title for doc_id in ids]  # type: ignore[union-attr]
    assert ids == [str(folder / "gustave_eiffel.txt"), str(folder / "tower.md")]
    assert titles == ["gustave eiffel", "Eiffel Tower"]


def test_blank_documents_can_be_an_error(folder: Path) -> None:
    with pytest.raises(InvalidInputError, match=r"blank\.txt"):
        SAG2Retriever.from_documents(load(folder), judge=OverlapJudge(), skip_empty=False)


def test_exact_repeats_are_stored_once_and_return_one_id() -> None:
    twice = [Document(page_content="Dijon mustard.", metadata={"k": 1})] * 2
    with SAG2Retriever(judge=OverlapJudge()) as retriever:
        assert len(retriever.add_documents(twice)) == 1
        assert retriever.index.document_count() == 1


def test_create_false_refuses_a_mistyped_path_and_creates_nothing(tmp_path: Path) -> None:
    with pytest.raises(IndexUnavailableError, match="no index file"):
        SAG2Retriever(db_path=tmp_path / "typo.sqlite", judge=OverlapJudge(), create=False)
    assert list(tmp_path.iterdir()) == []


def test_create_false_opens_an_existing_index(folder: Path, tmp_path: Path) -> None:
    db = tmp_path / "i.sqlite"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        SAG2Retriever.from_documents(load(folder), db_path=db, judge=OverlapJudge()).close()
    with SAG2Retriever(db_path=db, judge=OverlapJudge(), create=False) as reopened:
        assert reopened.index.document_count() == 2


def test_a_missing_folder_says_so(tmp_path: Path) -> None:
    with pytest.raises(IndexUnavailableError, match="does not exist"):
        SAG2Retriever(db_path=tmp_path / "nope" / "i.sqlite", judge=OverlapJudge())


def test_added_passages_are_prepared_by_the_judge_unless_told_not_to(folder: Path) -> None:
    judge, lazy = RecordingJudge(), RecordingJudge()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        SAG2Retriever.from_documents(load(folder), judge=judge).close()
        SAG2Retriever.from_documents(load(folder), judge=lazy, precompute_judge=False).close()
    assert sorted(c.title for c in judge.prepared) == ["Eiffel Tower", "gustave eiffel"]
    assert lazy.prepared == []


def test_a_long_document_can_return_several_of_its_chunks() -> None:
    manual = "\n\n".join(
        f"Chapter {n} explains how the pump valve number {n} is serviced. " * 12 for n in range(12)
    )
    question = "How is the pump valve serviced?"
    with SAG2Retriever.from_texts([manual], judge=OverlapJudge(), k=3) as retriever:
        assert len(retriever.invoke(question)) == 1
    with SAG2Retriever.from_texts(
        [manual], judge=OverlapJudge(), k=3, units_per_document=3
    ) as retriever:
        results = retriever.invoke(question)
    assert len({doc.metadata["start_index"] for doc in results}) == 3


async def test_a_question_with_no_lexical_match_returns_nothing_and_says_why_in_a_debug_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with (
        SAG2Retriever.from_texts(["Dijon mustard."], judge=OverlapJudge()) as retriever,
        caplog.at_level(logging.DEBUG, logger="langchain_sag2"),
    ):
        assert retriever.invoke("zeppelin airship") == []
        assert await retriever.ainvoke("zeppelin airship") == []
    assert caplog.text.count("shares a term with the question") == 2


def test_a_failed_first_ingest_leaves_no_index_file(folder: Path, tmp_path: Path) -> None:
    db = tmp_path / "new.sqlite"
    with pytest.raises(InvalidInputError):
        SAG2Retriever.from_documents(
            load(folder), db_path=db, judge=OverlapJudge(), skip_empty=False
        )
    assert not db.exists()


def test_markdown_splitter_headers_fill_the_heading_field() -> None:
    """Chunks from MarkdownHeaderTextSplitter carry "Header 1", "Header 2"... metadata; they
    become the unit's heading path, which BM25 weighs like the title."""
    chunk = Document(
        page_content="Turn the valve clockwise until it stops.",
        metadata={"Header 2": "Shutting off water", "Header 1": "Plumbing guide"},
    )
    plain = Document(page_content="Turn the dial until it stops.", metadata={})
    retriever = SAG2Retriever.from_documents([chunk, plain], judge=OverlapJudge(), k=2)
    stored = {u.body: u.heading for u in retriever.index.units(range(1, 10)).values()}
    assert stored[chunk.page_content] == "Plumbing guide > Shutting off water"
    assert stored[plain.page_content] == ""
    hits = retriever.index.search("plumbing shutting", 2)
    assert hits and hits[0].text == chunk.page_content
    retriever.close()
