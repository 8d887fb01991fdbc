"""Turning documents into index rows: chunking and analysis, in parallel when the batch is big."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from concurrent.futures import Executor, ProcessPoolExecutor
from dataclasses import dataclass

from .documents import Document, chunk_spans
from .errors import InvalidInputError
from .text import analyze_body, tokenize

PARALLEL_MIN_CHARS = 400_000
SENTENCE_SEPARATOR = "\n"
TERM_SEPARATOR = "\t"


@dataclass(frozen=True)
class PreparedUnit:
    """One unit ready to write: offsets, FTS token streams, and stored expansion units."""

    char_start: int
    char_end: int
    title_tokens: str
    body_tokens: str
    expansion: str


@dataclass(frozen=True)
class PreparedDocument:
    """A validated document with its serialised metadata and prepared units."""

    document: Document
    metadata_json: str
    units: tuple[PreparedUnit, ...]


def prepare_documents(
    documents: Sequence[Document], chunk_chars: int, executor: Executor | None
) -> list[PreparedDocument]:
    """Chunk and analyse every document, in worker processes when given and worthwhile."""
    payloads = [(doc, chunk_chars) for doc in documents]
    if executor is not None and sum(len(doc.text) for doc in documents) >= PARALLEL_MIN_CHARS:
        chunksize = max(1, len(payloads) // (4 * worker_count()))
        return list(executor.map(_prepare_one, payloads, chunksize=chunksize))
    return [_prepare_one(payload) for payload in payloads]


def worker_count() -> int:
    """Worker processes for analysis: the machine's cores, at most 8."""
    return max(1, min(8, os.cpu_count() or 1))


def new_executor() -> Executor:
    """A process pool for analysis; the caller shuts it down."""
    return ProcessPoolExecutor(max_workers=worker_count())


def _prepare_one(payload: tuple[Document, int]) -> PreparedDocument:
    """Chunk one document, analyse each unit, and serialise its metadata."""
    document, chunk_chars = payload
    title_tokens = " ".join(tokenize(document.title))
    units = []
    for span in chunk_spans(document.text, chunk_chars):
        analysis = analyze_body(document.text[span.start : span.end])
        expansion = SENTENCE_SEPARATOR.join(
            TERM_SEPARATOR.join(sentence) for sentence in analysis.sentences
        )
        units.append(
            PreparedUnit(span.start, span.end, title_tokens, " ".join(analysis.tokens), expansion)
        )
    return PreparedDocument(document, _metadata_json(document), tuple(units))


def _metadata_json(document: Document) -> str:
    """Serialise metadata as JSON, naming the document when a value cannot be stored."""
    try:
        return json.dumps(dict(document.metadata), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise InvalidInputError(
            f"document {document.id!r}: metadata is not JSON-serialisable ({error})"
        ) from error


def parse_expansion(stored: str) -> list[list[str]]:
    """Read a unit's stored expansion units back: one list of terms per sentence."""
    if not stored:
        return []
    return [
        [term for term in sentence.split(TERM_SEPARATOR) if term]
        for sentence in stored.split(SENTENCE_SEPARATOR)
    ]
