"""The judge requests SAG2 makes on labelled questions, for fitting an offline judge.

`collect_requests` runs the engine over the questions with any judge and keeps every request it
asks, paired with its question; `fit_pool_judge.py` (beside this file) labels and featurises
them. Training code stays out of the runtime package.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from sag2_retrievers import SAG2Config, SAG2Engine, SQLiteIndex
from sag2_retrievers.eval.datasets import EvalQuestion
from sag2_retrievers.judges.base import Judge, JudgeRequest


class RecordingJudge(Judge):
    """Scores with an inner judge and keeps every request it was asked, in order."""

    def __init__(self, inner: Judge) -> None:
        super().__init__()
        self.inner = inner
        self.requests: list[JudgeRequest] = []
        self.scores_whole_request = inner.scores_whole_request

    @property
    def identity(self) -> str:
        """The inner judge's identity: recording does not change a score."""
        return self.inner.identity

    async def _score(self, request: JudgeRequest) -> list[float]:
        """Remember the request, then let the inner judge score it."""
        self.requests.append(request)
        return await self.inner.score(request)


def collect_requests(
    index: SQLiteIndex,
    questions: Sequence[EvalQuestion],
    judge: Judge,
    config: SAG2Config | None = None,
) -> list[tuple[EvalQuestion, JudgeRequest]]:
    """Every judge request SAG2 makes for each question (default: H=2), with its question."""
    recorder = RecordingJudge(judge)
    engine = SAG2Engine(index, recorder, config or SAG2Config(hops=2))
    pairs: list[tuple[EvalQuestion, JudgeRequest]] = []

    async def run() -> None:
        for question in questions:
            start = len(recorder.requests)
            await engine.aretrieve(question.question, 10)
            pairs.extend((question, r) for r in recorder.requests[start:])

    asyncio.run(run())
    return pairs
