"""SAG2 multi-hop retrieval for LlamaIndex: BM25 candidates, a query-time judge, term expansion."""

from .base import SAG2QueryBundle, SAG2Retriever
from .events import SAG2RoundEvent
from .judge import LlamaIndexLLMJudge

__all__ = ["LlamaIndexLLMJudge", "SAG2QueryBundle", "SAG2Retriever", "SAG2RoundEvent"]
