"""Hostile documents: huge, token-less, badly-typed metadata, broken corpus files.

Each rejected document must raise InvalidInputError naming it (or the file and line); bad
fields and metadata are refused when the Document is built, so a batch built lazily stops
there and must leave the index exactly as it was; each accepted one must index and search
normally. Document-construction checks (empty text, non-string fields, NUL, the size limit)
and the basic rejected-batch cases are in tests/core/test_documents.py and
tests/backends/test_index.py.
"""

from __future__ import annotations

import datetime
import decimal
import itertools
import random
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sag2_retrievers import (
    Document,
    InvalidInputError,
    SAG2Engine,
    SQLiteIndex,
)
from sag2_retrievers.backends import ingest
from sag2_retrievers.corpus_io import add_in_batches, read_corpus
from sag2_retrievers.documents import (
    MAX_METADATA_DEPTH,
    MAX_TEXT_CHARS,
    MAX_TITLE_CHARS,
    chunk_spans,
)
from sag2_retrievers.judges import JEVJudge, OverlapJudge
from tests.fault_server import FaultServer

TEN_MB = 10_000_000
CHUNK = 2_200
MARKER = "zyzzyva"
PROBE_WORDS = ("tolkien", "hobbit", "oxford", "quokka", "marker", MARKER)


def snapshot(index: SQLiteIndex) -> tuple[Any, ...]:
    """Everything a rejected batch must leave alone: sizes, file bytes, searches, documents."""
    searches = tuple(tuple(hit.doc_id for hit in index.search(word)) for word in PROBE_WORDS)
    documents = tuple(index.document(doc_id) for doc_id in ("tolkien", "hobbit", "victim"))
    return index.stats(), searches, documents


@pytest.fixture
def index(empty_index: SQLiteIndex, tiny_corpus: tuple[Document, ...]) -> SQLiteIndex:
    """The tiny corpus plus a document that rejected batches try to replace."""
    empty_index.add_documents([*tiny_corpus, Document("victim", "Original quokka text.")])
    return empty_index


def big_text(chars: int, seed: int = 5) -> str:
    """Prose-like text of exactly ``chars`` characters: sentences, some paragraph breaks."""
    rng = random.Random(seed)
    vocabulary = [f"word{number}" for number in range(3_000)]
    parts: list[str] = []
    size = 0
    while size < chars:
        sentence = " ".join(rng.choices(vocabulary, k=rng.randint(5, 25))).capitalize() + ". "
        if rng.random() < 0.1:
            sentence += "\n\n"
        parts.append(sentence)
        size += len(sentence)
    return "".join(parts)[:chars]


# -- size ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ten_mb_index(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[SQLiteIndex, str, float]]:
    """An index holding one 10 MB document (ending in the marker) and 100 small ones."""
    ending = f" The {MARKER} closes the document."
    text = big_text(TEN_MB - len(ending)) + ending
    with SQLiteIndex(tmp_path_factory.mktemp("big") / "index.sqlite") as index:
        started = time.perf_counter()
        index.add_documents([Document("big", text, "Big")])
        seconds = time.perf_counter() - started
        index.add_documents(Document(f"s{n}", big_text(2_000, seed=n)) for n in range(100))
        yield index, text, seconds


def unit_spans(index: SQLiteIndex, doc_id: str) -> list[tuple[int, int, int]]:
    """(unit id, start, end) of a document's units in text order, read straight from SQLite."""
    with sqlite3.connect(index.path) as connection:
        rows = connection.execute(
            "SELECT unit_id, char_start, char_end FROM units WHERE doc_id = ? ORDER BY char_start",
            (doc_id,),
        ).fetchall()
    return [(int(unit_id), int(start), int(end)) for unit_id, start, end in rows]


