"""Turning documents into index rows: chunking and analysis, in parallel when the batch is big."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor
from dataclasses import dataclass

from .documents import Document, chunk_spans
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
    """What analysis adds to a document: its prepared units.

    The document itself stays with the caller, so worker processes never send its text back.
    """

    units: tuple[PreparedUnit, ...]


def prepare_documents(
    documents: Sequence[Document], chunk_chars: int, executor: Executor | None
) -> list[PreparedDocument]:
    """Chunk and analyse every document, in worker processes when given and worthwhile."""
    return start_preparing(documents, chunk_chars, executor)()


def start_preparing(
    documents: Sequence[Document], chunk_chars: int, executor: Executor | None
) -> Callable[[], list[PreparedDocument]]:
    """Start analysing a batch (in the background when worthwhile); call the result to wait.

    Large batches are split over the worker processes at once, so the caller can write the
    previous batch to SQLite while this one is analysed.
    """
    if executor is None or sum(len(doc.text) for doc in documents) < PARALLEL_MIN_CHARS:
        return lambda: _prepare_many(documents, chunk_chars)
    size = max(1, -(-len(documents) // (4 * worker_count())))
    futures = [
        executor.submit(_prepare_many, documents[start : start + size], chunk_chars)
        for start in range(0, len(documents), size)
    ]
    return lambda: [prepared for future in futures for prepared in future.result()]


def _prepare_many(documents: Sequence[Document], chunk_chars: int) -> list[PreparedDocument]:
    """Prepare a slice of a batch (runs in a worker process)."""
    return [_prepare_one((document, chunk_chars)) for document in documents]


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
    return PreparedDocument(tuple(units))


def parse_expansion(stored: str) -> list[list[str]]:
    """Read a unit's stored expansion units back: one list of terms per sentence."""
    if not stored:
        return []
    return [
        [term for term in sentence.split(TERM_SEPARATOR) if term]
        for sentence in stored.split(SENTENCE_SEPARATOR)
    ]
