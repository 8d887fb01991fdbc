"""`sag2 index DIR` on real documentation folders (issue 33, items 7-11): titles that tell
files apart, compressed and HTML files read as text, .json files that are not corpora, and
warnings only for real failures, each naming the file by its path inside the folder."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from sag2_retrievers import SQLiteIndex, input_files
from sag2_retrievers.cli import index as index_command
from sag2_retrievers.cli import main
from sag2_retrievers.documents import MAX_TITLE_CHARS, Document
from sag2_retrievers.file_titles import name_title, rst_title
from sag2_retrievers.html_text import html_text


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of one command."""
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def titles(db: Path, doc_ids: Iterable[str]) -> dict[str, str]:
    """The stored title of each of these documents."""
    with SQLiteIndex(db, create=False) as index:
        found = {doc_id: index.document(doc_id) for doc_id in doc_ids}
    return {doc_id: doc.title for doc_id, doc in found.items() if doc is not None}


@pytest.fixture
def packages(tmp_path: Path) -> Path:
    """Two packages' documentation as Debian ships it, and a Python package."""
    docs = tmp_path / "doc"
    for package in ("pump", "valve"):
        (docs / package).mkdir(parents=True)
        (docs / package / "copyright").write_text(f"Copyright 2020 the {package} authors.\n")
        (docs / package / "changelog.Debian.gz").write_bytes(
            gzip.compress(f"{package} (1.0) unstable\n\n  * First upload.\n".encode())
        )
    (docs / "pump" / "guide.rst").write_text("=========\nPump care\n=========\n\nOil it.\n")
    (docs / "pump" / "index.html").write_text(
        "<html><head><title>Pump manual</title><style>p {color: red}</style></head>"
        "<body><h1>Priming</h1><p>Fill the <b>casing</b> &amp; start.</p>"
        "<script>var hidden = 1;</script></body></html>"
    )
    (docs / "pump" / "__init__.py").write_text("")
    (docs / "valve" / "__init__.py").write_text('"""Valve helpers."""\n')
    (docs / "valve" / "NEWS.bz2").write_bytes(bz2.compress(b"Valve 2.0 closes faster.\n"))
    (docs / "valve" / "TODO.xz").write_bytes(lzma.compress(b"Fix the valve seal.\n"))
    return docs


