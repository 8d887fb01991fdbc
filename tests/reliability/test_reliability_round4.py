"""Regression tests for the fourth reliability round (issue 32, items 3-9): one per defect."""

from __future__ import annotations

import inspect
import json
import logging
import os
import sys
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sag2_retrievers import SQLiteIndex, corpus_io, input_files, output_files
from sag2_retrievers.backends.postgres import PostgresIndex
from sag2_retrievers.cli.app import main
from sag2_retrievers.documents import Document
from sag2_retrievers.errors import InvalidInputError, SAG2Error
from sag2_retrievers.server_dsn import is_server, shown
from tests.postgres_server import PostgresServer


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


# -- item 4: an unreadable sub-folder is counted, listed and fails the run ------------------


def _locked_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder with a readable file and a sub-folder that cannot be listed (its mode is 000;
    as root, which reads any folder, listing it raises the same PermissionError)."""
    folder = tmp_path / "docs"
    (folder / "locked").mkdir(parents=True)
    (folder / "open.txt").write_text("Readable notes.\n")
    (folder / "locked" / "hidden.txt").write_text("Private notes.\n")
    (folder / "locked").chmod(0)
    real = os.scandir

    def scandir(path: str | os.PathLike[str]) -> object:
        if Path(path).name == "locked":
            raise PermissionError(13, "Permission denied", str(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)
    return folder


def test_an_unreadable_sub_folder_is_listed_and_fails_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defect 4: os.walk without onerror skipped a folder it could not list without a word."""
    folder = _locked_folder(tmp_path, monkeypatch)
    try:
        code, out, err = _sag2(["index", str(folder), "--db", str(tmp_path / "i.db")], capsys)
    finally:
        (folder / "locked").chmod(0o755)
    assert code == 1
    assert "skipped 'locked/': Permission denied (a folder: nothing in it was read)" in err
    assert "1 file(s) could not be read" in err
    assert "1 files read, 1 skipped (1 could not be read)" in out
    assert _stored_ids(tmp_path / "i.db") == ["open.txt"]


def test_skip_unreadable_accepts_an_unreadable_sub_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """--skip-unreadable accepts skipping the folder, as it does an unreadable file."""
    folder = _locked_folder(tmp_path, monkeypatch)
    try:
        argv = ["index", str(folder), "--db", str(tmp_path / "i.db"), "--skip-unreadable"]
        code, _, err = _sag2(argv, capsys)
    finally:
        (folder / "locked").chmod(0o755)
    assert code == 0
    assert "'locked/': Permission denied" in err


# -- item 5: deep folders are walked without recursion --------------------------------------


