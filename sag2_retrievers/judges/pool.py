"""The default offline judge: boosted trees over the evidence and graph features of the pool.

`PoolJudge` reads nothing but the request: each round's candidates and context form a small
lexical graph (`pool_graph`), and the features of `pool_features` are mapped to a
yes-probability by gradient-boosted trees fitted on SAG2's own trajectories over train-split
questions (``benchmarks/fit_pool_judge.py``). No model reads the corpus at ingest and no
embedding is computed, so an index is ready as soon as it is written. The trees ship in
``sag2_retrievers/data/pool_judge.json`` and run in numpy; the file's sha256 is part of the
judge's identity, so caches never mix two models.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import JudgeConfigurationError
from ._evidence_features import Matrix
from .base import Judge, JudgeRequest
from .model_files import check_header, read_model_file
from .pool_features import POOL_FEATURE_NAMES, pool_features
from .trees import TreeEnsemble, sigmoid

MODEL_FILE = "data/pool_judge.json"
MODEL_FORMAT = "sag2-pool-judge/1"


@dataclass(frozen=True)
class PoolModel:
    """A tree ensemble whose raw score becomes a probability through the logistic link."""

    trees: TreeEnsemble
    fitted: Mapping[str, Any] = field(default_factory=dict)

    def probabilities(self, features: Matrix) -> list[float]:
        """The yes-probability of each feature row."""
        return [float(p) for p in sigmoid(self.trees.raw_scores(features))]

    def to_json(self) -> dict[str, Any]:
        """The model file's content: format, feature names, trees and how they were fitted."""
        return {
            "format": MODEL_FORMAT,
            "features": list(POOL_FEATURE_NAMES),
            "trees": self.trees.to_json(),
            "fitted": dict(self.fitted),
        }

    @classmethod
    def from_json(cls, payload: Mapping[str, Any], source: str) -> PoolModel:
        """Read a model file's content, refusing another format or another feature list."""
        check_header(
            payload, source, MODEL_FORMAT, POOL_FEATURE_NAMES, "benchmarks/fit_pool_judge.py"
        )
        try:
            trees = TreeEnsemble.from_json(payload["trees"])
        except (KeyError, TypeError, ValueError) as error:
            raise JudgeConfigurationError(f"{source} has missing or malformed trees") from error
        if trees.feature.max(initial=-1) >= len(POOL_FEATURE_NAMES):
            raise JudgeConfigurationError(f"{source} splits on a feature it does not list")
        return cls(trees, dict(payload.get("fitted", {})))


def load_pool_model(path: str | os.PathLike[str] | None = None) -> tuple[PoolModel, str]:
    """The model at ``path`` (default: the packaged file) and the sha256 of its bytes."""
    payload, digest, source = read_model_file(path, MODEL_FILE, "pool-judge")
    return PoolModel.from_json(payload, source), digest


class PoolJudge(Judge):
    """Scores each round's candidates as evidence, from the pool and its context, offline.

    ``model_path`` replaces the packaged model. There is nothing to precompute: passages are
    analysed when first judged (cached in memory).
    """

    sends_data_off_machine = False
    scores_whole_request = True  # idf, graph walks and ranks are computed over the request

    def __init__(self, *, model_path: str | os.PathLike[str] | None = None) -> None:
        super().__init__()
        self.model, self.model_sha256 = load_pool_model(model_path)

    def __repr__(self) -> str:
        return f"PoolJudge(model={self.model_sha256[:12]!r})"

    @property
    def identity(self) -> str:
        """The judge and its model file's sha256: caches never mix models."""
        return f"pool:{self.model_sha256[:16]}"

    async def _score(self, request: JudgeRequest) -> list[float]:
        """Score off the event loop: text analysis and the graph are CPU work."""
        return await asyncio.to_thread(self.score_now, request)

    def score_now(self, request: JudgeRequest) -> list[float]:
        """Score a request synchronously (the work behind `score`, without usage counting)."""
        return self.model.probabilities(pool_features(request))
