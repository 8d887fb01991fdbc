"""What an evaluation would spend on its judge, found without calling any model.

Each question runs through the engine with a stand-in judge that scores candidates by their
BM25 against the question (normalised within the round) and asks the real judge's
`Judge.estimate` what each round's request would cost. The pools and contexts are therefore
the engine's own for those scores; a real judge's scores change which units expansion finds,
but hardly the pool sizes, which the configuration caps.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

from ..backends.base import DocumentIndex
from ..config import SAG2Config
from ..engine import SAG2Engine
from ..errors import InvalidInputError, SAG2Error
from ..judges.base import CallEstimate, Judge, JudgeRequest
from .datasets import EvalQuestion

DEPTH = 10


@dataclass(frozen=True)
class RunEstimate:
    """The expected judge calls and input tokens of an evaluation over some questions."""

    questions: int
    http_calls: int
    input_tokens: int

    @property
    def http_calls_per_question(self) -> float:
        """Mean expected calls per question."""
        return self.http_calls / self.questions

    @property
    def input_tokens_per_question(self) -> float:
        """Mean expected input tokens per question."""
        return self.input_tokens / self.questions


class InputBudgetError(SAG2Error):
    """An evaluation's estimated input tokens exceed the budget it was given."""


def check_input_budget(estimate: RunEstimate, max_input_tokens: int) -> None:
    """Raise InputBudgetError when the estimate exceeds ``max_input_tokens``."""
    if estimate.input_tokens > max_input_tokens:
        raise InputBudgetError(
            f"the run would send about {estimate.input_tokens:,} input tokens to the judge, "
            f"over --max-input-tokens {max_input_tokens:,}; evaluate fewer questions (--limit), "
            "choose a cheaper transport (--judge-transport completions, --judge-group) or "
            "raise the budget"
        )


def describe(estimate: RunEstimate) -> str:
    """A one-line summary of an estimate."""
    return (
        f"estimate for {estimate.questions} questions: {estimate.http_calls:,} judge calls "
        f"({estimate.http_calls_per_question:,.1f} per question), about "
        f"{estimate.input_tokens:,} input tokens ({estimate.input_tokens_per_question:,.0f} "
        "per question); no model was called"
    )


class _PlanningJudge(Judge):
    """Scores by question BM25 and adds up what the real judge would spend on each request."""

    def __init__(self, judge: Judge) -> None:
        super().__init__()
        self._judge = judge
        self._lock = threading.Lock()
        self.expected = CallEstimate()

    @property
    def identity(self) -> str:
        """The real judge's identity, marked as an estimate."""
        return f"estimate:{self._judge.identity}"

    async def _score(self, request: JudgeRequest) -> list[float]:
        """Record the request's expected cost; score each candidate by its question BM25."""
        expected = self._judge.estimate(request)
        with self._lock:
            self.expected += expected
        bm25 = [candidate.question_bm25 or 0.0 for candidate in request.candidates]
        top = max(bm25)
        return [score / top if top > 0 else 0.0 for score in bm25]


def estimate_run(
    index: DocumentIndex, questions: Sequence[EvalQuestion], judge: Judge, config: SAG2Config
) -> RunEstimate:
    """The calls and input tokens ``judge`` would spend on SAG2 over the questions."""
    if not questions:
        raise InvalidInputError("no questions to estimate")
    planning = _PlanningJudge(judge)
    engine = SAG2Engine(index, planning, config)
    try:
        for question in questions:
            engine.retrieve(question.question, top_k=DEPTH)
    finally:
        engine.close()
    return RunEstimate(len(questions), planning.expected.http_calls, planning.expected.input_tokens)
