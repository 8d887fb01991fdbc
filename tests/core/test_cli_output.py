"""`sag2 query` output that explains itself: the judge named, a legend for the columns, the
text around what matched, repeated texts folded, plain words for an empty result (issue 23,
items 2 and 8)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sag2_retrievers import Document, SQLiteIndex
from sag2_retrievers.cli import main
from sag2_retrievers.cli.common import preview

LICENSE = "Permission is hereby granted, free of charge, to any person obtaining a copy. " * 3


@pytest.fixture
def db(tmp_path: Path) -> str:
    """Three packages whose copyright files are the same text, and one long README whose
    match lies far from its start."""
    path = str(tmp_path / "q.sqlite")
    readme = "Installation notes. " * 40 + "The quokka daemon reads its settings from quokka.conf."
    documents = [Document(f"{name}/copyright", LICENSE, "copyright") for name in ("a", "b", "c")]
    with SQLiteIndex(path) as index:
        index.add_documents([*documents, Document("d/README", readme, "README")], parallel=False)
    return path


def query(db: str, question: str, capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    """stdout of one `sag2 query` with the fake judge."""
    assert main(["query", "--db", db, question, "--judge", "fake", *extra]) == 0
    return capsys.readouterr().out


def test_query_names_its_judge_and_explains_the_columns(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = query(db, "Who is granted permission?", capsys)
    assert out.startswith("judge: fake, a deterministic word-overlap judge")
    assert "round: 0 = a BM25 candidate" in out and "scores need not descend" in out


def test_hits_with_the_same_text_are_folded_into_the_first(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = query(db, "Who is granted permission?", capsys)
    assert out.count("copyright  (") == 1
    assert "same text also in: b/copyright, c/copyright" in out


def test_the_preview_shows_the_text_around_what_matched(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = query(db, "Where does the quokka daemon read its settings?", capsys)
    assert "... " in out and "quokka daemon reads its settings" in out


def test_preview_starts_at_the_text_when_nothing_matched() -> None:
    assert preview("word " * 100).startswith("word word")
    assert preview("word " * 100 + "needle", ["needle"]).startswith("... ")


def test_a_stopwords_only_question_is_explained_in_plain_words(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = query(db, "the of and", capsys)
    assert "no evidence found: the question has no searchable term" in out
    assert "query expression" not in out