def test_generic_file_names_take_their_folder_and_headings_win(
    packages: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "d.sqlite"
    code, _, err = run(["index", str(packages), "--db", str(db), "-q", "--read-compressed"], capsys)
    assert code == 0, err
    assert titles(db, ["pump/copyright", "valve/copyright", "valve/__init__.py"]) == {
        "pump/copyright": "pump copyright",
        "valve/copyright": "valve copyright",
        "valve/__init__.py": "valve init",
    }
    assert titles(db, ["pump/changelog.Debian.gz", "pump/guide.rst", "pump/index.html"]) == {
        "pump/changelog.Debian.gz": "pump changelog",
        "pump/guide.rst": "Pump care",
        "pump/index.html": "Pump manual",
    }


def test_compressed_text_files_are_read_decompressed(
    packages: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "d.sqlite"
    code, out, _ = run(["index", str(packages), "--db", str(db), "-q", "--read-compressed"], capsys)
    assert code == 0
    with SQLiteIndex(db, create=False) as index:
        changelog = index.document("valve/changelog.Debian.gz")
        news = index.document("valve/NEWS.bz2")
        todo = index.document("valve/TODO.xz")
    assert changelog is not None and "First upload" in changelog.text
    assert news is not None and news.text == "Valve 2.0 closes faster.\n"
    assert todo is not None and todo.text == "Fix the valve seal.\n"
    assert "9 files read, 1 skipped (1 blank)" in out


def test_by_default_compressed_files_are_counted_with_the_option_that_reads_them(
    packages: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "d.sqlite")
    code, out, err = run(["index", str(packages), "--db", db, "-q"], capsys)
    assert code == 0 and err == ""
    assert "5 files read, 5 skipped (1 blank, 4 compressed (--read-compressed reads them))" in out


def test_html_is_indexed_as_the_text_a_reader_sees(
    packages: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "d.sqlite"
    run(["index", str(packages), "--db", str(db), "-q"], capsys)
    with SQLiteIndex(db, create=False) as index:
        page = index.document("pump/index.html")
    assert page is not None
    assert page.text == "Priming\nFill the casing & start."


def test_html_text_keeps_blocks_on_lines_and_drops_scripts_and_styles() -> None:
    title, text = html_text(
        "<title> A  page </title><div>one<br>two</div><p>three <i>four</i></p>"
        "<style>x{}</style><script>if (a < b) {}</script><p>&lt;tag&gt; &eacute;</p>"
    )
    assert title == "A page"
    assert text == "one\ntwo\nthree four\n<tag> é"


def test_rst_title_is_the_first_adorned_line_long_enough() -> None:
    assert rst_title(".. comment\n\nShort\n===\n\nReal title\n----------\n") == "Real title"
    assert rst_title("No title here.\n") == ""


def test_a_name_alone_is_kept_when_it_is_not_generic() -> None:
    assert name_title("pump_guide.txt", "doc") == "pump guide"
    assert name_title("README.Debian", "pump") == "pump README"
    assert name_title("README", None) == "README"


def test_a_damaged_gz_is_a_real_failure_named_by_its_path_in_the_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "doc"
    (folder / "pump").mkdir(parents=True)
    (folder / "pump" / "README").write_text("The pump.\n")
    (folder / "pump" / "changelog.gz").write_bytes(b"\x1f\x8b\x08\x00broken")
    db = str(tmp_path / "d.sqlite")
    options = ["-q", "--encoding", "latin-1", "--read-compressed"]
    code, _, err = run(["index", str(folder), "--db", db, *options], capsys)
    assert code == 1
    assert "skipped 'pump/changelog.gz': not a readable .gz file" in err
    assert str(folder) not in err
    # --encoding was given: the advice does not suggest it again.
    assert "Re-run with --skip-unreadable" in err and "--encoding NAME" not in err


def test_a_gz_expanding_past_the_bound_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(input_files, "MAX_FILE_BYTES", 1000)
    bomb = tmp_path / "bomb.txt.gz"
    bomb.write_bytes(gzip.compress(b"a" * 100_000))
    with pytest.raises(input_files.TooLargeFileError, match=r"over 1,000 bytes once decompressed"):
        input_files.read_bounded(bomb)


def test_a_json_file_that_is_not_a_corpus_is_read_as_text_with_a_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "api"
    folder.mkdir()
    (folder / "objects.json").write_text(json.dumps({"type": "module", "name": "pump"}))
    (folder / "corpus.json").write_text(json.dumps([{"title": "Pump", "text": "It pumps."}]))
    db = tmp_path / "d.sqlite"
    code, out, err = run(["index", str(folder), "--db", str(db), "-q"], capsys)
    assert code == 0, err
    assert "'objects.json': not a corpus (key 'type' holds a string" in err
    assert "read as one text document" in err and str(folder) not in err
    assert "2 files read (1 .json as text)" in out
    with SQLiteIndex(db, create=False) as index:
        page = index.document("objects.json")
    assert page is not None and '"module"' in page.text


def test_a_docs_wrapper_json_given_alone_lists_the_accepted_shapes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = tmp_path / "docs.json"
    corpus.write_text(json.dumps({"docs": [{"title": "A", "text": "a"}]}))
    code, _, err = run(["index", str(corpus), "--db", str(tmp_path / "d.sqlite")], capsys)
    assert code == 1
    assert "key 'docs' holds a list of objects, not a list of sentences" in err
    assert 'a list of {"title", "text"} objects' in err and ".jsonl suffix" in err


def test_an_interrupted_folder_ingest_says_how_many_documents_are_saved(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    for number in range(5):
        (folder / f"note{number}.txt").write_text(f"Note number {number}.\n")
    real = index_command.add_in_batches

    def interrupted_after_three(index: Any, documents: Iterable[Document], **kw: Any) -> Any:
        def then_stop() -> Iterable[Document]:
            for count, document in enumerate(documents):
                if count == 3:
                    raise KeyboardInterrupt
                yield document

        return real(index, then_stop(), **kw)

    monkeypatch.setattr(index_command, "add_in_batches", interrupted_after_three)
    db = tmp_path / "d.sqlite"
    code, _, err = run(["index", str(folder), "--db", str(db), "-q", "--batch-size", "1"], capsys)
    assert code == 130
    assert f"interrupted: {db} holds 3 documents" in err
    assert "run the same command again" in err


@pytest.fixture
def with_bomb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder of two notes and a .gz expanding past the bound (shrunk to 1,000 bytes)."""
    monkeypatch.setattr(input_files, "MAX_FILE_BYTES", 1000)
    folder = tmp_path / "logs"
    (folder / "old").mkdir(parents=True)
    (folder / "a.md").write_text("# Alpha\n\nSmall notes.\n")
    (folder / "old" / "big.log.gz").write_bytes(gzip.compress(b"x" * 100_000))
    (folder / "z.md").write_text("# Zeta\n\nMore notes.\n")
    return folder


def test_a_gz_expanding_past_the_bound_is_skipped_and_the_walk_goes_on(
    with_bomb: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Regression: one over-large file aborted the whole ingest, even with --skip-unreadable."""
    db = tmp_path / "d.sqlite"
    options = ["-q", "--read-compressed", "--skip-unreadable"]
    code, out, err = run(["index", str(with_bomb), "--db", str(db), *options], capsys)
    assert code == 0, err
    assert "2 files read, 1 skipped (1 too large)" in out
    assert "skipped 'old/big.log.gz': too large: over 1,000 bytes once decompressed" in err
    assert str(with_bomb) not in err
    with SQLiteIndex(db, create=False) as index:
        assert index.document("z.md") is not None


def test_without_skip_unreadable_a_file_too_large_fails_after_the_others_are_indexed(
    with_bomb: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "d.sqlite"
    code, _, err = run(
        ["index", str(with_bomb), "--db", str(db), "-q", "--read-compressed"], capsys
    )
    assert code == 1
    assert "'old/big.log.gz': too large" in err and "--skip-unreadable" in err
    with SQLiteIndex(db, create=False) as index:
        assert index.document("a.md") is not None and index.document("z.md") is not None


def test_a_page_title_longer_than_a_title_may_be_is_cut_to_the_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Regression: a long (or unclosed) <title> was refused as a title and aborted the run."""
    folder = tmp_path / "site"
    folder.mkdir()
    long_title = "Very long title " * 300
    (folder / "long.html").write_text(f"<title>{long_title}</title><p>Body text.</p>")
    (folder / "open.html").write_text(f"<p>Body text.</p><title>{long_title}")
    (folder / "b.md").write_text("# Bee\n\nNotes.\n")
    db = tmp_path / "d.sqlite"
    code, _, err = run(["index", str(folder), "--db", str(db), "-q"], capsys)
    assert code == 0, err
    cut = long_title[:MAX_TITLE_CHARS]
    assert titles(db, ["long.html", "open.html"]) == {"long.html": cut, "open.html": cut}


def test_the_page_title_is_its_first_title_outside_svg_and_math() -> None:
    """Regression: an inline icon's <title> was appended to the page's title."""
    page = (
        "<head><title>Install guide</title></head><body><p>Steps.</p>"
        "<svg><title>GitHub</title><path/></svg><math><title>x</title></math>"
        "<title>Second</title></body>"
    )
    title, text = html_text(page)
    assert title == "Install guide"
    assert "GitHub" not in text and "Second" not in text


def test_a_page_without_its_own_title_does_not_take_an_icons() -> None:
    title, text = html_text("<body><svg><title>GitHub</title></svg><p>Steps.</p></body>")
    assert (title, text) == ("", "Steps.")


def test_a_compressed_corpus_in_a_folder_is_read_as_records(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Regression: corpus.jsonl.gz was indexed as one text document of JSON lines."""
    folder = tmp_path / "data"
    folder.mkdir()
    lines = [json.dumps({"id": f"d{n}", "title": f"T{n}", "text": f"Fact {n}."}) for n in (0, 1)]
    (folder / "corpus.jsonl.gz").write_bytes(gzip.compress("\n".join(lines).encode()))
    (folder / "list.json.xz").write_bytes(lzma.compress(json.dumps([{"text": "Listed."}]).encode()))
    db = tmp_path / "d.sqlite"
    code, _, err = run(["index", str(folder), "--db", str(db), "-q", "--read-compressed"], capsys)
    assert code == 0, err
    with SQLiteIndex(db, create=False) as index:
        assert index.document_count() == 3
        assert index.document("corpus.jsonl.gz") is None
        record = index.document("d1")
    assert record is not None and record.text == "Fact 1."
