"""The instant judges the speed benchmarks choose from (``--judge``), shared by every one.

``overlap`` follows relevance (`OverlapJudge`: the share of question words a passage holds).
``replay`` gives the trajectories users get from the default offline judge: `PoolJudge`'s
scores are recorded once per corpus and question set into a file, then replayed by request
digest, instantly; a request that was never recorded means the trajectory changed, which is
an error. ``crc`` scores a passage by a checksum of its text: seeds are random passages, so
its times are only a lower bound. Each is wrapped in `CpuMetered`, so a benchmark can take
the judge's CPU time out of the process's (all three score synchronously, in one thread).
"""

from __future__ import annotations

import json
import time
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path

from sag2_retrievers import SAG2Engine
from sag2_retrievers.judges.base import Candidate, Judge, JudgeRequest
from sag2_retrievers.judges.cache import judgment_keys
from sag2_retrievers.judges.fakes import OverlapJudge, ScriptedJudge
from sag2_retrievers.judges.offline.pool import PoolJudge

JUDGES = ("overlap", "replay", "crc")
# The engine of one corpus, built around a judge (the benchmark's index stays open).
EngineFactory = Callable[[Judge], SAG2Engine]


def instant_score(_: JudgeRequest, candidate: Candidate) -> float:
    """A constant-time pseudo-score (a lower bound: it ignores relevance)."""
    return zlib.crc32(candidate.text.encode()) / 2**32


class RecordingJudge(Judge):
    """Scores with `PoolJudge` and keeps each judgment under its whole-request digest."""

    scores_whole_request = True

    def __init__(self) -> None:
        super().__init__()
        self.inner = PoolJudge()
        self.recorded: dict[str, float] = {}

    @property
    def identity(self) -> str:
        """The recorded judge's identity, so the digests name it."""
        return self.inner.identity

    async def _score(self, request: JudgeRequest) -> list[float]:
        """Score with the pool judge and remember every score."""
        scores = self.inner.score_now(request)
        self.recorded.update(zip(judgment_keys(self.identity, request, True), scores, strict=True))
        return scores


class ReplayJudge(Judge):
    """Replays recorded `PoolJudge` scores; an unrecorded request is a changed trajectory."""

    scores_whole_request = True

    def __init__(self, identity: str, recorded: dict[str, float]) -> None:
        super().__init__()
        self._identity = identity
        self.recorded = recorded

    @property
    def identity(self) -> str:
        """The recorded judge's identity."""
        return self._identity

    async def _score(self, request: JudgeRequest) -> list[float]:
        """The recorded scores of this exact request."""
        keys = judgment_keys(self._identity, request, True)
        missing = sum(key not in self.recorded for key in keys)
        if missing:
            raise LookupError(
                f"replay: {missing} judgments of a request for {request.question[:60]!r} were "
                "never recorded: the trajectory differs from the recording's"
            )
        return [self.recorded[key] for key in keys]


class CpuMetered(Judge):
    """A synchronous judge, with the CPU seconds spent inside it added up."""

    def __init__(self, inner: Judge) -> None:
        super().__init__()
        self.inner = inner
        self.scores_whole_request = inner.scores_whole_request
        self.cpu_seconds = 0.0

    @property
    def identity(self) -> str:
        """The inner judge's identity."""
        return self.inner.identity

    async def _score(self, request: JudgeRequest) -> list[float]:
        """The inner judge's scores, its thread CPU time counted."""
        started = time.thread_time()
        try:
            return await self.inner.score(request)
        finally:
            self.cpu_seconds += time.thread_time() - started


def replay_judge(make_engine: EngineFactory, questions: Sequence[str], path: Path) -> ReplayJudge:
    """The replay judge of a corpus: read from ``path``, or recorded there first."""
    if not path.exists():
        recorder = RecordingJudge()
        engine = make_engine(recorder)
        for question in questions:
            engine.retrieve(question, 10)
        engine.close()
        payload = {"identity": recorder.identity, "scores": recorder.recorded}
        path.write_text(json.dumps(payload))
    payload = json.loads(path.read_text())
    return ReplayJudge(payload["identity"], payload["scores"])


def bench_judge(
    name: str, make_engine: EngineFactory, questions: Sequence[str], recording: Path
) -> CpuMetered:
    """The judge called ``name`` (one of ``JUDGES``), metered; ``recording`` is replay's file."""
    if name == "overlap":
        return CpuMetered(OverlapJudge())
    if name == "replay":
        return CpuMetered(replay_judge(make_engine, questions, recording))
    if name == "crc":
        return CpuMetered(ScriptedJudge(instant_score, name="crc"))
    raise ValueError(f"unknown judge {name!r}; choose one of {', '.join(JUDGES)}")