def test_a_thousand_nested_folders_are_walked_without_recursion(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defect 5: os.walk recurses on Python 3.10 and 3.11, so 1,000 nested folders ended in a
    RecursionError traceback; the walk runs here under a recursion limit it could not meet."""
    folder = deepest = tmp_path / "deep"
    folder.mkdir()
    for _ in range(1000):  # Path.mkdir(parents=True) would itself recurse 1,000 deep
        deepest /= "d"
        deepest.mkdir()
    (deepest / "bottom.txt").write_text("At the bottom of the folders.\n")
    (folder / "top.txt").write_text("At the top.\n")
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(len(inspect.stack()) + 300)
    try:
        code, out, err = _sag2(["index", str(folder), "--db", str(tmp_path / "i.db")], capsys)
    finally:
        sys.setrecursionlimit(limit)
        _remove_nested(deepest, folder)
    assert code == 0, err
    assert "2 files read" in out
    assert "/".join(["d"] * 1000) + "/bottom.txt" in _stored_ids(tmp_path / "i.db")


def _remove_nested(deepest: Path, top: Path) -> None:
    """Remove a chain of nested folders from the bottom up (shutil.rmtree, which pytest's
    tmp_path cleanup uses, recurses once per level on Python 3.11)."""
    for path in deepest.iterdir():
        path.unlink()
    while deepest != top:
        deepest.rmdir()
        deepest = deepest.parent


# -- item 6: regular files only, reads bounded on the open handle ---------------------------


@pytest.mark.parametrize("special", ["/dev/zero", "fifo"])
def test_eval_refuses_a_device_or_a_fifo_as_its_questions_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], special: str
) -> None:
    """Defect 6: `sag2 eval /dev/zero` read until out of memory; a FIFO with no writer hung."""
    questions = Path(special)
    if special == "fifo":
        questions = tmp_path / "questions.json"
        os.mkfifo(questions)
    argv = ["eval", str(questions), "--db", str(tmp_path / "i.db"), "--method", "bm25"]
    code, _, err = _sag2(argv, capsys)
    assert code == 1
    assert f"{questions}: not a regular file" in err


@pytest.mark.parametrize(
    "read",
    [
        input_files.read_text,
        input_files.read_json,
        lambda path: list(input_files.text_lines(path)),
        input_files.looks_binary,
        corpus_io.corpus_kind,
    ],
)
def test_every_reader_refuses_a_special_file_before_reading(read: Any, tmp_path: Path) -> None:
    """Each way the package reads a file checks what it opened, so a FIFO does not block."""
    fifo = tmp_path / "stream"
    os.mkfifo(fifo)
    with pytest.raises(input_files.NotRegularFileError):
        read(fifo)


def test_a_file_growing_while_read_is_read_only_to_the_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defect 6: the limit was a stat before read_bytes(), so a file that grew after the stat
    was read whole (552M characters); now at most the limit + 1 bytes are read."""
    monkeypatch.setattr(input_files, "MAX_FILE_BYTES", 1_000)
    grown = tmp_path / "grown.json"
    grown.write_text("[]")
    real_open = input_files.open_regular

    def open_then_grow(path: Path) -> Any:
        handle = real_open(path)
        path.write_text(json.dumps([{"text": "x" * 50_000}]))  # after any check of its size
        return _CountingReader(handle)

    monkeypatch.setattr(input_files, "open_regular", open_then_grow)
    with pytest.raises(InvalidInputError, match=r"too large: .* bytes, limit 1,000 bytes"):
        input_files.read_text(grown)
    assert _CountingReader.last_read <= 1_001


class _CountingReader:
    """A file handle that remembers how many bytes its last read returned."""

    last_read = 0

    def __init__(self, handle: Any) -> None:
        self.handle = handle

    def __enter__(self) -> _CountingReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.handle.close()

    def read(self, size: int) -> bytes:
        raw: bytes = self.handle.read(size)
        _CountingReader.last_read = len(raw)
        return raw


# -- item 7: a trace never replaces the index, and is written whole ------------------------


@pytest.fixture
def built_index(tmp_path: Path, tiny_corpus: tuple[Document, ...]) -> Path:
    """An index file holding the tiny corpus."""
    db = tmp_path / "index.sqlite"
    with SQLiteIndex(db) as index:
        index.add_documents(tiny_corpus, parallel=False)
    return db


def _query_with_trace(db: Path, trace: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """`sag2 query` with the fake judge and --trace-html: exit code and stderr."""
    argv = ["query", "--db", str(db), "--judge", "fake", "--trace-html", str(trace)]
    code, _, err = _sag2([*argv, "Who wrote The Hobbit?"], capsys)
    return code, err


def test_a_trace_naming_the_index_is_refused_and_the_index_kept(
    built_index: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Defect 7: `--trace-html` naming the index file replaced the index with HTML."""
    before = built_index.read_bytes()
    code, err = _query_with_trace(built_index, built_index, capsys)
    assert code == 1 and "is not an HTML page" in err
    assert built_index.read_bytes() == before
    with SQLiteIndex(built_index, create=False) as index:
        assert index.search("Hobbit", 1)


def test_a_trace_over_another_file_is_refused_and_over_an_old_trace_written(
    built_index: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Any existing file that is not an HTML page is kept; a trace written before is replaced."""
    notes = tmp_path / "notes.html"
    notes.write_text("my notes, not a page\n")
    code, _ = _query_with_trace(built_index, notes, capsys)
    assert code == 1 and notes.read_text() == "my notes, not a page\n"
    trace = tmp_path / "trace.html"
    trace.write_text("<!DOCTYPE html>\n<html>an old trace</html>\n")
    code, err = _query_with_trace(built_index, trace, capsys)
    assert code == 0, err
    assert "SAG2 retrieval trace" in trace.read_text()


def test_a_trace_that_fails_midway_leaves_the_old_page_and_no_partial_file(
    built_index: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    """The page is written to a temporary file renamed over the target: never half a page."""
    trace = tmp_path / "trace.html"
    trace.write_text("<!DOCTYPE html>\n<html>an old trace</html>\n")

    def full_disk(descriptor: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(output_files.os, "fsync", full_disk)
    code, err = _query_with_trace(built_index, trace, capsys)
    assert code == 1 and "no space left on device" in err
    assert trace.read_text() == "<!DOCTYPE html>\n<html>an old trace</html>\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["index.sqlite", "trace.html"]


def test_eval_traces_into_an_existing_file_are_refused(
    built_index: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`sag2 eval --trace-html` names a folder; naming the index file is refused up front."""
    questions = tmp_path / "q.json"
    questions.write_text(json.dumps([{"id": "q", "question": "Hobbit?", "gold": ["hobbit"]}]))
    before = built_index.read_bytes()
    argv = ["eval", str(questions), "--db", str(built_index), "--method", "sag2"]
    code, _, err = _sag2([*argv, "--judge", "fake", "--trace-html", str(built_index)], capsys)
    assert code == 1 and "exists and is not a folder" in err
    assert built_index.read_bytes() == before


# -- item 8: no password of any DSN form in an error, log, repr, trace or report ----------

SECRET_PARTS = ("Hunter2", "Secret9")  # each half of a password, so a split one is caught too
PASSWORD = "Hunter2Secret9"


def _dsn_forms(port: int) -> dict[str, str]:
    """Every spelling of a connection the package accepts, each holding the password."""
    where = f"127.0.0.1:{port}"
    return {
        "url": f"postgresql://postgres:{PASSWORD}@{where}/postgres",
        "postgres-scheme url": f"postgres://postgres:{PASSWORD}@{where}/postgres",
        "url with the password in its query": f"postgresql://postgres@{where}/postgres"
        f"?password={PASSWORD}",
        "key=value": f"host=127.0.0.1 port={port} user=postgres password={PASSWORD} "
        "dbname=postgres",
        "key=value, quoted": f"host=127.0.0.1 port={port} user=postgres "
        f"password='{SECRET_PARTS[0]} {SECRET_PARTS[1]}' dbname=postgres",
    }


MALFORMED_DSNS = {
    "url with an unclosed IPv6 bracket": f"postgresql://u:{PASSWORD}@[::1:5432/db",
    "url whose password holds a slash": f"postgresql://u:{SECRET_PARTS[0]}/{SECRET_PARTS[1]}"
    "@127.0.0.1:9/db",
    "url with a port that is not a number": f"postgresql://u:{PASSWORD}@127.0.0.1:x9/db",
    "key=value with an unquoted space": f"host=127.0.0.1 password={SECRET_PARTS[0]} "
    f"{SECRET_PARTS[1]} user=u",
    "key=value with an unknown option": f"host=127.0.0.1 pasword={PASSWORD}",
}


def _leaks(text: str) -> list[str]:
    """The parts of the password that appear in ``text``."""
    return [part for part in SECRET_PARTS if part in text]


def _eval_files() -> tuple[Path, Path]:
    """A shared questions file and its corpus; skips when the shared data is absent."""
    from tests.conftest import SHARED_DATA

    questions = SHARED_DATA / "hipporag_format_samples" / "sample.json"
    corpus = SHARED_DATA / "hipporag_format_samples" / "sample_corpus.json"
    if not questions.exists():
        pytest.skip("shared sample data not found")
    return questions, corpus


def _every_command(dsn: str, tmp_path: Path) -> list[list[str]]:
    """index, query, eval (with a report) and a query's HTML trace, each on ``dsn``."""
    questions, corpus = _eval_files()
    report, trace = tmp_path / "report.json", tmp_path / "trace.html"
    return [
        ["index", str(corpus), "--db", dsn],
        ["query", "--db", dsn, "--judge", "fake", "--trace-html", str(trace), "a question"],
        ["query", "--db", dsn, "--judge", "fake", "--json", "a question"],
        ["eval", str(questions), "--db", dsn, "--method", "bm25", "--out", str(report)],
    ]


def _written(tmp_path: Path) -> str:
    """Everything the commands wrote to files (the report, the trace)."""
    return "".join(path.read_text() for path in tmp_path.glob("*.*") if path.is_file())


@pytest.mark.parametrize("name", sorted(MALFORMED_DSNS))
def test_a_malformed_dsn_never_shows_its_password(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: Any
) -> None:
    """Defect 8: a malformed URL's ProgrammingError quoted it, password and all ("... a write
    was rolled back"); a key=value string was taken for an SQLite path and echoed whole."""
    pytest.importorskip("psycopg")
    dsn = MALFORMED_DSNS[name]
    caplog.set_level(logging.DEBUG)
    assert is_server(dsn)
    assert _leaks(shown(dsn)) == []
    for argv in _every_command(dsn, tmp_path):
        code, out, err = _sag2(argv, capsys)
        assert code == 1, out + err
        assert "rolled back" not in err
        assert _leaks(out + err + caplog.text) == [], argv
    with pytest.raises(SAG2Error) as caught:
        PostgresIndex(dsn)
    assert _leaks("".join(traceback.format_exception(caught.value))) == []
    assert not list(tmp_path.iterdir())


def test_a_server_that_cannot_be_reached_never_shows_a_password(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: Any
) -> None:
    """A refused connection names the failure, not the DSN, for every form."""
    pytest.importorskip("psycopg")
    caplog.set_level(logging.DEBUG)
    for dsn in _dsn_forms(9).values():
        for argv in _every_command(dsn, tmp_path):
            code, out, err = _sag2(argv, capsys)
            assert code == 1 and "cannot connect to PostgreSQL" in err
            assert _leaks(out + err + caplog.text) == [], argv


@pytest.fixture
def default_schema(postgres_server: PostgresServer) -> Iterator[str]:
    """The schema `sag2 --db` writes to (the CLI names no other), dropped after the test so
    the session's other tests find the server as they left it."""
    psycopg = pytest.importorskip("psycopg")
    yield "sag2"
    with psycopg.connect(postgres_server.dsn, autocommit=True) as connection:
        connection.execute('DROP SCHEMA IF EXISTS "sag2" CASCADE')


def test_no_output_of_a_working_server_shows_a_password(
    postgres_server: PostgresServer, default_schema: str, tmp_path: Path, capsys: Any, caplog: Any
) -> None:
    """index, query (text, JSON, HTML trace), eval (table and report), the index's repr and
    the logs: none holds the password, for every DSN form, on a real server."""
    caplog.set_level(logging.DEBUG)
    for name, dsn in _dsn_forms(postgres_server.port).items():
        for argv in _every_command(dsn, tmp_path):
            code, out, err = _sag2(argv, capsys)
            assert code == 0, (name, err)
            assert _leaks(out + err + caplog.text + _written(tmp_path)) == [], (name, argv)
        with PostgresIndex(dsn, schema=default_schema, create=False) as index:
            assert _leaks(repr(index) + str(vars(index))) == []


def test_a_printed_dsn_keeps_where_and_who_but_not_the_password() -> None:
    """What the summary line and the report name: host, port, database and user only."""
    forms = _dsn_forms(5432)
    assert shown(forms["url"]) == "postgresql://postgres@127.0.0.1:5432/postgres"
    assert shown(forms["key=value, quoted"]) == (
        "host=127.0.0.1 port=5432 dbname=postgres user=postgres"
    )
    assert shown("runs/index.sqlite") == "runs/index.sqlite"
    assert not is_server("runs/host=1.sqlite") and is_server("host=db.example dbname=x")


def test_a_file_replaced_by_a_fifo_during_the_walk_is_counted_not_fatal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file the walk listed as regular but that is a FIFO when opened is skipped as
    special, like one found special by the walk; the other files are indexed."""
    from sag2_retrievers import corpus_folder

    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "kept.txt").write_text("Kept notes.\n")
    (folder / "swapped.txt").write_text("Swapped for a FIFO.\n")
    real = corpus_folder.looks_binary

    def swapped(path: Path) -> bool:
        if path.name == "swapped.txt":
            path.unlink()
            os.mkfifo(path)
        return real(path)

    monkeypatch.setattr(corpus_folder, "looks_binary", swapped)
    code, out, err = _sag2(["index", str(folder), "--db", str(tmp_path / "i.db")], capsys)
    assert code == 0, err
    assert "1 files read, 1 skipped (1 not a regular file)" in out


def test_a_record_repeated_within_one_file_is_counted_as_a_repeat(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same JSONL line twice is one document and one repeat, whatever file it is in."""
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"id": "r", "text": "same"}\n' * 2)
    code, out, err = _sag2(["index", str(corpus), "--db", str(tmp_path / "i.sqlite")], capsys)
    assert code == 0, err
    assert "indexed 2 records (1 repeating an earlier record, stored once)" in out
