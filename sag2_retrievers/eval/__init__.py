"""Evaluation basics: HippoRAG-format loaders, R@k / AE@k metrics and the paired bootstrap."""

from sag2_retrievers.eval.bootstrap import BootstrapResult, paired_bootstrap
from sag2_retrievers.eval.datasets import (
    EvalQuestion,
    Passage,
    hops_from_id,
    load_corpus,
    load_questions,
    pool_corpus,
    unique_passages,
)
from sag2_retrievers.eval.metrics import (
    QuestionResult,
    Summary,
    all_evidence_at,
    per_question_metrics,
    recall_at,
    summarize,
)

__all__ = [
    "BootstrapResult",
    "EvalQuestion",
    "Passage",
    "QuestionResult",
    "Summary",
    "all_evidence_at",
    "hops_from_id",
    "load_corpus",
    "load_questions",
    "paired_bootstrap",
    "per_question_metrics",
    "pool_corpus",
    "recall_at",
    "summarize",
    "unique_passages",
]
