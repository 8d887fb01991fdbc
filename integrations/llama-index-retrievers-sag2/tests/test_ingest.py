"""Ingest as users run it: SimpleDirectoryReader folders, re-runs, empty files, markdown."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Sequence
from pathlib import Path

import pytest
from llama_index.core import SimpleDirectoryReader
from llama_index.core.node_parser import MarkdownNodeParser
from llama_index.core.schema import Document
from llama_index.retrievers.sag2 import SAG2Retriever

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


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A data folder as users have one: markdown with and without an H1, text, an empty file."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "tower.md").write_text(
        "# Eiffel Tower\n\nThe tower was designed by Gustave Eiffel.\n\n"
        "## Construction\n\nBuilt from wrought iron between 1887 and 1889.\n"
    )
    (data / "notes.md").write_text("Dijon is famous for its mustard.\n")
    (data / "gustave_eiffel.txt").write_text("Gustave Eiffel was born in Dijon in 1832.\n")
    (data / "blank.txt").write_text("   \n\n")
    return data


def load(folder: Path) -> list[Document]:
    """What the usual script does: read the folder (every run gives new random ids)."""
    return SimpleDirectoryReader(str(folder)).load_data()


def test_running_the_usual_script_twice_does_not_duplicate_the_corpus(
    folder: Path, tmp_path: Path
) -> None:
    persist = tmp_path / "index.sqlite"
    counts = []
    for _ in range(2):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            retriever = SAG2Retriever.from_defaults(
                documents=load(folder), persist_path=persist, judge=OverlapJudge()
            )
        with retriever:
            counts.append(retriever.sqlite_index.document_count())
            ids = {r.node.node_id for r in retriever.retrieve("Where was Gustave Eiffel born?")}
    assert counts == [3, 3]
    assert str(folder / "gustave_eiffel.txt") in ids


def test_an_edited_file_replaces_its_old_version(folder: Path, tmp_path: Path) -> None:
    persist = tmp_path / "index.sqlite"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        SAG2Retriever.from_defaults(
            documents=load(folder), persist_path=persist, judge=OverlapJudge()
        ).close()
        (folder / "notes.md").write_text("Dijon is famous for its gingerbread.\n")
        with SAG2Retriever.from_defaults(
            documents=load(folder), persist_path=persist, judge=OverlapJudge()
        ) as retriever:
            stored = retriever.sqlite_index.document(str(folder / "notes.md"))
            assert retriever.sqlite_index.document_count() == 3
    assert stored is not None
    assert "gingerbread" in stored.text


def test_an_empty_file_is_skipped_with_one_warning_naming_it(folder: Path) -> None:
    with pytest.warns(UserWarning, match=r"blank\.txt") as caught:
        retriever = SAG2Retriever.from_defaults(documents=load(folder), judge=OverlapJudge())
    with retriever:
        assert retriever.sqlite_index.document_count() == 3
    assert len([w for w in caught if "no text" in str(w.message)]) == 1


def test_empty_files_can_be_an_error(folder: Path) -> None:
    with pytest.raises(InvalidInputError, match=r"blank\.txt"):
        SAG2Retriever.from_defaults(documents=load(folder), judge=OverlapJudge(), skip_empty=False)


def test_exact_repeats_in_one_batch_are_indexed_once() -> None:
    twice = [Document(text="Dijon mustard.", metadata={"k": 1})] * 2
    with SAG2Retriever.from_defaults(documents=twice, judge=OverlapJudge()) as retriever:
        assert retriever.sqlite_index.document_count() == 1


def test_titles_come_from_the_h1_then_the_file_name(folder: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        retriever = SAG2Retriever.from_defaults(documents=load(folder), judge=OverlapJudge())
    with retriever:
        titles = {
            Path(doc_id).name: retriever.sqlite_index.document(doc_id).title  # type: ignore[union-attr]
            for doc_id in (
                str(folder / name) for name in ("tower.md", "notes.md", "gustave_eiffel.txt")
            )
        }
    assert titles == {
        "tower.md": "Eiffel Tower",
        "notes.md": "notes",
        "gustave_eiffel.txt": "gustave eiffel",
    }


def test_markdown_node_parser_header_paths_fill_the_heading_field(folder: Path) -> None:
    documents = [d for d in load(folder) if d.metadata["file_name"] == "tower.md"]
    nodes = MarkdownNodeParser().get_nodes_from_documents(documents)
    with SAG2Retriever.from_defaults(nodes=nodes, judge=OverlapJudge()) as retriever:
        index = retriever.sqlite_index
        # The parser's random node ids were replaced by "<file path>_part_<i>".
        ids = [f"{folder / 'tower.md'}_part_{i}" for i in range(len(nodes))]
        headings = sorted(unit.heading for unit in index.document_units(ids).values())
    assert headings == ["Eiffel Tower", "Eiffel Tower > Construction"]


def test_the_judge_prepares_every_indexed_passage_at_ingest_unless_told_not_to(
    folder: Path,
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        judge = RecordingJudge()
        SAG2Retriever.from_defaults(documents=load(folder), judge=judge).close()
        assert len(judge.prepared) == 3
        assert "Eiffel Tower" in {c.title for c in judge.prepared}
        lazy = RecordingJudge()
        SAG2Retriever.from_defaults(
            documents=load(folder), judge=lazy, precompute_judge=False
        ).close()
    assert lazy.prepared == []


def test_a_persist_path_in_a_missing_folder_says_so(tmp_path: Path) -> None:
    with pytest.raises(IndexUnavailableError, match="does not exist"):
        SAG2Retriever.from_defaults(
            documents=[Document(text="x")], persist_path=tmp_path / "nope" / "i.sqlite"
        )


def test_a_long_document_can_return_several_of_its_chunks() -> None:
    manual = Document(
        id_="manual",
        text="\n\n".join(
            f"Chapter {n} explains how the pump valve number {n} is serviced. " * 12
            for n in range(12)
        ),
    )
    question = "How is the pump valve serviced?"
    with SAG2Retriever.from_defaults(
        documents=[manual], judge=OverlapJudge(), similarity_top_k=3
    ) as retriever:
        assert len(retriever.retrieve(question)) == 1
    with SAG2Retriever.from_defaults(
        documents=[manual], judge=OverlapJudge(), similarity_top_k=3, units_per_document=3
    ) as retriever:
        results = retriever.retrieve(question)
    assert len({r.node.node_id for r in results}) == 3
    assert {r.node.source_node.node_id for r in results} == {"manual"}  # type: ignore[union-attr]


def test_a_question_with_no_lexical_match_returns_nothing_and_says_why_in_a_debug_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with (
        SAG2Retriever.from_defaults(
            documents=[Document(text="Dijon mustard.")], judge=OverlapJudge()
        ) as retriever,
        caplog.at_level(logging.DEBUG, logger="llama_index.retrievers.sag2"),
    ):
        assert retriever.retrieve("zeppelin airship") == []
    assert "shares a term with the question" in caplog.text


def test_a_failed_first_ingest_leaves_no_index_file(tmp_path: Path) -> None:
    clash = [Document(id_="same", text="one"), Document(id_="same", text="two")]
    path = tmp_path / "new.sqlite"
    with pytest.raises(InvalidInputError, match="twice"):
        SAG2Retriever.from_defaults(documents=clash, persist_path=path, judge=OverlapJudge())
    assert not path.exists()
