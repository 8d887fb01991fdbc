"""The speed benchmarks' replay judge gives the pool judge's trajectories, and notices when
a trajectory is not the one recorded."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from sag2_retrievers import Document, SAG2Engine, SQLiteIndex
from sag2_retrievers.judges.base import Judge
from sag2_retrievers.judges.offline.pool import PoolJudge

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
QUESTIONS = [
    "Who founded the city where the Rosary Basilica stands?",
    "Which river flows through the capital of France?",
]


@pytest.fixture
def judges() -> Iterator[ModuleType]:
    """benchmarks/_judges.py, imported as the benchmarks import it."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        yield importlib.import_module("_judges")
    finally:
        sys.path.remove(str(BENCHMARKS))


def _rankings(index: SQLiteIndex, judge: Judge, questions: list[str]) -> list[list[int]]:
    """Each question's final unit ranking."""
    engine = SAG2Engine(index, judge)
    ranked = [[u.unit_id for u in engine.retrieve(q, 10).units] for q in questions]
    engine.close()
    return ranked


def test_replay_gives_the_pool_judges_rankings_and_refuses_another_trajectory(
    tmp_path: Path, judges: ModuleType, musique_documents: list[Document]
) -> None:
    index = SQLiteIndex(tmp_path / "replay.db")
    index.add_documents(musique_documents[:300], parallel=False)

    def make_engine(inner: Judge) -> SAG2Engine:
        return SAG2Engine(index, inner)

    recording = tmp_path / "replay.json"
    replay = judges.bench_judge("replay", make_engine, QUESTIONS, recording)
    assert recording.exists() and replay.inner.recorded
    assert _rankings(index, replay, QUESTIONS) == _rankings(index, PoolJudge(), QUESTIONS)
    with pytest.raises(LookupError, match="never recorded"):
        _rankings(index, replay, ["Which composer wrote a requiem for the dead?"])
    index.close()


def test_an_unknown_benchmark_judge_is_named(judges: ModuleType) -> None:
    with pytest.raises(ValueError, match="'llm'"):
        judges.bench_judge("llm", None, [], Path("unused.json"))
