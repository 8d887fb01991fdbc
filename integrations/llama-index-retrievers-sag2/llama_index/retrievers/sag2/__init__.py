"""SAG2 multi-hop retrieval for LlamaIndex: BM25 candidates, a query-time judge, term expansion."""

from .base import SAG2QueryBundle, SAG2Retriever

__all__ = ["SAG2QueryBundle", "SAG2Retriever"]
