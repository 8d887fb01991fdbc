"""Conversions between LangChain documents and SAG2 records: what is indexed, and what comes
back (a hit's chunk, its source id, its provenance and its position in the list)."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.documents import Document

from sag2_retrievers import Document as SourceDocument
from sag2_retrievers import InvalidInputError, RetrievalResult, RetrievedUnit
from sag2_retrievers.adapter_kit import SourceRecord, document_title, plan_ingest
from sag2_retrievers.markdown import HEADING_SEPARATOR
from sag2_retrievers.results import why_empty

logger = logging.getLogger(__name__)
_SPLITTER_HEADER = re.compile(r"Header ([1-6])")


def to_source_documents(
    documents: Sequence[Document],
    ids: Sequence[str] | None,
    title_key: str | None,
    *,
    skip_empty: bool,
) -> list[SourceDocument]:
    """The SAG2 documents for a batch, by the core's shared ingest rules (adapter_kit)."""
    given = _given_ids(documents, ids)
    records = [
        SourceRecord(doc_id, document.page_content, document.metadata)
        for doc_id, document in zip(given, documents, strict=True)
    ]
    planned = plan_ingest(records, skip_empty=skip_empty)
    return [
        to_source_document(doc_id, documents[position], title_key) for position, doc_id in planned
    ]


def to_source_document(doc_id: str, document: Document, title_key: str | None) -> SourceDocument:
    """The core record of a LangChain document: text, title from metadata, metadata, and
    the heading path `MarkdownHeaderTextSplitter` records ("Header 1", "Header 2", ...)."""
    metadata = dict(document.metadata)
    title = document_title(document.page_content, metadata, title_key)
    heading = _splitter_heading(metadata)
    return SourceDocument(doc_id, document.page_content, title, metadata, heading=heading)


def _splitter_heading(metadata: Mapping[str, Any]) -> str:
    """``{"Header 1": "Guide", "Header 2": "Setup"}`` (the names LangChain's markdown header
    splitter documents) as the heading path "Guide > Setup"; "" when there are none."""
    levels = sorted(
        (int(match.group(1)), value.strip())
        for key, value in metadata.items()
        if isinstance(key, str)
        and isinstance(value, str)
        and value.strip()
        and (match := _SPLITTER_HEADER.fullmatch(key))
    )
    return HEADING_SEPARATOR.join(value for _, value in levels)


def _given_ids(documents: Sequence[Document], ids: Sequence[str] | None) -> list[str | None]:
    """Explicit ids, else each document's own id (None: derived by the shared ingest rules)."""
    if ids is None:
        return [document.id or None for document in documents]
    if isinstance(ids, str) or len(ids) != len(documents):
        raise InvalidInputError(
            f"ids must be a sequence with one id per document ({len(documents)}), got {ids!r}"
        )
    return list(ids)


def to_documents(result: RetrievalResult) -> list[Document]:
    """The retrieval's hits as LangChain documents, best first (why none, in a debug log)."""
    reason = why_empty(result)
    if reason is not None:
        logger.debug("SAG2 returned no documents: %s", reason)
    return [to_document(hit, position) for position, hit in enumerate(result.hits, start=1)]


def to_document(hit: RetrievedUnit, position: int) -> Document:
    """A LangChain document for a hit: its chunk's text, source id, metadata, provenance,
    ``sag2_position`` (1-based place in the returned list) and ``sag2_rank`` (1-based rank
    among every chunk judged, so it skips the chunks the list leaves out)."""
    metadata = {
        "title": hit.title,  # the title searched (a metadata "title" of the caller's wins)
        **hit.metadata,
        "score": hit.score,
        "doc_id": hit.doc_id,
        "start_index": hit.char_start,
        "end_index": hit.char_end,
        "sag2_round": hit.round_found,
        "sag2_position": position,
        "sag2_rank": hit.rank,
    }
    return Document(id=hit.doc_id, page_content=hit.text, metadata=metadata)
