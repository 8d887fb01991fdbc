"""Read user corpora (JSON lists, title -> sentences dicts, JSONL) and add them to an index."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .adapter_kit import document_title
from .backends.base import DocumentIndex
from .documents import Document
from .errors import InvalidInputError
from .eval.datasets import Passage

JSONL_SUFFIXES = frozenset({".jsonl", ".ndjson"})
TEXT_SUFFIXES = frozenset({".txt", ".md", ".markdown"})
CORPUS_SUFFIXES = frozenset({".json"}) | JSONL_SUFFIXES
DEFAULT_BATCH_SIZE = 2_000


@dataclass(frozen=True)
class IngestReport:
    """What an ingest did: records read, batches committed, and units written."""

    records: int
    batches: int
    units_written: int


def read_corpus(path: str | os.PathLike[str]) -> Iterator[Document]:
    """Yield the documents of a corpus file, streaming JSONL line by line.

    Accepted shapes: a JSON list of ``{title, text}`` records (HippoRAG), a JSON object mapping
    each title to a list of sentences (HotpotQA), or JSONL with one ``{id?, title?, text,
    metadata?}`` object per line. A record without ``id`` gets its passage's content id
    (``Passage.doc_id``), so the same title and text always get the same id.
    """
    corpus = Path(path)
    if not corpus.is_file():
        raise InvalidInputError(f"corpus file {str(corpus)!r} does not exist or is not a file")
    if corpus.suffix.lower() in JSONL_SUFFIXES or _looks_like_jsonl(corpus):
        return _read_jsonl(corpus)
    return _read_json(corpus)


def read_folder(folder: Path, warn: Callable[[str], None]) -> Iterator[Document]:
    """Yield the documents of every .txt/.md/.json/.jsonl file under ``folder``, in path order.

    Corpus files (.json, .jsonl) are read as `read_corpus` reads them. Each text file is one
    document by the rules the framework adapters follow (adapter_kit.py): its id is its path,
    its title its markdown H1 or else its file name; blank files are skipped, each with a
    warning. Other files are ignored.
    """
    files = sorted(p for p in folder.rglob("*") if p.is_file() and not _hidden(p, folder))
    if not any(p.suffix.lower() in TEXT_SUFFIXES | CORPUS_SUFFIXES for p in files):
        raise InvalidInputError(
            f"folder {str(folder)!r} holds no .txt, .md, .json or .jsonl file to index"
        )
    for path in files:
        suffix = path.suffix.lower()
        if suffix in CORPUS_SUFFIXES:
            yield from read_corpus(path)
        elif suffix in TEXT_SUFFIXES:
            text = _decoded(path.read_bytes(), path, None)
            if not text.strip():
                warn(f"skipped {str(path)!r}: the file has no text")
                continue
            metadata = {"file_path": str(path), "file_name": path.name}
            yield Document(str(path), text, document_title(text, metadata, None), metadata)


def _hidden(path: Path, folder: Path) -> bool:
    """Whether a file lies in a hidden folder or is hidden itself (.git, .DS_Store...)."""
    return any(part.startswith(".") for part in path.relative_to(folder).parts)


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
    doc_id = _record_id(record, where) or Passage(title, text).doc_id
    try:
        return Document(doc_id, text, title, dict(metadata))
    except InvalidInputError as error:
        raise InvalidInputError(f"{where}: {error}") from error


def add_in_batches(
    index: DocumentIndex,
    documents: Iterable[Document],
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    on_batch: Callable[[int], None] | None = None,
) -> IngestReport:
    """Add documents in batches of ``batch_size``, one transaction each, calling ``on_batch``.

    A later record with the same id replaces an earlier one, inside a batch as across batches
    (upsert). An interrupted ingest keeps every batch committed before the interruption.
    """
    if batch_size < 1:
        raise InvalidInputError(f"batch size must be at least 1, got {batch_size}")
    counts = {"records": 0, "batches": 0}

    def batches() -> Iterator[list[Document]]:
        batch: dict[str, Document] = {}
        for document in documents:
            counts["records"] += 1
            batch[document.id] = document
            if len(batch) >= batch_size:
                counts["batches"] += 1
                yield list(batch.values())
                batch = {}
        if batch:
            counts["batches"] += 1
            yield list(batch.values())

    units = index.ingest(batches(), on_batch=on_batch)
    return IngestReport(counts["records"], counts["batches"], units)


def _decoded(raw: bytes, path: Path, line: int | None) -> str:
    """UTF-8 text (a leading byte-order mark is dropped), or an error naming file and line."""
    try:
        return raw.decode("utf-8-sig" if line in (None, 1) else "utf-8")
    except UnicodeDecodeError as error:
        where = f"{path}: line {line}" if line is not None else str(path)
        raise InvalidInputError(
            f"{where}: not valid UTF-8 text (byte {error.start}); save the corpus as UTF-8"
        ) from None


def _looks_like_jsonl(path: Path) -> bool:
    """True when a file with an unknown suffix holds a complete JSON object on its first line."""
    if path.suffix.lower() == ".json":
        return False
    with path.open("rb") as handle:
        first = _decoded(next((line for line in handle if line.strip()), b""), path, 1)
    try:
        return isinstance(json.loads(first), dict)
    except json.JSONDecodeError:
        return False


def _read_jsonl(path: Path) -> Iterator[Document]:
    """Documents of a JSONL file, one per non-blank line; errors name the line number."""
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            line = _decoded(raw, path, number)
            if not line.strip():
                continue
            where = f"{path}: line {number}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise InvalidInputError(f"{where}: not valid JSON ({error.msg})") from error
            yield document_from_record(record, where)


def _read_json(path: Path) -> Iterator[Document]:
    """Documents of a whole-file JSON corpus: a list of records or a title -> sentences dict."""
    try:
        payload = json.loads(_decoded(path.read_bytes(), path, None))
    except json.JSONDecodeError as error:
        raise InvalidInputError(
            f"{path}: not valid JSON ({error}); JSONL files need a .jsonl suffix"
        ) from error
    if isinstance(payload, list):
        return (
            document_from_record(record, f"{path}: record {number}")
            for number, record in enumerate(payload, start=1)
        )
    if isinstance(payload, dict):
        return (
            _document_from_sentences(title, sentences, path) for title, sentences in payload.items()
        )
    raise InvalidInputError(
        f"{path}: expected a JSON list of {{title, text}} records, a JSON object mapping titles "
        f"to sentence lists, or JSONL; got a JSON {type(payload).__name__}"
    )


def _document_from_sentences(title: str, sentences: Any, path: Path) -> Document:
    """A HotpotQA corpus entry as a document: the sentences joined, as HippoRAG does."""
    if not isinstance(sentences, list) or not all(isinstance(s, str) for s in sentences):
        raise InvalidInputError(
            f"{path}: entry {title!r}: value must be a list of sentence strings"
        )
    text = "".join(sentences)
    try:
        return Document(Passage(title, text).doc_id, text, title)
    except InvalidInputError as error:
        raise InvalidInputError(f"{path}: entry {title!r}: {error}") from error


def _record_id(record: Mapping[str, Any], where: str) -> str | None:
    """The record's explicit id as a string (integers allowed), or None when absent."""
    value = record.get("id")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise InvalidInputError(f"{where}: `id` must be a string or an integer, got {value!r}")
    return str(value)
