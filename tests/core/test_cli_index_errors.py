"""Errors a new user meets first with `sag2 query` and `sag2 index` (issue 33, item 12): an
empty index and a --db naming a folder each say what is wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from sag2_retrievers import SQLiteIndex
from sag2_retrievers.cli import main


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of one command."""
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_querying_an_index_with_no_documents_says_it_is_empty(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "empty.sqlite"
    SQLiteIndex(db).close()
    code, out, err = run(["query", "Where was Gustave Eiffel born?", "--db", str(db)], capsys)
    assert code == 1 and out == ""
    assert f"index '{db}' is empty (0 documents)" in err
    assert f"sag2 index CORPUS --db {db}" in err and "wording" not in err


@pytest.mark.parametrize("command", ["query", "index"])
def test_a_db_naming_a_folder_says_it_is_a_folder(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = tmp_path / "notes.txt"
    corpus.write_text("Gustave Eiffel was born in Dijon.\n")
    first = str(corpus) if command == "index" else "Where was Eiffel born?"
    code, _, err = run([command, first, "--db", str(tmp_path)], capsys)
    assert code == 1
    assert f"--db '{tmp_path}' is a folder; an index is one file" in err
    assert "does not exist" not in err
