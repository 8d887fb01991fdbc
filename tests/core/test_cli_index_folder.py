"""`sag2 index DIR`, failed ingests that leave nothing behind, file errors, help defaults."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sag2_retrievers import SQLiteIndex
from sag2_retrievers.cli import main


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of one command."""
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """Markdown, text, a JSONL corpus in a subfolder, a blank file and an ignored file."""
    data = tmp_path / "docs"
    (data / "more").mkdir(parents=True)
    (data / "guide.md").write_text("# Pump guide\n\n## Wiring\n\nConnect the red wire first.\n")
    (data / "dijon_notes.txt").write_text("Dijon is famous for its mustard.\n")
    (data / "more" / "extra.jsonl").write_text(
        json.dumps({"id": "x1", "title": "Extra", "text": "An extra record."}) + "\n"
    )
    (data / "blank.md").write_text("\n")
    (data / "image.png").write_bytes(b"\x89PNG")
    return data


def test_index_a_folder_of_text_markdown_and_jsonl(
    folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "docs.sqlite"
    code, out, err = run(["index", str(folder), "--db", str(db), "--quiet"], capsys)
    assert code == 0, err
    assert "holds 3 documents" in out
    assert "1 blank" in out and "blank.md" not in err
    with SQLiteIndex(db, create=False) as index:
        guide = index.document("guide.md")
        notes = index.document("dijon_notes.txt")
        assert index.document("x1") is not None
        assert guide is not None and guide.title == "Pump guide"
        assert notes is not None and notes.title == "dijon notes"
        headings = {u.heading for u in index.document_units([guide.id]).values()}
    assert headings == {"Pump guide > Wiring"}


def test_indexing_a_folder_twice_upserts(
    folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "docs.sqlite"
    for _ in range(2):
        assert run(["index", str(folder), "--db", str(db), "--quiet"], capsys)[0] == 0
    with SQLiteIndex(db, create=False) as index:
        assert index.document_count() == 3


def test_a_failed_first_ingest_leaves_no_database_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine"}\n{not json\n')
    db = tmp_path / "out" / "bad.sqlite"
    code, _, err = run(["index", str(bad), "--db", str(db), "--batch-size", "5"], capsys)
    assert code == 1 and "line 2" in err
    assert not db.exists()
    assert not Path(f"{db}-wal").exists()


def test_a_folder_with_nothing_to_index_is_an_error_and_leaves_no_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    db = tmp_path / "e.sqlite"
    code, _, err = run(["index", str(empty), "--db", str(db)], capsys)
    assert code == 1 and "holds no file to index" in err
    assert not db.exists()


def test_a_file_error_is_worded_without_errno(
    tmp_path: Path, folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    code, _, err = run(["index", str(folder), "--db", str(blocker / "sub" / "i.db")], capsys)
    assert code == 1
    assert "[Errno" not in err
    assert "cannot use" in err and "file" in err


def test_help_shows_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["query", "--help"]) == 0
    out = capsys.readouterr().out
    assert "(default: 10)" in out and "(default: 2)" in out
    assert "(default: None)" not in out