def test_ten_megabyte_document_is_indexed_in_chunks_in_reasonable_time(
    ten_mb_index: tuple[SQLiteIndex, str, float],
) -> None:
    index, text, seconds = ten_mb_index
    assert len(text) == TEN_MB <= MAX_TEXT_CHARS
    assert seconds < 60
    spans = unit_spans(index, "big")
    assert len(spans) > TEN_MB // (1.2 * CHUNK)
    assert all(end - start <= 1.2 * CHUNK for _, start, end in spans)
    assert all(
        text[end:next_start].isspace() or next_start == end
        for (_, _, end), (_, next_start, _) in itertools.pairwise(spans)
    )
    sample = [spans[0][0], spans[len(spans) // 2][0], spans[-1][0]]
    units = index.units(sample)
    assert all(unit.body == text[unit.char_start : unit.char_end] for unit in units.values())


def test_no_chunk_but_the_last_is_below_point_eight_targets(
    ten_mb_index: tuple[SQLiteIndex, str, float],
) -> None:
    small = chunk_spans("  " + "a" * 6 + " " + "b" * 10, 10)
    assert all(span.end - span.start >= 8 for span in small[:-1])
    spans = unit_spans(ten_mb_index[0], "big")
    assert all(end - start >= 0.8 * CHUNK for _, start, end in spans[:-1])


def chunking_seconds(text: str) -> float:
    """Wall time of chunking ``text`` at the default target."""
    started = time.perf_counter()
    chunk_spans(text, CHUNK)
    return time.perf_counter() - started


def test_chunking_takes_time_linear_in_the_text_length(
    ten_mb_index: tuple[SQLiteIndex, str, float],
) -> None:
    text = ten_mb_index[1]
    tenth = len(text) // 10
    pieces = sum(
        chunking_seconds(text[start : start + tenth]) for start in range(0, tenth * 10, tenth)
    )
    assert chunking_seconds(text) < 3 * pieces


def test_search_finds_the_chunk_at_the_end_of_a_ten_megabyte_document(
    ten_mb_index: tuple[SQLiteIndex, str, float],
) -> None:
    index, text, _ = ten_mb_index
    (hit,) = index.search(MARKER)
    assert hit.doc_id == "big" and hit.char_end == TEN_MB
    assert hit.text == text[hit.char_start : hit.char_end] and MARKER in hit.text


def test_fetching_units_of_a_ten_megabyte_document_does_not_scale_with_its_size(
    ten_mb_index: tuple[SQLiteIndex, str, float],
) -> None:
    index, text, _ = ten_mb_index
    unit_ids = [unit_id for unit_id, _, _ in unit_spans(index, "big")[:100]]
    started = time.perf_counter()
    units = index.units(unit_ids)
    assert len(units) == 100
    assert time.perf_counter() - started < 0.2
    assert all(unit.body == text[unit.char_start : unit.char_end] for unit in units.values())


def test_text_over_the_documented_limit_is_rejected_before_any_work() -> None:
    with pytest.raises(InvalidInputError, match=r"'huge'.*limit of 50,000,000"):
        Document("huge", "a" * (MAX_TEXT_CHARS + 1))


def test_document_with_a_huge_title_is_refused_at_construction() -> None:
    with pytest.raises(InvalidInputError, match=r"'huge-title'.*limit of 2,000"):
        Document("huge-title", "Tolkien is mentioned here.", "Title words " * 20_000)


def test_document_with_a_title_at_the_limit_is_judged_normally(index: SQLiteIndex) -> None:
    title = ("Title words " * 200)[:MAX_TITLE_CHARS]
    index.add_documents([Document("long-title", "Tolkien is mentioned here.", title)])
    with FaultServer() as server:
        engine = SAG2Engine(index, JEVJudge("test-key", base_url=server.url))
        try:
            assert "long-title" in {hit.doc_id for hit in engine.retrieve("Tolkien").hits}
        finally:
            engine.close()


# -- documents without tokens ------------------------------------------------------------------


@pytest.mark.parametrize("text", ["\u200b", "!!! ??? ...", "\x01\x02\x03", "🙂🙂", "\u0301\u0301"])
def test_document_without_any_token_is_stored_and_breaks_no_retrieval(
    index: SQLiteIndex, text: str
) -> None:
    assert index.add_documents([Document("tokenless", text)]) == 1
    assert index.document("tokenless") == Document("tokenless", text)
    result = SAG2Engine(index, OverlapJudge()).retrieve("Tolkien Hobbit")
    assert result.hits and "tokenless" not in {hit.doc_id for hit in result.hits}


# -- metadata ----------------------------------------------------------------------------------


def circular() -> dict[str, Any]:
    """A metadata dict that contains itself."""
    loop: dict[str, Any] = {}
    loop["self"] = loop
    return loop


def nested(depth: int) -> dict[str, Any]:
    """A metadata dict nested ``depth`` levels deep."""
    root: dict[str, Any] = {}
    level = root
    for _ in range(depth):
        level["a"] = {}
        level = level["a"]
    return root


UNSERIALISABLE_METADATA = {
    "datetime": {"when": datetime.datetime(2024, 1, 1)},
    "bytes": {"raw": b"\x00\xff"},
    "Decimal": {"price": decimal.Decimal("1.10")},
    "set inside a list": {"tags": [1, {2, 3}]},
    "infinity": {"score": float("inf")},
    "tuple key": {(1, 2): "pair"},
    "circular reference": circular(),
    "a lock": {"lock": threading.Lock()},
}


def replacing_then(metadata: Any) -> Iterator[Document]:
    """A lazily built batch: a replacement for "victim", then document "bad" with metadata."""
    yield Document("victim", "Replaced quokka text.")
    yield Document("bad", "Quokka.", "", metadata)


@pytest.mark.parametrize(
    "metadata", UNSERIALISABLE_METADATA.values(), ids=UNSERIALISABLE_METADATA.keys()
)
def test_unserialisable_metadata_names_the_document_and_changes_nothing(
    index: SQLiteIndex, metadata: dict[Any, Any]
) -> None:
    before = snapshot(index)
    with pytest.raises(InvalidInputError, match=r"document 'bad': metadata (is|key)"):
        index.add_documents(replacing_then(metadata), parallel=False)
    assert snapshot(index) == before


def test_deeply_nested_metadata_names_the_document_and_changes_nothing(
    index: SQLiteIndex,
) -> None:
    before = snapshot(index)
    with pytest.raises(InvalidInputError, match="'bad': metadata is nested deeper than 64"):
        index.add_documents(replacing_then(nested(5_000)), parallel=False)
    assert snapshot(index) == before


def test_metadata_nested_to_the_limit_is_stored_exactly(index: SQLiteIndex) -> None:
    metadata = nested(MAX_METADATA_DEPTH)
    index.add_documents([Document("deep", "Quokka.", "", metadata)], parallel=False)
    stored = index.document("deep")
    assert stored is not None and stored.metadata == metadata


NON_STRING_KEYS = {
    "at the top": {1: "a", "1": "b", None: "c"},
    "inside a list": {"outer": [{"inner": {2: "x"}}]},
}


@pytest.mark.parametrize("metadata", NON_STRING_KEYS.values(), ids=NON_STRING_KEYS.keys())
def test_metadata_with_non_string_keys_is_refused_naming_the_document(
    metadata: dict[Any, Any],
) -> None:
    with pytest.raises(InvalidInputError, match=r"'keys': metadata key .* is not a string"):
        Document("keys", "Quokka.", "", metadata)


@pytest.mark.parametrize(
    "metadata", [{"note": "lone \ud800"}, {"\udc80key": 1}], ids=["in a value", "in a key"]
)
def test_lone_surrogate_in_metadata_names_the_document_and_changes_nothing(
    index: SQLiteIndex, metadata: dict[str, Any]
) -> None:
    before = snapshot(index)
    with pytest.raises(InvalidInputError, match=r"'bad': metadata holds .* lone surrogate"):
        index.add_documents(replacing_then(metadata))
    assert snapshot(index) == before


BAD_RECORDS = {
    "empty text": {"id": "bad", "text": ""},
    "whitespace text": {"id": "bad", "text": " \n\t\u3000"},
    "text that is a number": {"id": "bad", "text": 42},
    "title that is None": {"id": "bad", "text": "Quokka.", "title": None},
    "id that is a number": {"id": 7, "text": "Quokka."},
    "NUL in the text": {"id": "bad", "text": "Quo\x00kka."},
    "lone surrogate in the text": {"id": "bad", "text": "Quo\ud800kka."},
    "metadata that is a list": {"id": "bad", "text": "Quokka.", "metadata": ["a"]},
}


@pytest.mark.parametrize("record", BAD_RECORDS.values(), ids=BAD_RECORDS.keys())
def test_batch_built_lazily_stops_at_a_bad_record_and_writes_nothing(
    index: SQLiteIndex, record: dict[str, Any]
) -> None:
    records = [{"id": "victim", "text": "New quokka."}, {"id": "new", "text": "Quokka."}, record]
    before = snapshot(index)
    with pytest.raises(InvalidInputError, match=r"'bad'|got 7"):
        index.add_documents(
            Document(r["id"], r["text"], r.get("title", ""), r.get("metadata", {})) for r in records
        )
    assert snapshot(index) == before
    assert index.document("new") is None


# -- batches analysed in worker processes ------------------------------------------------------


@pytest.fixture
def parallel_analysis(monkeypatch: pytest.MonkeyPatch) -> None:
    """Send every batch through the process pool, however small."""
    monkeypatch.setattr(ingest, "PARALLEL_MIN_CHARS", 0)


def twenty_then_bad(metadata: Any) -> Iterator[Document]:
    """A lazily built batch: twenty good documents, then document "bad" with metadata."""
    for number in range(20):
        yield Document(f"ok{number}", f"Quokka number {number}.")
    yield Document("bad", "Quokka.", "", metadata)


@pytest.mark.usefixtures("parallel_analysis")
@pytest.mark.parametrize(
    "metadata", [{"tags": {1, 2}}, {"callback": lambda: None}], ids=["a set", "a function"]
)
def test_unserialisable_metadata_in_a_parallel_batch_names_the_document(
    index: SQLiteIndex, metadata: dict[str, Any]
) -> None:
    before = snapshot(index)
    with pytest.raises(InvalidInputError, match=r"document 'bad': metadata is not JSON"):
        index.add_documents(twenty_then_bad(metadata), parallel=True)
    assert snapshot(index) == before


@pytest.mark.usefixtures("parallel_analysis")
def test_json_valid_but_unpicklable_metadata_in_a_parallel_batch_is_stored_or_named(
    index: SQLiteIndex,
) -> None:
    class Label(str):
        """A str subclass that pickle cannot find by name."""

    before = snapshot(index)
    try:
        index.add_documents(twenty_then_bad({"label": Label("x")}), parallel=True)
    except InvalidInputError as error:
        assert "'bad'" in str(error) and snapshot(index) == before
        return
    stored = index.document("bad")
    assert stored is not None and stored.metadata == {"label": "x"}


@pytest.mark.usefixtures("parallel_analysis")
def test_duplicate_ids_far_apart_in_a_parallel_batch_are_refused(index: SQLiteIndex) -> None:
    before = snapshot(index)
    batch = [Document(f"d{n}", f"Quokka number {n}.") for n in range(50)]
    batch.append(Document("d3", "Second quokka with the same id."))
    with pytest.raises(InvalidInputError, match="'d3' appears twice"):
        index.add_documents(batch, parallel=True)
    assert snapshot(index) == before


# -- corpus files ------------------------------------------------------------------------------


@pytest.fixture
def bad_utf8_corpora(tmp_path: Path) -> dict[str, Path]:
    """Corpus files in each accepted shape whose third record holds the byte 0xFF."""
    good = [b'{"id": "r%d", "text": "Quokka record %d."}' % (n, n) for n in (1, 2)]
    bad = b'{"id": "r3", "text": "Broken \xff byte."}'
    lines = [*good, bad, b'{"id": "r4", "text": "After the break."}']
    files = {
        "records.jsonl": b"\n".join(lines) + b"\n",
        "records.json": b"[" + b",".join(lines) + b"]",
        "records.txt": b"\n".join(lines) + b"\n",
        "sentences.json": b'{"Title": ["Broken \xff sentence."]}',
    }
    for name, content in files.items():
        (tmp_path / name).write_bytes(content)
    return {name: tmp_path / name for name in files}


@pytest.mark.parametrize("name", ["records.jsonl", "records.json", "records.txt", "sentences.json"])
def test_invalid_utf8_in_a_corpus_file_is_invalid_input_naming_the_file(
    bad_utf8_corpora: dict[str, Path], name: str
) -> None:
    with pytest.raises(InvalidInputError, match=name):
        list(read_corpus(bad_utf8_corpora[name]))


def test_invalid_utf8_in_a_jsonl_corpus_names_the_line(bad_utf8_corpora: dict[str, Path]) -> None:
    with pytest.raises(InvalidInputError, match="line 3"):
        list(read_corpus(bad_utf8_corpora["records.jsonl"]))


def test_ingest_stopped_by_invalid_utf8_keeps_whole_batches_of_records_before_it(
    index: SQLiteIndex, bad_utf8_corpora: dict[str, Path]
) -> None:
    documents_before = index.document_count()
    with pytest.raises(ValueError):
        add_in_batches(index, read_corpus(bad_utf8_corpora["records.jsonl"]), batch_size=1)
    kept = {hit.doc_id for hit in index.search("record")}
    assert kept in ({"r1", "r2"}, {"r1"}, set())
    assert index.document_count() == documents_before + len(kept)
    assert index.document("r3") is None and index.document("r4") is None


@pytest.fixture
def corpus_with_bad_record(tmp_path: Path) -> Path:
    """A JSONL corpus whose 3rd record has metadata with a NaN (not storable as JSON)."""
    path = tmp_path / "metadata.jsonl"
    path.write_text(
        '{"id": "m1", "text": "Quokka one."}\n'
        '{"id": "m2", "text": "Quokka two."}\n'
        '{"id": "m3", "text": "Quokka three.", "metadata": {"score": NaN}}\n',
        encoding="utf-8",
    )
    return path


def test_batch_with_unstorable_metadata_from_a_corpus_file_is_rejected_whole(
    index: SQLiteIndex, corpus_with_bad_record: Path
) -> None:
    before = snapshot(index)
    with pytest.raises(InvalidInputError, match="'m3'"):
        add_in_batches(index, read_corpus(corpus_with_bad_record), batch_size=10)
    assert snapshot(index) == before
