"""Reading user corpora in every accepted shape, and committing them to an index in batches."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sag2_retrievers import Document, SQLiteIndex, input_files
from sag2_retrievers.corpus_io import add_in_batches, corpus_kind, read_corpus, record_total
from sag2_retrievers.errors import InvalidInputError
from sag2_retrievers.eval import Passage


def _write_json(path: Path, payload: Any) -> Path:
    """Write a JSON payload and return the path."""
    path.write_text(json.dumps(payload), encoding="utf-8")
    return path


def _write_lines(path: Path, lines: list[str]) -> Path:
    """Write raw lines and return the path."""
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_json_list_records_get_content_ids(tmp_path: Path) -> None:
    """HippoRAG passages get Passage.doc_id, so a gold identity maps to a stable id."""
    path = _write_json(tmp_path / "c.json", [{"title": "Rome", "text": "Rome is old."}])
    [document] = read_corpus(path)
    assert document.id == Passage("Rome", "Rome is old.").doc_id
    assert (document.title, document.text) == ("Rome", "Rome is old.")


def test_title_to_sentences_dict_joins_sentences(tmp_path: Path) -> None:
    """The HotpotQA corpus shape joins sentences without a separator, as HippoRAG does."""
    path = _write_json(tmp_path / "c.json", {"Tiber": ["A river.", " It flows."]})
    [document] = read_corpus(path)
    assert document.text == "A river. It flows."
    assert document.id == Passage("Tiber", "A river. It flows.").doc_id


def test_jsonl_keeps_ids_and_metadata_and_skips_blank_lines(tmp_path: Path) -> None:
    """Explicit ids (integers too) and metadata pass through; blank lines are ignored."""
    path = _write_lines(
        tmp_path / "c.jsonl",
        [
            json.dumps({"id": "a", "text": "Alpha.", "metadata": {"lang": "en"}}),
            "",
            json.dumps({"id": 7, "title": "Seven", "text": "Seventh."}),
        ],
    )
    documents = list(read_corpus(path))
    assert [d.id for d in documents] == ["a", "7"]
    assert documents[0].metadata == {"lang": "en"}
    assert documents[1].title == "Seven"


def test_unknown_suffix_with_one_object_per_line_is_read_as_jsonl(tmp_path: Path) -> None:
    """A `.txt` file of JSON lines is recognised by its first line."""
    path = _write_lines(tmp_path / "c.txt", ['{"text": "One."}', '{"text": "Two."}'])
    assert [d.text for d in read_corpus(path)] == ["One.", "Two."]


def test_bad_jsonl_line_is_named(tmp_path: Path) -> None:
    """A malformed line is reported with its 1-based line number."""
    path = _write_lines(tmp_path / "c.jsonl", ['{"text": "Fine."}', "{not json"])
    with pytest.raises(InvalidInputError, match=r"line 2: not valid JSON"):
        list(read_corpus(path))


def test_record_without_text_is_named(tmp_path: Path) -> None:
    """A list record lacking text is reported with its 1-based record number."""
    path = _write_json(tmp_path / "c.json", [{"title": "A", "text": "a"}, {"title": "B"}])
    with pytest.raises(
        InvalidInputError,
        match=r"not a corpus \(item 2 is not an object with a string `text` field\)",
    ):
        list(read_corpus(path))


def test_empty_text_error_names_line_and_document(tmp_path: Path) -> None:
    """Document validation errors keep the document's own message and gain the location."""
    path = _write_lines(tmp_path / "c.jsonl", [json.dumps({"id": "x", "text": "  "})])
    with pytest.raises(InvalidInputError, match=r"line 1: document 'x': text is empty"):
        list(read_corpus(path))


def test_jsonl_in_a_json_file_suggests_the_suffix(tmp_path: Path) -> None:
    """JSONL saved as `.json` fails with a hint to rename it."""
    path = _write_lines(tmp_path / "c.json", ['{"text": "One."}', '{"text": "Two."}'])
    with pytest.raises(InvalidInputError, match=r"\.jsonl suffix"):
        read_corpus(path)


def test_missing_file_is_reported(tmp_path: Path) -> None:
    """A path that does not exist fails before anything is read."""
    with pytest.raises(InvalidInputError, match="does not exist"):
        read_corpus(tmp_path / "absent.jsonl")


def test_scalar_json_is_rejected(tmp_path: Path) -> None:
    """A JSON number is none of the accepted shapes."""
    with pytest.raises(
        InvalidInputError, match=r"the file holds a JSON number\); a \.json corpus is a list of"
    ):
        read_corpus(_write_json(tmp_path / "c.json", 3))


def test_batches_upsert_repeated_ids(tmp_path: Path) -> None:
    """A repeated id replaces the earlier record, within a batch and across batches."""
    documents = [
        Document("a", "first"),
        Document("b", "bee"),
        Document("a", "second"),
        Document("b", "bee again"),
        Document("a", "third"),
    ]
    with SQLiteIndex(tmp_path / "i.db") as index:
        report = add_in_batches(index, documents, batch_size=2)
        assert index.document_count() == 2
        stored = index.document("a")
        assert stored is not None and stored.text == "third"
    assert (report.records, report.batches) == (5, 3)


