"""Read user corpora (JSON lists, title -> sentences dicts, JSONL, text files) and add them to
an index, skipping documents stored already with the same text and metadata."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .adapter_kit import document_title, stored_unchanged
from .backends.base import DocumentIndex
from .documents import MAX_TEXT_CHARS, MAX_TITLE_CHARS, Document
from .errors import InvalidInputError
from .eval.datasets import Passage
from .file_titles import file_kind, plain_name
from .html_text import html_text
from .input_files import (
    MAX_FILE_BYTES,
    TooLargeFileError,
    open_content,
    parse_json,
    printable_path,
    read_content,
    read_text,
    text_lines,
)

JSONL_SUFFIXES = frozenset({".jsonl", ".ndjson"})
TEXT_SUFFIXES = frozenset({".txt", ".text", ".md", ".markdown", ".rst"})
CORPUS_SUFFIXES = frozenset({".json"}) | JSONL_SUFFIXES
DEFAULT_BATCH_SIZE = 2_000
# A batch also ends at this much text, so a progress bar of large files advances every few
# seconds and a batch's memory stays bounded (2,000 changelogs can hold 200 MB).
DEFAULT_BATCH_CHARS = 2_000_000
MAX_SNIFF_BYTES = 65_536


CORPUS_SHAPES = (
    'a .json corpus is a list of {"title", "text"} objects or an object mapping each '
    "title to a list of sentence strings; JSONL (one such object per line) needs a .jsonl suffix"
)


class BlankFileError(InvalidInputError):
    """A text file holds no text, so it makes no document."""


class NotACorpusError(InvalidInputError):
    """A .json file parses but has none of the corpus shapes (API docs, a settings file)."""


@dataclass(frozen=True)
class IngestReport:
    """What an ingest did: records read, batches committed, units written, and documents
    left as they were because the index already held them unchanged."""

    records: int
    batches: int
    units_written: int
    unchanged: int = 0


def read_corpus(path: str | os.PathLike[str], fallback: str | None = None) -> Iterator[Document]:
    """Yield the documents of a corpus file, streaming JSONL line by line.

    Accepted shapes: a JSON list of ``{title, text}`` records (HippoRAG), a JSON object mapping
    each title to a list of sentences (HotpotQA), JSONL with one ``{id?, title?, text,
    metadata?}`` object per line, or a text file, one document (`text_document`). A record
    without ``id`` gets its passage's content id (``Passage.doc_id``), so the same title and
    text always get the same id. ``fallback`` is the encoding of text that is not UTF-8.
    """
    corpus = Path(path)
    if not corpus.is_file():
        raise InvalidInputError(f"corpus file {str(corpus)!r} does not exist or is not a file")
    kind = corpus_kind(corpus)
    if kind == "jsonl":
        return _read_jsonl(corpus, fallback)
    if kind == "json":
        return _read_json(corpus, fallback)
    folder = Path(os.path.abspath(corpus)).parent.resolve()
    return iter([text_document(corpus, folder, printable_path(corpus.name), fallback)])


def record_total(path: str | os.PathLike[str]) -> int | None:
    """How many records a corpus file holds, when that is cheap to know before reading it
    (a JSONL file's non-blank lines, counted in bounded memory, decompressed if need be): the
    progress bar's total, so it can show an ETA. None for other kinds."""
    corpus = Path(path)
    if not corpus.is_file() or corpus_kind(corpus) != "jsonl":
        return None
    count = 0
    with open_content(corpus) as stream:
        # Pieces of a line past the bound count apart; the read refuses that line anyway.
        while line := stream.readline(MAX_FILE_BYTES + 1):
            count += bool(line.strip())
    return count


def corpus_kind(path: Path) -> str:
    """How a file is read: "json", "jsonl" or "text", by its suffix once decompressed
    (``corpus.jsonl.gz`` is JSONL), else by its first line."""
    suffix = Path(plain_name(path.name)).suffix.lower()
    if suffix in CORPUS_SUFFIXES:
        return "jsonl" if suffix in JSONL_SUFFIXES else "json"
    head = read_content(path, MAX_SNIFF_BYTES)
    start = head.decode("utf-8", "replace").lstrip("\ufeff \t\r\n").split("\n", 1)[0]
    try:
        if isinstance(json.loads(start), dict):
            return "jsonl"
    except (ValueError, RecursionError):
        pass
    return "json" if suffix not in TEXT_SUFFIXES and start[:1] in ("[", "{") else "text"


def text_document(path: Path, folder: Path, relative: str, fallback: str | None = None) -> Document:
    """A text file as one document by the adapters' rules (adapter_kit.py).

    Its id is ``relative``, its path inside the indexed ``folder`` (resolved), so the id does
    not depend on how the folder was spelled; its title is its own first heading, else its
    name (file_titles.py). A .gz/.bz2/.xz file is read decompressed; an HTML page is indexed
    as the text a reader sees. Raises ``BlankFileError`` for a file with no text.
    """
    text = read_text(path, fallback)
    metadata = {
        "file_path": str(folder / relative),
        "file_name": relative.rsplit("/", 1)[-1],
        "folder": str(folder),
    }
    title = ""
    html = file_kind(metadata["file_name"]) == "html"
    if html:
        title, text = html_text(text)
    if not text.strip():
        raise BlankFileError(f"{relative}: the file has no text")
    if len(text) > MAX_TEXT_CHARS:
        raise TooLargeFileError(
            f"{path}: too large: {len(text):,} characters, limit {MAX_TEXT_CHARS:,} for one "
            "document; split it"
        )
    # A page's <title> was read with its text; what is left of it is not markup to parse again.
    # An unclosed <title> holds the whole page: cut like every other title.
    title = title[:MAX_TITLE_CHARS] or document_title("" if html else text, metadata, None)
    return Document(relative, text, title, metadata)


def document_from_record(record: Any, where: str) -> Document:
    """Build a document from one ``{id?, title?, text, metadata?}`` record, naming it on error."""
    if not isinstance(record, Mapping):
        raise InvalidInputError(
            f"{where}: expected an object with a `text` field, got {type(record).__name__}"
        )
    text, title = record.get("text"), record.get("title", "")
    metadata = record.get("metadata", {})
    if not isinstance(text, str):
        raise InvalidInputError(f"{where}: needs a string `text` field")
    if not isinstance(title, str):
        raise InvalidInputError(f"{where}: `title` must be a string")
    if not isinstance(metadata, Mapping):
        raise InvalidInputError(f"{where}: `metadata` must be an object")
    doc_id = _record_id(record, where) or _content_id(title, text, where)
    try:
        return Document(doc_id, text, title, dict(metadata))
    except InvalidInputError as error:
        raise InvalidInputError(f"{where}: {error}") from None


def add_in_batches(
    index: DocumentIndex,
    documents: Iterable[Document],
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    batch_chars: int = DEFAULT_BATCH_CHARS,
    on_batch: Callable[[int], None] | None = None,
    skip_unchanged: bool = False,
) -> IngestReport:
    """Add documents in batches of ``batch_size`` (or ``batch_chars`` of text), one
    transaction each, calling ``on_batch`` with each batch's document count.

    A later record with the same id replaces an earlier one, inside a batch as across batches
    (upsert). With ``skip_unchanged``, a document the index holds already with the same text,
    title and metadata is not rewritten (``on_batch`` counts it too). An interrupted ingest
    keeps every batch committed before the interruption.
    """
    if batch_size < 1 or batch_chars < 1:
        raise InvalidInputError(
            f"batch size and characters must be at least 1, got {batch_size}, {batch_chars}"
        )
    counts = {"records": 0, "batches": 0, "unchanged": 0}

    def changed(batch: dict[str, Document]) -> list[Document]:
        documents = list(batch.values())
        unchanged = stored_unchanged(index, documents) if skip_unchanged else [False] * len(batch)
        kept = [doc for doc, same in zip(documents, unchanged, strict=True) if not same]
        counts["unchanged"] += len(batch) - len(kept)
        if on_batch is not None and len(kept) < len(batch):
            on_batch(len(batch) - len(kept))
        counts["batches"] += bool(kept)
        return kept

    def batches() -> Iterator[list[Document]]:
        batch: dict[str, Document] = {}
        chars = 0
        for document in documents:
            counts["records"] += 1
            batch[document.id] = document
            chars += len(document.text)
            if len(batch) >= batch_size or chars >= batch_chars:
                yield changed(batch)
                batch, chars = {}, 0
        if batch:
            yield changed(batch)

    units = index.ingest(batches(), on_batch=on_batch)
    return IngestReport(counts["records"], counts["batches"], units, counts["unchanged"])


def _read_jsonl(path: Path, fallback: str | None) -> Iterator[Document]:
    """Documents of a JSONL file, one per non-blank line; errors name the line number."""
    for number, line in text_lines(path, fallback):
        if line.strip():
            where = f"{path}: line {number}"
            yield document_from_record(parse_json(line, where, "one JSON object per line"), where)


def _read_json(path: Path, fallback: str | None) -> Iterator[Document]:
    """Documents of a whole-file JSON corpus: a list of records or a title -> sentences dict."""
    payload = parse_json(read_text(path, fallback), str(path), "JSONL files need a .jsonl suffix")
    problem = _shape_problem(payload)
    if problem is not None:
        raise NotACorpusError(f"{path}: not a corpus ({problem}); {CORPUS_SHAPES}")
    if isinstance(payload, list):
        return (
            document_from_record(record, f"{path}: record {number}")
            for number, record in enumerate(payload, start=1)
        )
    return (
        _document_from_sentences(title, sentences, path) for title, sentences in payload.items()
    )


def _shape_problem(payload: Any) -> str | None:
    """Why a parsed JSON file is not one of the corpus shapes, in the user's terms, or None."""
    if isinstance(payload, list):
        for number, record in enumerate(payload, start=1):
            if not isinstance(record, Mapping) or not isinstance(record.get("text"), str):
                return f"item {number} is not an object with a string `text` field"
        return None
    if isinstance(payload, dict):
        for title, sentences in payload.items():
            if not isinstance(sentences, list) or not all(isinstance(s, str) for s in sentences):
                return f"key {title!r} holds a {_json_kind(sentences)}, not a list of sentences"
        return None
    return f"the file holds a JSON {_json_kind(payload)}"


def _json_kind(value: Any) -> str:
    """What a parsed JSON value is, in JSON's words."""
    if isinstance(value, list):
        held = {_json_kind(item) for item in value}
        return f"list of {' and '.join(sorted(held))}s" if held else "empty list"
    kinds = {dict: "object", str: "string", bool: "boolean", type(None): "null"}
    return kinds.get(type(value), "number")


def _document_from_sentences(title: str, sentences: list[str], path: Path) -> Document:
    """A HotpotQA corpus entry as a document: the sentences joined, as HippoRAG does."""
    text = "".join(sentences)
    where = f"{path}: entry {title!r}"
    try:
        return Document(_content_id(title, text, where), text, title)
    except InvalidInputError as error:
        raise InvalidInputError(f"{where}: {error}") from None


def _content_id(title: str, text: str, where: str) -> str:
    """The passage's content id, refusing text that is not valid Unicode (a lone surrogate)."""
    try:
        return Passage(title, text).doc_id
    except UnicodeEncodeError as error:
        raise InvalidInputError(
            f"{where}: title or text holds a character that is not valid Unicode text (a lone "
            f"surrogate at position {error.start})"
        ) from None


def _record_id(record: Mapping[str, Any], where: str) -> str | None:
    """The record's explicit id as a string (integers allowed), or None when absent."""
    value = record.get("id")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise InvalidInputError(f"{where}: `id` must be a string or an integer, got {value!r}")
    return str(value)
