"""Regression tests for the fourth reliability round (issue 32, items 3-9): one per defect."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from sag2_retrievers import SQLiteIndex
from sag2_retrievers.cli.app import main


def _sag2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Run ``sag2`` in-process: exit code, stdout and stderr."""
    code = main([*argv, "--quiet"])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _stored_ids(db: Path) -> list[str]:
    """The document ids an index file holds, sorted."""
    with SQLiteIndex(db, create=False) as index:
        return sorted({unit.doc_id for unit in index.units(range(1, 100)).values()})


# -- item 3: collision-free folder ids, duplicates within a run reported -------------------


def test_a_name_spelling_out_an_escape_and_one_holding_the_byte_get_two_ids(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Defect 3: ``bad\\xff\\xfe.txt`` (undecodable bytes) and a file literally named with the
    escape text mapped to one id, so the index held one of the two."""
    folder = tmp_path / "docs"
    folder.mkdir()
    (Path(os.fsdecode(bytes(folder) + b"/bad\xff\xfe.txt"))).write_text("raw bytes name")
    (folder / "bad\\xff\\xfe.txt").write_text("literal escape name")
    db = tmp_path / "i.sqlite"
    code, out, err = _sag2(["index", str(folder), "--db", str(db)], capsys)
    assert code == 0, err
    assert _stored_ids(db) == ["bad\\\\xff\\\\xfe.txt", "bad\\xff\\xfe.txt"]
    assert "holds 2 documents" in out


def test_records_of_one_run_claiming_one_id_fail_the_run_naming_the_id(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Defect 3: a text file and a JSONL record (and two JSONL records) with one id were
    upserted in silence: "indexed 4 records ... holds 2 documents", exit 0."""
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.txt").write_text("the text file")
    records = [
        {"id": "a.txt", "text": "a record claiming the file's id"},
        {"id": "r", "text": "first r"},
        {"id": "r", "text": "second r"},
    ]
    (folder / "b.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    db = tmp_path / "i.sqlite"
    code, out, err = _sag2(["index", str(folder), "--db", str(db)], capsys)
    assert code == 1
    assert "duplicate id 'a.txt' in 'b.jsonl'" in err and "'a.txt' with that id" in err
    assert "duplicate id 'r' in 'b.jsonl'" in err
    assert "2 record(s) have the id of an earlier record" in err
    assert "indexed 4 records (2 with a duplicate id, not indexed)" in out
    with SQLiteIndex(db, create=False) as index:
        assert [index.document(i).text for i in ("a.txt", "r")] == ["the text file", "first r"]


def test_skip_duplicates_keeps_the_first_record_and_still_lists_the_others(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--skip-duplicates accepts the first record of each id; the others are still named."""
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"id": "r", "text": "first"}\n{"id": "r", "text": "second"}\n')
    db = tmp_path / "i.sqlite"
    code, _, err = _sag2(["index", str(corpus), "--db", str(db), "--skip-duplicates"], capsys)
    assert code == 0
    assert "duplicate id 'r'" in err
    with SQLiteIndex(db, create=False) as index:
        assert index.document("r").text == "first"


def test_a_record_repeated_unchanged_is_stored_once_and_counted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same passage twice in a HippoRAG list loses nothing: counted, not a failure."""
    corpus = tmp_path / "c.json"
    corpus.write_text(json.dumps([{"title": "T", "text": "same passage"}] * 2))
    code, out, err = _sag2(["index", str(corpus), "--db", str(tmp_path / "i.sqlite")], capsys)
    assert code == 0, err
    assert "indexed 2 records (1 repeating an earlier record, stored once)" in out
