"""Conversions between LlamaIndex nodes and SAG2 records: what is indexed, and what comes back.

Each LlamaIndex node (a chunk, or a whole ``Document``) is indexed as one SAG2 document whose
id is the node id and whose metadata is the node's metadata plus one reserved entry,
``_sag2``, recording where the node came from: its source document id (the node's SOURCE
relationship, or the node itself; a random source id is replaced by the stable one its file
path or content gives, so a re-run stores and returns the same ids), the node's start offset
in that source, the span of its non-blank content, and its excluded metadata keys. SAG2 may
cut a long node into units; a result is one unit, mapped back to the source document with
absolute character offsets.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from llama_index.core.schema import (
    BaseNode,
    MetadataMode,
    NodeRelationship,
    NodeWithScore,
    ObjectType,
    RelatedNodeInfo,
    TextNode,
)

from sag2_retrievers import Document as CoreDocument
from sag2_retrievers import InvalidInputError, RetrievalResult, RetrievedUnit
from sag2_retrievers.adapter_kit import (
    SourceRecord,
    document_title,
    is_random_id,
    plan_ingest,
    stable_source_id,
)
from sag2_retrievers.markdown import HEADING_SEPARATOR
from sag2_retrievers.results import why_empty

logger = logging.getLogger(__name__)

RESERVED_KEY = "_sag2"
SOURCE_FILTER_KEY = f"{RESERVED_KEY}.source"
RESULT_KEYS = ("sag2_round", "sag2_rank", "judge_score")
HEADER_PATH_KEY = "header_path"  # set by llama_index.core.node_parser.MarkdownNodeParser


@dataclass(frozen=True)
class Provenance:
    """Where an indexed node came from, stored under ``_sag2`` in its SAG2 metadata.

    ``offset`` is the node's start in its source document (None when unknown), ``span`` the
    node-relative range of its non-blank content (None for documents indexed outside LlamaIndex).
    """

    source_id: str
    offset: int | None
    span: tuple[int, int] | None
    excluded_llm_keys: tuple[str, ...] = ()
    excluded_embed_keys: tuple[str, ...] = ()

    def as_json(self) -> dict[str, Any]:
        """The JSON object stored in the SAG2 document's metadata."""
        return {
            "source": self.source_id,
            "offset": self.offset,
            "span": list(self.span) if self.span is not None else None,
            "excluded_llm_keys": list(self.excluded_llm_keys),
            "excluded_embed_keys": list(self.excluded_embed_keys),
        }

    @classmethod
    def from_json(cls, doc_id: str, stored: object) -> Provenance:
        """Read it back; a document indexed without the adapter is its own source, and so is
        one whose ``_sag2`` value is not the adapter's shape (written by another client)."""
        if stored is None:
            return cls(doc_id, 0, None)
        if not _is_provenance(stored):
            logger.debug("document %r: ignoring a %r value it did not write", doc_id, RESERVED_KEY)
            return cls(doc_id, 0, None)
        assert isinstance(stored, Mapping)
        span = stored.get("span")
        return cls(
            stored["source"],
            stored.get("offset"),
            (int(span[0]), int(span[1])) if span is not None else None,
            tuple(stored.get("excluded_llm_keys", ())),
            tuple(stored.get("excluded_embed_keys", ())),
        )


def _is_provenance(stored: object) -> bool:
    """Whether a stored ``_sag2`` value has the shape `Provenance.as_json` writes."""
    if not isinstance(stored, Mapping) or not isinstance(stored.get("source"), str):
        return False
    offset, span = stored.get("offset"), stored.get("span")
    if offset is not None and not _is_count(offset):
        return False
    if span is not None and not (
        isinstance(span, list) and len(span) == 2 and all(map(_is_count, span))
    ):
        return False
    keys = [stored.get(name, []) for name in ("excluded_llm_keys", "excluded_embed_keys")]
    return all(isinstance(names, list) and all(isinstance(n, str) for n in names) for names in keys)