def test_interrupted_ingest_keeps_committed_batches(tmp_path: Path) -> None:
    """A failure mid-stream leaves every batch committed before it in the index."""

    def documents() -> Iterator[Document]:
        yield from (Document(str(n), f"text {n}") for n in range(5))
        raise InvalidInputError("bad record")

    committed: list[int] = []
    with SQLiteIndex(tmp_path / "i.db") as index:
        with pytest.raises(InvalidInputError):
            add_in_batches(index, documents(), batch_size=2, on_batch=committed.append)
        assert index.document_count() == 4
    assert committed == [2, 2]


def test_batch_size_must_be_positive(tmp_path: Path) -> None:
    """A zero batch size is refused."""
    with SQLiteIndex(tmp_path / "i.db") as index, pytest.raises(InvalidInputError):
        add_in_batches(index, [], batch_size=0)


def test_a_byte_order_mark_at_the_start_of_a_corpus_file_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "corpus.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + b'{"id": "a", "title": "T", "text": "body"}\n')
    assert [document.id for document in read_corpus(path)] == ["a"]


def test_record_total_counts_a_jsonl_files_records_for_the_progress_bar(tmp_path: Path) -> None:
    """The bar's total (and so its ETA) is the JSONL file's non-blank lines, as read."""
    lines = ['{"text": "one"}', "", '{"text": "two"}', "  ", '{"text": "three"}']
    path = _write_lines(tmp_path / "c.jsonl", lines)
    assert record_total(path) == len(list(read_corpus(path))) == 3


def test_record_total_is_unknown_for_a_json_list(tmp_path: Path) -> None:
    """A JSON list would have to be parsed twice to count it: the bar shows no total."""
    path = _write_json(tmp_path / "c.json", [{"text": "one"}, {"text": "two"}])
    assert record_total(path) is None


def test_unchanged_documents_are_skipped_after_one_look_up_per_batch(tmp_path: Path) -> None:
    """Stored ids are found with one metadata read per batch; only those are compared."""
    documents = [Document(f"d{n}", f"text {n}") for n in range(5)]
    with SQLiteIndex(tmp_path / "i.db") as index:
        add_in_batches(index, documents, batch_size=2)
        edited = [*documents[:4], Document("d4", "changed"), Document("d5", "new")]
        report = add_in_batches(index, edited, batch_size=2, skip_unchanged=True)
        assert (report.unchanged, index.document_count()) == (4, 6)
        assert index.document("d4").text == "changed"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("suffix", "compress"), [(".gz", gzip.compress), (".bz2", bz2.compress), (".xz", lzma.compress)]
)
def test_a_compressed_jsonl_corpus_is_read_record_by_record(
    suffix: str, compress: Callable[[bytes], bytes], tmp_path: Path
) -> None:
    """Regression: corpus.jsonl.gz was one text document holding the JSON lines."""
    path = tmp_path / f"corpus.jsonl{suffix}"
    lines = [json.dumps({"id": f"d{n}", "text": f"Fact {n}."}) for n in range(3)]
    path.write_bytes(compress(("\n".join(lines) + "\n\n").encode()))
    assert corpus_kind(path) == "jsonl"
    assert [d.id for d in read_corpus(path)] == ["d0", "d1", "d2"]
    assert record_total(path) == 3


def test_a_compressed_json_corpus_is_read_whole_through_the_bounded_decompressor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "corpus.json.gz"
    path.write_bytes(gzip.compress(json.dumps({"Tiber": ["A river."]}).encode()))
    assert [d.title for d in read_corpus(path)] == ["Tiber"]
    monkeypatch.setattr(input_files, "MAX_FILE_BYTES", 10)
    with pytest.raises(InvalidInputError, match="too large: over 10 bytes once decompressed"):
        list(read_corpus(path))


def test_a_compressed_jsonl_corpus_is_streamed_and_its_errors_name_the_line(
    tmp_path: Path,
) -> None:
    """Records before a bad line are read before the error: the file is not held whole."""
    path = tmp_path / "c.jsonl.gz"
    path.write_bytes(gzip.compress(b'{"id": "a", "text": "Fine."}\n{not json\n'))
    documents = read_corpus(path)
    assert next(iter(documents)).id == "a"
    with pytest.raises(InvalidInputError, match=r"c\.jsonl\.gz: line 2: not valid JSON"):
        next(iter(documents))


def test_a_utf16_compressed_jsonl_corpus_is_decoded_as_a_stream(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl.gz"
    path.write_bytes(gzip.compress('{"id": "é", "text": "Café."}\n'.encode("utf-16")))
    assert [(d.id, d.text) for d in read_corpus(path)] == [("é", "Café.")]


def test_a_damaged_compressed_jsonl_corpus_is_named(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl.gz"
    path.write_bytes(gzip.compress(b'{"text": "Fine."}\n' * 50)[:-20])
    with pytest.raises(InvalidInputError, match=r"c\.jsonl\.gz: not a readable \.gz file"):
        list(read_corpus(path))


def test_a_compressed_file_of_unknown_kind_is_sniffed_decompressed(tmp_path: Path) -> None:
    path = tmp_path / "records.gz"
    path.write_bytes(gzip.compress(b'{"text": "One."}\n{"text": "Two."}\n'))
    assert corpus_kind(path) == "jsonl"
    assert [d.text for d in read_corpus(path)] == ["One.", "Two."]
