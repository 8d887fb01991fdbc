"""Deterministic judges for tests and benchmarks: lexical overlap, and scripted scores."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping

from ..analysis import tokenize
from .base import Candidate, Judge, JudgeRequest

ScoreFunction = Callable[[JudgeRequest, Candidate], float | Awaitable[float]]


class OverlapJudge(Judge):
    """Scores a candidate by the share of question tokens it contains (context adds half weight).

    Instant and deterministic: for tests, and for benchmarks of everything but the judge.
    """

    def __init__(self, context_weight: float = 0.5) -> None:
        super().__init__()
        self.context_weight = context_weight

    @property
    def identity(self) -> str:
        """Names the judge and its context weight."""
        return f"fake-overlap:{self.context_weight}"

    async def _score(self, request: JudgeRequest) -> list[float]:
        """Question-token recall of each candidate, mixed with its overlap with the context."""
        question = set(tokenize(request.question))
        context = {t for passage in request.context for t in tokenize(passage.text)}
        scores = []
        for candidate in request.candidates:
            tokens = set(tokenize(candidate.title + " " + candidate.text))
            direct = len(question & tokens) / len(question) if question else 0.0
            bridge = len(context & tokens) / len(tokens) if tokens and context else 0.0
            scores.append(min(1.0, (direct + self.context_weight * bridge) / 1.5))
        return scores


class ScriptedJudge(Judge):
    """Scores from a mapping (candidate text -> score, default for the rest) or a callable.

    The callable receives the whole request and one candidate, and may be async. Every
    request is kept in ``requests`` so tests can inspect pools and contexts.
    """

    def __init__(
        self,
        scores: Mapping[str, float] | ScoreFunction,
        *,
        default: float = 0.0,
        name: str = "scripted",
    ) -> None:
        super().__init__()
        self._scores = scores
        self.default = default
        self.name = name
        self.requests: list[JudgeRequest] = []

    @property
    def identity(self) -> str:
        """Names this scripted judge."""
        return f"fake-scripted:{self.name}"

    async def _score(self, request: JudgeRequest) -> list[float]:
        """Look up or compute each candidate's score."""
        self.requests.append(request)
        if isinstance(self._scores, Mapping):
            table = self._scores
            return [table.get(c.text, self.default) for c in request.candidates]
        results = []
        for candidate in request.candidates:
            value = self._scores(request, candidate)
            results.append(await value if inspect.isawaitable(value) else value)
        return [float(v) for v in results]