def _is_count(value: object) -> bool:
    """A non-negative int (JSON booleans are not)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def to_core_documents(
    nodes: Sequence[BaseNode], title_key: str | None, *, skip_empty: bool = True
) -> list[CoreDocument]:
    """The SAG2 documents for a batch of nodes, by the core's shared ingest rules.

    A random (UUID4) node id, LlamaIndex's default, is replaced by a stable one (the file path,
    else a content hash), so indexing the same folder again upserts instead of duplicating.
    Blank nodes are skipped with one warning (or refused), exact repeats indexed once.
    """
    records = [
        SourceRecord(
            None if is_random_id(node.node_id) else node.node_id,
            node.get_content(metadata_mode=MetadataMode.NONE),
            node.metadata,
        )
        for node in nodes
    ]
    planned = plan_ingest(records, skip_empty=skip_empty)
    return [to_core_document(nodes[position], title_key, doc_id) for position, doc_id in planned]


def to_core_document(
    node: BaseNode, title_key: str | None, doc_id: str | None = None
) -> CoreDocument:
    """The SAG2 document for a node: its id (or ``doc_id``), plain text, title, heading path
    (from MarkdownNodeParser's ``header_path``) and provenance."""
    doc_id = node.node_id if doc_id is None else doc_id
    text = node.get_content(metadata_mode=MetadataMode.NONE)
    metadata = dict(node.metadata)
    if RESERVED_KEY in metadata:
        raise InvalidInputError(
            f"node {node.node_id!r}: metadata key {RESERVED_KEY!r} is reserved by SAG2; rename it"
        )
    source = node.source_node
    provenance = Provenance(
        doc_id
        if source is None
        else stable_source_id(source.node_id, source.metadata, source.hash),
        _source_offset(node, text) if source is not None else 0,
        (len(text) - len(text.lstrip()), len(text.rstrip())),
        tuple(node.excluded_llm_metadata_keys),
        tuple(node.excluded_embed_metadata_keys),
    )
    metadata[RESERVED_KEY] = provenance.as_json()
    title = document_title(text, node.metadata, title_key)
    return CoreDocument(doc_id, text, title, metadata, heading=_header_path(node.metadata))


def _header_path(metadata: Mapping[str, Any]) -> str:
    """MarkdownNodeParser's ``header_path`` ("/Guide/Setup/") as a SAG2 heading path."""
    path = metadata.get(HEADER_PATH_KEY)
    if not isinstance(path, str):
        return ""
    return HEADING_SEPARATOR.join(part.strip() for part in path.split("/") if part.strip())


def _source_offset(node: BaseNode, text: str) -> int | None:
    """The node's start in its source document, when recorded and consistent with its text."""
    start = getattr(node, "start_char_idx", None)
    end = getattr(node, "end_char_idx", None)
    if start is None or (end is not None and end - start != len(text)):
        return None
    return int(start)


def to_nodes(result: RetrievalResult, title_key: str | None) -> list[NodeWithScore]:
    """The retrieval's hits as scored LlamaIndex nodes, best first (why none, in a debug log)."""
    reason = why_empty(result)
    if reason is not None:
        logger.debug("SAG2 returned no nodes: %s", reason)
    return [to_node_with_score(hit, result.degraded, title_key) for hit in result.hits]


def to_node_with_score(hit: RetrievedUnit, degraded: bool, title_key: str | None) -> NodeWithScore:
    """One hit as a TextNode pointing at its source document, scored by the judge.

    When the judge failed and SAG2 fell back to lexical order (``degraded``), the score is
    BM25's and ``judge_score`` is None.
    """
    metadata = dict(hit.metadata)
    provenance = Provenance.from_json(hit.doc_id, metadata.pop(RESERVED_KEY, None))
    if title_key and hit.title and title_key not in metadata:
        metadata[title_key] = hit.title
    metadata.update(
        sag2_round=hit.round_found,
        sag2_rank=hit.rank,
        judge_score=None if degraded else hit.score,
    )
    offset = provenance.offset
    node = TextNode(
        id_=result_node_id(hit, provenance),
        text=hit.text,
        metadata=metadata,
        excluded_llm_metadata_keys=[*provenance.excluded_llm_keys, *RESULT_KEYS],
        excluded_embed_metadata_keys=[*provenance.excluded_embed_keys, *RESULT_KEYS],
        relationships={
            NodeRelationship.SOURCE: RelatedNodeInfo(
                node_id=provenance.source_id, node_type=ObjectType.DOCUMENT
            )
        },
        start_char_idx=None if offset is None else offset + hit.char_start,
        end_char_idx=None if offset is None else offset + hit.char_end,
    )
    return NodeWithScore(node=node, score=hit.score)


def result_node_id(hit: RetrievedUnit, provenance: Provenance) -> str:
    """The indexed node's id when the unit is all of it, else ``"<node id>:<start>-<end>"``.

    Offsets in the suffix are relative to the indexed node, so the id is stable across
    re-indexing and unique among the units of one node.
    """
    if provenance.span == (hit.char_start, hit.char_end):
        return hit.doc_id
    return f"{hit.doc_id}:{hit.char_start}-{hit.char_end}"
