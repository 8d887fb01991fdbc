"""Document (what users give) and Unit (an indexed chunk) records, and the chunking rule."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import InvalidInputError

MAX_TEXT_CHARS = 50_000_000
MAX_TITLE_CHARS = 2_000
MAX_METADATA_DEPTH = 64
# Each pattern's group 1 ends where the chunk's content ends (before the break's whitespace).
_PARAGRAPH_BREAK = re.compile(r"(\S)\s*\n")
_SENTENCE_END = re.compile(r"([.!?][\"')\]]?)\s|([。！？][」』\"')\]]?)")
_WHITESPACE = re.compile(r"(\S)\s")
_VISIBLE = re.compile(r"\S")


@dataclass(frozen=True)
class Document:
    """A source document: a stable id, its text, an optional title and JSON-able metadata.

    ``heading`` is a heading path that applies to the whole text (e.g. the section a framework's
    markdown parser cut it from); the markdown headings inside the text add to it per unit.
    Metadata is validated and serialised once, at construction (``metadata_json``): that is
    what the index stores, so changing the mapping afterwards has no effect on it.
    """

    id: str
    text: str
    title: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    heading: str = ""
    metadata_json: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        """Reject documents the index could not store faithfully, naming the document."""
        if not isinstance(self.id, str) or not self.id.strip():
            raise InvalidInputError(f"document id must be a non-empty string, got {self.id!r}")
        if "\x00" in self.id:
            # SQLite's json_each (used to bind id lists) would cut the id at the NUL.
            raise InvalidInputError(f"document id {self.id!r} contains a NUL character")
        _require_encodable(self.id, "id", self.id)
        for name in ("text", "title", "heading"):
            value = getattr(self, name)
            if not isinstance(value, str):
                raise InvalidInputError(
                    f"document {self.id!r}: {name} must be a string, got {type(value).__name__}"
                )
            if "\x00" in value:
                raise InvalidInputError(f"document {self.id!r}: {name} contains a NUL character")
            _require_encodable(self.id, name, value)
        if not self.text.strip():
            raise InvalidInputError(f"document {self.id!r}: text is empty")
        if len(self.text) > MAX_TEXT_CHARS:
            raise InvalidInputError(
                f"document {self.id!r}: text has {len(self.text):,} characters, "
                f"more than the limit of {MAX_TEXT_CHARS:,}; split it first"
            )
        for name in ("title", "heading"):
            length = len(getattr(self, name))
            if length > MAX_TITLE_CHARS:
                raise InvalidInputError(
                    f"document {self.id!r}: {name} has {length:,} characters, more than the "
                    f"limit of {MAX_TITLE_CHARS:,}; put long text in the body"
                )
        object.__setattr__(self, "metadata_json", _metadata_json(self.id, self.metadata))


def _metadata_json(doc_id: str, metadata: object) -> str:
    """Metadata as JSON text, or an error naming the document and what cannot be stored."""
    if not isinstance(metadata, Mapping):
        raise InvalidInputError(f"document {doc_id!r}: metadata must be a mapping")
    if not metadata:
        return "{}"
    _check_metadata_keys(doc_id, metadata)
    try:
        text = json.dumps(dict(metadata), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as error:
        raise InvalidInputError(
            f"document {doc_id!r}: metadata is not JSON-serialisable ({error})"
        ) from None
    _require_encodable(doc_id, "metadata", text)
    return text


def _check_metadata_keys(doc_id: str, metadata: Mapping[Any, Any]) -> None:
    """Every mapping key, at any depth, must be a string; nesting is bounded; no key or
    string holds NUL (PostgreSQL's jsonb cannot store it, so neither backend does)."""
    stack: list[tuple[object, int]] = [(metadata, 0)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, str) and "\x00" in value:
            raise InvalidInputError(
                f"document {doc_id!r}: metadata string {value!r} contains a NUL character"
            )
        if depth > MAX_METADATA_DEPTH:
            raise InvalidInputError(
                f"document {doc_id!r}: metadata is nested deeper than {MAX_METADATA_DEPTH} levels"
            )
        if isinstance(value, Mapping):
            for key, item in value.items():
                if not isinstance(key, str):
                    raise InvalidInputError(
                        f"document {doc_id!r}: metadata key {key!r} is not a string"
                    )
                stack.extend([(key, depth + 1), (item, depth + 1)])
        elif isinstance(value, (list, tuple)):
            stack.extend((item, depth + 1) for item in value)


def _require_encodable(doc_id: str, field_name: str, value: str) -> None:
    """Reject text that cannot be stored as UTF-8 (lone surrogates), naming the document."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        raise InvalidInputError(
            f"document {doc_id!r}: {field_name} holds a character that is not valid Unicode "
            f"text (a lone surrogate at position {error.start})"
        ) from None


@dataclass(frozen=True)
class Unit:
    """One indexed chunk of a document; ``body == document.text[char_start:char_end]``."""

    unit_id: int
    doc_id: str
    title: str
    heading: str
    body: str
    char_start: int
    char_end: int


@dataclass(frozen=True)
class Span:
    """A half-open character range ``[start, end)`` of a document's text."""

    start: int
    end: int


def chunk_spans(text: str, target: int) -> list[Span]:
    """Split text into spans near ``target`` characters (ARCHITECTURE §4.2).

    A text up to 1.2 x target stays whole. Longer text is cut near ``target``, never below
    0.8 x target nor above 1.2 x target, preferring a paragraph break, then a sentence end,
    then whitespace; only when none exists is a word cut at ``target``.
    """
    spans: list[Span] = []
    start = 0
    while len(text) - start > 1.2 * target:
        first_visible = _VISIBLE.search(text, start)
        start = first_visible.start() if first_visible else len(text)
        if len(text) - start <= 1.2 * target:
            break
        end = _cut_point(text, start, target)
        spans.append(Span(start, end))
        start = end
    spans.append(Span(start, len(text)))
    return [_trimmed(text, span) for span in spans if text[span.start : span.end].strip()]


def _cut_point(text: str, start: int, target: int) -> int:
    """The end of the chunk starting at ``start``: the best break inside the allowed window.

    A break counts where the chunk's content would end, so trimming the whitespace after it
    can never leave a chunk shorter than 0.8 x target.
    """
    low, high, ideal = start + math.ceil(0.8 * target), start + int(1.2 * target), start + target
    for pattern in (_PARAGRAPH_BREAK, _SENTENCE_END, _WHITESPACE):
        ends = [
            match.end(match.lastindex or 0)
            for match in pattern.finditer(text, max(start, low - 2), high + 1)
        ]
        ends = [end for end in ends if low <= end <= high]
        if ends:
            return min(ends, key=lambda end: (abs(end - ideal), end))
    return ideal


def _trimmed(text: str, span: Span) -> Span:
    """Shrink a span so it neither starts nor ends with whitespace."""
    piece = text[span.start : span.end]
    leading = len(piece) - len(piece.lstrip())
    trailing = len(piece) - len(piece.rstrip())
    return Span(span.start + leading, span.end - trailing)


def validated_batch(documents: Iterable[Document]) -> list[Document]:
    """The batch as a list; rejects non-documents and repeated ids, naming the offender."""
    if isinstance(documents, Document):
        raise InvalidInputError("pass a list of documents, not a single Document")
    batch = list(documents)
    seen: set[str] = set()
    for position, document in enumerate(batch):
        if not isinstance(document, Document):
            raise InvalidInputError(
                f"item {position} of the batch is a {type(document).__name__}, not a Document"
            )
        if document.id in seen:
            raise InvalidInputError(f"document id {document.id!r} appears twice in one batch")
        seen.add(document.id)
    return batch
