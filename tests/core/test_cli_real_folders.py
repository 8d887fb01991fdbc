"""`sag2 index` on folders no one prepared: ids by path inside the folder, every text file read
(or counted as skipped), encodings, symlinks, re-runs, and hostile input files (issue 23,
items 3-7; issue 22, items 7-8)."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sag2_retrievers import Document, SQLiteIndex, input_files
from sag2_retrievers.cli import main
from sag2_retrievers.corpus_io import add_in_batches


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of one command."""
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def debian(tmp_path: Path) -> Path:
    """A folder like /usr/share/doc: extensionless READMEs, README.Debian, .rst, markdown,
    a UTF-16 file with a byte-order mark, a blank file, a gzipped changelog and a hidden
    folder."""
    docs = tmp_path / "doc"
    for package in ("pump", "valve"):
        (docs / package).mkdir(parents=True)
        (docs / package / "README").write_text(f"The {package} package moves water.\n")
        (docs / package / "README.Debian").write_text(f"Debian notes on {package} wiring.\n")
    (docs / "pump" / "intro.rst").write_text("Intro\n=====\n\nPriming the pump.\n")
    (docs / "valve" / "guide.md").write_text("# Valve guide\n\nTurn it slowly.\n")
    (docs / "valve" / "notes.txt").write_bytes("Flow notes, café.\n".encode("utf-16"))
    (docs / "valve" / "empty").write_text("\n")
    (docs / "pump" / "changelog.Debian.gz").write_bytes(
        gzip.compress(b"pump (1.1) unstable; urgency=low\n\n  * Quieter impeller.\n")
    )
    (docs / ".git" / "objects").mkdir(parents=True)
    (docs / ".git" / "HEAD").write_text("ref: main\n")
    (docs / ".git" / "objects" / "pack").write_text("not walked\n")
    return docs


