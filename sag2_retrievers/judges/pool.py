"""The default offline judge: boosted trees over evidence features of the question, the
request's own best matches, and the shared retrieved context.

`PoolJudge` reads nothing but the request (`pool_features`): how a candidate covers the
question, how it links to the request's best BM25 matches, and what it adds to the context
the earlier rounds found (the terms still missing, the names that bridge to it). The
features are mapped to a yes-probability by gradient-boosted trees fitted on SAG2
trajectories over train-split questions (``benchmarks/fit_pool_judge.py``), then blended
with BM25's own evidence (`BM25_GUARD`). No model reads the corpus at ingest and no
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

import numpy as np

from ..errors import JudgeConfigurationError
from .base import Judge, JudgeRequest
from .model_files import check_header, read_model_file
from .pool_features import FEATURE_NAMES, Matrix, request_features
from .pool_terms import AnalysisCache
from .trees import TreeEnsemble, sigmoid

MODEL_FILE = "data/pool_judge.json"
MODEL_FORMAT = "sag2-pool-judge/2"
# Weight of BM25's own relative score in the final score (see PoolJudge); chosen on train data
# as the largest of 0, 0.1, 0.2 that costs held-out MuSiQue at most one point of R@10.
BM25_GUARD = 0.1


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
            "features": list(FEATURE_NAMES),
            "trees": self.trees.to_json(),
            "fitted": dict(self.fitted),
        }

    @classmethod
    def from_json(cls, payload: Mapping[str, Any], source: str) -> PoolModel:
        """Read a model file's content, refusing another format or another feature list."""
        check_header(payload, source, MODEL_FORMAT, FEATURE_NAMES, "benchmarks/fit_pool_judge.py")
        try:
            trees = TreeEnsemble.from_json(payload["trees"])
        except (KeyError, TypeError, ValueError) as error:
            raise JudgeConfigurationError(f"{source} has missing or malformed trees") from error
        if trees.feature.max(initial=-1) >= len(FEATURE_NAMES):
            raise JudgeConfigurationError(f"{source} splits on a feature it does not list")
        return cls(trees, dict(payload.get("fitted", {})))


def load_pool_model(path: str | os.PathLike[str] | None = None) -> tuple[PoolModel, str]:
    """The model at ``path`` (default: the packaged file) and the sha256 of its bytes."""
    payload, digest, source = read_model_file(path, MODEL_FILE, "pool-judge")
    return PoolModel.from_json(payload, source), digest


class PoolJudge(Judge):
    """Scores each round's candidates as evidence, from the question, the pool and the
    shared context, offline.

    ``model_path`` replaces the packaged model. ``bm25_guard`` (in [0, 1]) blends each
    probability with the candidate's BM25 score against the question, relative to the
    request's best: a strong BM25 hit keeps its place against expansion passages the trees
    support only weakly, and where the trees see no evidence at all BM25's order decides.
    There is nothing to precompute: passages are analysed when first judged, and the analyses
    are kept in memory up to `pool_terms.CACHE_BYTES` bytes.
    """

    sends_data_off_machine = False
    scores_whole_request = True  # idf, anchors and ranks are computed over the request

    def __init__(
        self,
        *,
        model_path: str | os.PathLike[str] | None = None,
        bm25_guard: float = BM25_GUARD,
    ) -> None:
        super().__init__()
        if not 0.0 <= bm25_guard <= 1.0:
            raise JudgeConfigurationError(f"bm25_guard must be in [0, 1], got {bm25_guard!r}")
        self.model, self.model_sha256 = load_pool_model(model_path)
        self.bm25_guard = float(bm25_guard)
        self.analyses = AnalysisCache()

    def __repr__(self) -> str:
        return f"PoolJudge(model={self.model_sha256[:12]!r}, bm25_guard={self.bm25_guard})"

    @property
    def identity(self) -> str:
        """The judge, its model file's sha256 and its guard: caches never mix them."""
        return f"pool:{self.model_sha256[:16]}:bm25-{self.bm25_guard:g}"

    async def _score(self, request: JudgeRequest) -> list[float]:
        """Score off the event loop: text analysis and the graph are CPU work."""
        return await asyncio.to_thread(self.score_now, request)

    def score_now(self, request: JudgeRequest) -> list[float]:
        """Score a request synchronously (the work behind `score`, without usage counting)."""
        features = request_features(request, self.analyses)
        probabilities = np.asarray(self.model.probabilities(features))
        prior = features[:, FEATURE_NAMES.index("bm25_to_best")]
        guarded = (1.0 - self.bm25_guard) * probabilities + self.bm25_guard * prior
        return [float(p) for p in np.clip(guarded, 0.0, 1.0)]
