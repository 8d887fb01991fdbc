"""Evidence-retrieval metrics R@k and AE@k over unique retrieved passages, as in the paper."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import TypedDict

from sag2_retrievers.errors import InvalidInputError

DEFAULT_KS: tuple[int, ...] = (1, 2, 5, 10)
DEFAULT_AE_KS: tuple[int, ...] = (10,)


@dataclass(frozen=True)
class QuestionResult:
    """One question's gold identities and the identities a method retrieved, best first."""

    question_id: str
    gold: tuple[str, ...]
    retrieved: tuple[str, ...]


class Summary(TypedDict):
    """Macro-averaged metrics in percent, keyed by the cutoff written as a string."""

    n_questions: int
    recall_at: dict[str, float]
    ae_at: dict[str, float]


def recall_at(gold: Collection[str], retrieved: Iterable[str], k: int) -> float:
    """Fraction of gold found within the first k unique retrieved passages (0.0 to 1.0)."""
    wanted = _gold_set(gold)
    return len(wanted & _first_unique(retrieved, k)) / len(wanted)


def all_evidence_at(gold: Collection[str], retrieved: Iterable[str], k: int) -> float:
    """1.0 when every gold passage is within the first k unique retrieved passages, else 0.0."""
    return 1.0 if _gold_set(gold) <= _first_unique(retrieved, k) else 0.0


def per_question_metrics(
    result: QuestionResult,
    ks: Sequence[int] = DEFAULT_KS,
    ae_ks: Sequence[int] = DEFAULT_AE_KS,
) -> dict[str, float]:
    """One question's `R@k` and `AE@k` values as fractions, for per-question JSON output."""
    if not result.gold:
        raise InvalidInputError(
            f"question {result.question_id!r} has no gold passages, so R@k is undefined; "
            "drop it from the evaluation set"
        )
    recalls = {f"R@{k}": recall_at(result.gold, result.retrieved, k) for k in ks}
    coverage = {f"AE@{k}": all_evidence_at(result.gold, result.retrieved, k) for k in ae_ks}
    return recalls | coverage


def summarize(
    per_question: Sequence[QuestionResult],
    ks: Sequence[int] = DEFAULT_KS,
    ae_ks: Sequence[int] = DEFAULT_AE_KS,
) -> Summary:
    """Macro-average R@k and AE@k over questions, in percent (0 to 100)."""
    if not per_question:
        raise InvalidInputError("no question results to summarize; evaluate at least one question")
    rows = [per_question_metrics(result, ks, ae_ks) for result in per_question]
    return Summary(
        n_questions=len(rows),
        recall_at={str(k): _mean_percent(rows, f"R@{k}") for k in ks},
        ae_at={str(k): _mean_percent(rows, f"AE@{k}") for k in ae_ks},
    )


def _mean_percent(rows: Sequence[dict[str, float]], key: str) -> float:
    """Average one metric over questions and express it in percent."""
    return 100.0 * sum(row[key] for row in rows) / len(rows)


def _gold_set(gold: Collection[str]) -> set[str]:
    """Return gold as a set, refusing an empty one because recall would divide by zero."""
    if not gold:
        raise InvalidInputError("gold is empty, so R@k is undefined; give at least one passage")
    return set(gold)


def _first_unique(retrieved: Iterable[str], k: int) -> set[str]:
    """The first k distinct items of retrieved, duplicates removed before the cut."""
    if k < 0:
        raise InvalidInputError(f"k must be >= 0, got {k}")
    return set(islice(dict.fromkeys(retrieved), k))