def test_every_text_file_is_read_and_every_skip_is_counted_by_reason(
    debian: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(["index", str(debian), "--db", str(tmp_path / "d.sqlite"), "-q"], capsys)
    assert code == 0, err
    assert "holds 7 documents" in out
    assert (
        "7 files read, 3 skipped (1 hidden, 1 compressed (--read-compressed reads them), 1 blank)"
        in out
    )
    assert "empty" not in err  # a blank file is normal: counted in the summary, not warned
    with SQLiteIndex(tmp_path / "d.sqlite", create=False) as index:
        utf16 = index.document("valve/notes.txt")
        rst = index.document("pump/intro.rst")
        assert index.document("pump/README.Debian") is not None
    assert utf16 is not None and utf16.text == "Flow notes, café.\n"
    assert rst is not None and "Priming" in rst.text


def test_the_folder_spelled_three_ways_stores_one_copy(
    debian: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    db = str(tmp_path / "d.sqlite")
    monkeypatch.chdir(debian / "pump")
    for spelling in (str(debian), "..", os.path.join("..", "..", "doc")):
        code, _, err = run(["index", spelling, "--db", db, "-q"], capsys)
        assert code == 0, err
    with SQLiteIndex(db, create=False) as index:
        assert index.document_count() == 7
        readme = index.document("valve/README")
    assert readme is not None
    assert readme.metadata["folder"] == str(debian.resolve())
    assert readme.metadata["file_path"] == str(debian.resolve() / "valve" / "README")


def test_a_rerun_leaves_unchanged_documents_as_they_were(
    debian: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "d.sqlite")
    run(["index", str(debian), "--db", db, "-q"], capsys)
    with SQLiteIndex(db, create=False) as index:
        before = {
            name: set(index.document_units([name])) for name in ("pump/README", "valve/README")
        }
    (debian / "pump" / "README").write_text("The pump package now moves oil.\n")
    code, out, _ = run(["index", str(debian), "--db", db, "-q"], capsys)
    assert code == 0 and "(6 unchanged, not rewritten)" in out
    with SQLiteIndex(db, create=False) as index:
        after = {name: set(index.document_units([name])) for name in before}
        assert index.document_count() == 7
    # Unit ids only grow, so a rewritten document gets new ones: only the edited file did.
    assert after["valve/README"] == before["valve/README"]
    assert min(after["pump/README"]) > max(before["pump/README"] | before["valve/README"])


def test_a_single_text_file_is_a_corpus_of_one_document(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("Dijon is famous for its mustard.\n")
    db = str(tmp_path / "n.sqlite")
    code, _, err = run(["index", str(notes), "--db", db, "-q"], capsys)
    assert code == 0, err
    with SQLiteIndex(db, create=False) as index:
        document = index.document("notes.txt")
    assert document is not None and document.text.startswith("Dijon")


@pytest.fixture
def changelogs(tmp_path: Path) -> Path:
    """Three changelogs: one UTF-8, two Latin-1 (not valid UTF-8)."""
    folder = tmp_path / "changelogs"
    folder.mkdir()
    (folder / "a.changelog").write_text("Version 1: initial release.\n")
    (folder / "b.changelog").write_bytes("Version 2: fixes by Jos\xe9.\n".encode("latin-1"))
    (folder / "c.changelog").write_bytes("Version 3: na\xefve caf\xe9.\n".encode("latin-1"))
    return folder


def test_undecodable_files_are_all_listed_in_one_run_and_the_rest_is_kept(
    changelogs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "c.sqlite")
    code, _, err = run(["index", str(changelogs), "--db", db, "-q"], capsys)
    assert code == 1
    assert "'b.changelog': not UTF-8 text" in err and "'c.changelog': not UTF-8 text" in err
    assert err.count("sag2: error:") == 1 and "--encoding" in err and "Traceback" not in err
    with SQLiteIndex(db, create=False) as index:
        assert index.document_count() == 1


def test_encoding_reads_the_files_that_are_not_utf8_and_keeps_utf8_ones_as_they_are(
    changelogs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (changelogs / "d.changelog").write_text("Version 4: ünïcode stays UTF-8.\n")
    db = str(tmp_path / "c.sqlite")
    code, _, err = run(
        ["index", str(changelogs), "--db", db, "-q", "--encoding", "latin-1"], capsys
    )
    assert code == 0, err
    with SQLiteIndex(db, create=False) as index:
        latin = index.document("b.changelog")
        utf8 = index.document("d.changelog")
    assert latin is not None and "José" in latin.text
    assert utf8 is not None and "ünïcode" in utf8.text


def test_skip_undecodable_warns_and_succeeds(
    changelogs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "c.sqlite")
    code, out, err = run(["index", str(changelogs), "--db", db, "-q", "--skip-unreadable"], capsys)
    assert code == 0 and "2 not UTF-8 text" in out and "warning" in err


def test_an_unknown_encoding_is_named(changelogs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(
        ["index", str(changelogs), "--db", "x.sqlite", "--encoding", "klingon"], capsys
    )
    assert code == 1 and "unknown encoding 'klingon'" in err


def test_a_file_symlink_out_of_the_folder_is_not_followed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = tmp_path / "private" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("The vault code is 1234.\n")
    folder = tmp_path / "shared"
    folder.mkdir()
    (folder / "readme.txt").write_text("Shared notes.\n")
    (folder / "leak.txt").symlink_to(secret)
    (folder / "alias.txt").symlink_to(folder / "readme.txt")
    db = str(tmp_path / "s.sqlite")
    code, out, err = run(["index", str(folder), "--db", db, "-q"], capsys)
    assert code == 0 and err == ""  # counted, not warned: not a failure
    assert "1 a symlink to a file outside the folder" in out
    with SQLiteIndex(db, create=False) as index:
        assert index.document("leak.txt") is None
        assert index.document("alias.txt") is not None
        assert index.search("vault code") == []


def test_glob_restricts_a_folder_to_matching_files(
    debian: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "g.sqlite")
    code, out, _ = run(["index", str(debian), "--db", db, "-q", "--glob", "README*"], capsys)
    assert code == 0 and "holds 4 documents" in out and "not matching --glob" in out


def test_the_progress_bar_has_the_files_found_as_total_and_moves_per_batch(
    debian: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    code, _, err = run(["index", str(debian), "--db", str(tmp_path / "p.sqlite")], capsys)
    assert code == 0
    assert "10/10" in err


def test_batches_end_at_a_bound_on_characters(tmp_path: Path) -> None:
    documents = [Document(f"d{n}", "word " * 200_000) for n in range(5)]  # 1 MB each
    sizes: list[int] = []
    with SQLiteIndex(tmp_path / "b.sqlite") as index:
        report = add_in_batches(index, documents, batch_chars=2_000_000, on_batch=sizes.append)
    assert report.batches == 3 and sizes == [2, 2, 1]


HOSTILE = {
    "deep.jsonl": '{"text": "a", "metadata": {"x": ' + "[" * 100_000 + "]" * 100_000 + "}}\n",
    "deep.json": "[" * 100_000 + "]" * 100_000,
    "digits.jsonl": '{"text": "a", "metadata": {"n": ' + "9" * 5_000 + "}}\n",
    "surrogate.jsonl": '{"text": "a", "title": "\\ud800"}\n',
    "sentences.json": '{"\\udc00": ["A sentence."]}',
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_corpus_file_is_one_error_line_naming_it(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = tmp_path / name
    corpus.write_text(HOSTILE[name])
    db = tmp_path / "h.sqlite"
    code, _, err = run(["index", str(corpus), "--db", str(db), "-q"], capsys)
    assert code == 1
    assert err.startswith(f"sag2: error: {corpus}") and err.count("\n") == 1
    assert not db.exists()


@pytest.mark.parametrize("command", ["eval", "compare"])
def test_a_deeply_nested_questions_file_or_report_is_one_error_line(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nested = tmp_path / "nested.json"
    nested.write_text(HOSTILE["deep.json"])
    argv = (
        ["eval", str(nested), "--db", str(tmp_path / "e.sqlite"), "--method", "bm25"]
        if command == "eval"
        else ["compare", str(nested), str(nested)]
    )
    code, _, err = run(argv, capsys)
    assert code == 1 and err.startswith(f"sag2: error: {nested}: JSON nested too deeply")


def test_a_file_above_the_size_limit_is_refused_before_it_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(input_files, "MAX_FILE_BYTES", 1_000)
    big = tmp_path / "big.json"
    big.write_text(json.dumps([{"text": "x" * 2_000}]))
    monkeypatch.setattr(Path, "read_bytes", lambda self: pytest.fail("read the whole file"))
    code, _, err = run(["index", str(big), "--db", str(tmp_path / "b.sqlite")], capsys)
    assert code == 1 and "too large: 2,014 bytes, limit 1,000 bytes for a file read whole" in err


def test_a_jsonl_line_above_the_size_limit_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(input_files, "MAX_FILE_BYTES", 1_000)
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(json.dumps({"text": "short"}) + "\n" + json.dumps({"text": "x" * 2_000}))
    code, _, err = run(["index", str(corpus), "--db", str(tmp_path / "c.sqlite")], capsys)
    assert code == 1 and "line 2 is longer than" in err


def test_results_print_on_an_ascii_terminal(tmp_path: Path) -> None:
    """A title the terminal cannot show is escaped, not a UnicodeEncodeError traceback."""
    notes = tmp_path / "café.txt"
    notes.write_text("Café Varna serves coffee.\n")
    db = str(tmp_path / "a.sqlite")
    assert main(["index", str(notes), "--db", db, "-q"]) == 0
    environment = {**os.environ, "PYTHONIOENCODING": "ascii"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "sag2_retrievers.cli",
            "query",
            "--db",
            db,
            "café",
            "--judge",
            "fake",
        ],
        capture_output=True,
        env=environment,
        text=True,
        encoding="ascii",
        errors="replace",
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "caf\\xe9" in done.stdout


def test_an_index_option_on_an_existing_index_names_only_what_was_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--chunk-chars on a 'paper'-profile index names chunk_chars, not the analyzer."""
    notes = tmp_path / "notes.txt"
    notes.write_text("Dijon is famous for its mustard.\n")
    db = str(tmp_path / "p.sqlite")
    assert run(["index", str(notes), "--db", db, "-q", "--profile", "paper"], capsys)[0] == 0
    code, _, err = run(["index", str(notes), "--db", db, "-q", "--chunk-chars", "500"], capsys)
    assert code == 1 and "chunk_chars=2200" in err and "--chunk-chars 500" in err
    assert "analyzer" not in err and "profile" not in err
    same = ["index", str(notes), "--db", db, "-q", "--chunk-chars", "2200"]
    assert run(same, capsys)[0] == 0


def test_a_file_name_that_is_not_utf8_gets_an_escaped_id(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Latin-1 file name (bytes os.walk cannot decode) is indexed under a stable id."""
    folder = tmp_path / "names"
    folder.mkdir()
    (folder / os.fsdecode(b"caf\xe9.txt")).write_text("Coffee notes from the corner.\n")
    db = str(tmp_path / "n.sqlite")
    for _ in range(2):
        code, _, err = run(["index", str(folder), "--db", db, "-q"], capsys)
        assert code == 0, err
    with SQLiteIndex(db, create=False) as index:
        document = index.document("caf\\xe9.txt")
        assert document is not None and index.document_count() == 1
    assert document.title == "caf\\xe9"


def test_a_file_that_cannot_be_opened_is_listed_not_fatal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Permission denied on one file (simulated: the suite may run as root) skips only it."""
    from sag2_retrievers import corpus_folder

    folder = tmp_path / "locked"
    folder.mkdir()
    (folder / "open.txt").write_text("Readable notes.\n")
    (folder / "closed.txt").write_text("Private notes.\n")
    real = corpus_folder.looks_binary

    def denied(path: Path) -> bool:
        if path.name == "closed.txt":
            raise PermissionError(13, "Permission denied", str(path))
        return real(path)

    monkeypatch.setattr(corpus_folder, "looks_binary", denied)
    code, _, err = run(["index", str(folder), "--db", str(tmp_path / "l.sqlite"), "-q"], capsys)
    assert code == 1 and "'closed.txt': Permission denied" in err
    with SQLiteIndex(tmp_path / "l.sqlite", create=False) as index:
        assert index.document("open.txt") is not None


def test_dangling_and_looping_symlinks_are_counted_not_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "links"
    folder.mkdir()
    (folder / "notes.txt").write_text("Notes.\n")
    (folder / "gone.txt").symlink_to(folder / "missing.txt")
    (folder / "loop_a").symlink_to(folder / "loop_b")
    (folder / "loop_b").symlink_to(folder / "loop_a")
    code, out, err = run(["index", str(folder), "--db", str(tmp_path / "g.sqlite"), "-q"], capsys)
    assert code == 0, err
    assert "3 not a regular file" in out


def test_a_symlink_to_a_hidden_file_or_into_a_hidden_folder_is_hidden(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Regression: config.txt -> .env was indexed although hidden files are skipped."""
    folder = tmp_path / "project"
    (folder / ".private").mkdir(parents=True)
    (folder / ".env").write_text("API_KEY=hunter2\n")
    (folder / ".private" / "notes.md").write_text("# Private\n\nThe vault code is 1234.\n")
    (folder / "pub.txt").write_text("Public notes.\n")
    (folder / "config.txt").symlink_to(".env")
    (folder / "notes.md").symlink_to(Path(".private") / "notes.md")
    db = str(tmp_path / "h.sqlite")
    code, out, err = run(["index", str(folder), "--db", db, "-q"], capsys)
    assert code == 0 and err == ""
    assert "1 files read, 4 skipped (4 hidden)" in out
    with SQLiteIndex(db, create=False) as index:
        assert index.document("config.txt") is None and index.document("notes.md") is None
        assert index.search("hunter2") == [] and index.search("vault code") == []


def test_a_file_above_the_size_limit_in_a_folder_is_listed_and_the_walk_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: one large log stopped the walk; now it is an unreadable file like others."""
    monkeypatch.setattr(input_files, "MAX_FILE_BYTES", 1_000)
    folder = tmp_path / "logs"
    folder.mkdir()
    (folder / "a.md").write_text("# Alpha\n\nSmall notes.\n")
    (folder / "big.log").write_text("x" * 5_000)
    (folder / "big.json").write_text(json.dumps([{"text": "x" * 2_000}]))
    (folder / "z.md").write_text("# Zeta\n\nMore notes.\n")
    db = str(tmp_path / "l.sqlite")
    code, out, err = run(["index", str(folder), "--db", db, "-q"], capsys)
    assert code == 1
    assert "skipped 'big.log': too large: 5,000 bytes, limit 1,000" in err
    assert "skipped 'big.json': too large: 2," in err and str(folder) not in err
    code, out, err = run(["index", str(folder), "--db", db, "-q", "--skip-unreadable"], capsys)
    assert code == 0 and "2 files read, 2 skipped (2 too large)" in out
    with SQLiteIndex(db, create=False) as index:
        assert index.document("a.md") is not None and index.document("z.md") is not None


def test_a_text_file_a_document_cannot_hold_is_listed_and_the_walk_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A NUL past the sniffed head, or more characters than a document holds, is one file's
    problem, not the run's."""
    from sag2_retrievers import corpus_io

    monkeypatch.setattr(corpus_io, "MAX_TEXT_CHARS", 20_000)
    folder = tmp_path / "dump"
    folder.mkdir()
    (folder / "a.txt").write_text("Readable notes.\n")
    (folder / "late_nul.txt").write_text("y" * (input_files.SNIFF_BYTES + 10) + "\x00tail\n")
    (folder / "long.txt").write_text("word " * 5_000)
    db = str(tmp_path / "t.sqlite")
    code, out, err = run(["index", str(folder), "--db", db, "-q", "--skip-unreadable"], capsys)
    assert code == 0, err
    assert "skipped 'long.txt': too large: 25,000 characters, limit 20,000" in err
    assert "'late_nul.txt'" in err and "NUL" in err
    assert "1 files read, 2 skipped" in out
