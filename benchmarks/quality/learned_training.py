"""Training examples for the learned judge, taken from SAG2's own trajectories.

`collect_requests` runs the engine over labelled questions with any judge and keeps every
request it asks; `labelled_examples` turns them into (features, label, question) rows, labels
from the questions' gold passages. `fit_learned_judge.py` (beside this file) drives both on the
train fixtures and fits the packaged model with `learned.fit_model`; training code stays out of
the runtime package.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from sag2_retrievers import SAG2Config, SAG2Engine, SQLiteIndex
from sag2_retrievers.eval.datasets import EvalQuestion
from sag2_retrievers.judges.base import Judge, JudgeRequest
from sag2_retrievers.judges.offline._evidence_features import FEATURE_NAMES, Matrix


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


@dataclass(frozen=True)
class Examples:
    """Feature rows, their 0/1 labels, and the question each row belongs to."""

    features: Matrix
    labels: npt.NDArray[np.float64]
    questions: tuple[str, ...]

    @property
    def positives(self) -> int:
        """How many rows are gold passages."""
        return int(self.labels.sum())


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


def labelled_examples(
    pairs: Sequence[tuple[EvalQuestion, JudgeRequest]],
    features: Callable[[JudgeRequest], Matrix],
) -> Examples:
    """Feature rows of every judged candidate, labelled 1 when it is one of the question's gold."""
    blocks: list[Matrix] = []
    labels: list[float] = []
    owners: list[str] = []
    for question, request in pairs:
        gold = set(question.gold)
        blocks.append(features(request))
        labels.extend(float(f"{c.title}\n{c.text}" in gold) for c in request.candidates)
        owners.extend(question.id for _ in request.candidates)
    matrix = np.vstack(blocks) if blocks else np.zeros((0, len(FEATURE_NAMES)))
    return Examples(matrix, np.array(labels, dtype=np.float64), tuple(owners))
