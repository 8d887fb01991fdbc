"""The default offline judge: boosted trees over evidence features of the question, the
request's own best matches, and the shared retrieved context.

`PoolJudge` reads nothing but the request (`pool_features`): how a candidate covers the
question, how it links to the request's best BM25 matches, and what it adds to the context
the earlier rounds found (the terms still missing, the names that bridge to it). The
features are mapped to a yes-probability by gradient-boosted trees fitted on SAG2
trajectories over train-split questions (``benchmarks/quality/fit_pool_judge.py``); below the
judge's yes, BM25's first candidates keep their place. No model reads the corpus at
ingest and no embedding is computed, so an index is ready as soon as it is written. The
trees ship in ``sag2_retrievers/judges/offline/pool_judge.json`` and run in numpy; the file's sha256
is part of the judge's identity, so caches never mix two models.
"""

from __future__ import annotations

import asyncio
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import JudgeConfigurationError
from ..base import Judge, JudgeRequest
from .model_files import check_header, read_model_file
from .pool_features import FEATURE_NAMES, Matrix, Vector, request_features
from .pool_terms import AnalysisCache
from .trees import TreeEnsemble, sigmoid

MODEL_FILE = "judges/offline/pool_judge.json"
MODEL_FORMAT = "sag2-pool-judge/3"
BM25_TOP = 5  # the method's protected p: BM25's first, kept above weaker non-evidence
YES = 0.5  # a probability from which the trees call a candidate evidence


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
        check_header(
            payload, source, MODEL_FORMAT, FEATURE_NAMES, "benchmarks/quality/fit_pool_judge.py"
        )
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


def guard_bm25_top(probabilities: Vector, features: Matrix) -> Vector:
    """Below the judge's yes, keep BM25's first `BM25_TOP` candidates above weaker matches.

    A candidate the trees do not call evidence (probability under `YES`) and that matches the
    question less well by BM25 may not outrank one of BM25's first `BM25_TOP`: that hit's
    score is raised, if needed, to just above the best such candidate (never past `YES`).
    Candidates the trees call evidence keep their place, so a second hop the context supports
    still outranks the lexical matches; where the trees see no evidence, BM25's order stands.
    """
    bm25 = features[:, FEATURE_NAMES.index("bm25_to_best")]
    top = features[:, FEATURE_NAMES.index("bm25_rank")] >= 1.0 / math.log2(1 + BM25_TOP) - 1e-12
    guarded: Vector = np.array(probabilities, dtype=np.float64)
    hits = np.flatnonzero(top & (bm25 > 0))
    for hit in hits[np.argsort(bm25[hits], kind="stable")]:  # the weakest hit first
        weaker = (guarded < YES) & (bm25 < bm25[hit])
        if weaker.any():
            floor = min(YES, float(guarded[weaker].max()) + 1e-6)
            guarded[hit] = max(guarded[hit], floor)
    return guarded


class PoolJudge(Judge):
    """Scores each round's candidates as evidence, from the question, the pool and the
    shared context, offline.

    ``model_path`` replaces the packaged model. With ``guard`` (the default), BM25's first
    candidates keep their place above weaker matches the trees do not call evidence
    (`guard_bm25_top`). There is nothing to precompute: passages are analysed when
    first judged, and the analyses are kept in memory up to `pool_terms.CACHE_BYTES` bytes
    (their token and name vocabularies up to `pool_terms.VOCABULARY_BYTES` more).
    """

    sends_data_off_machine = False
    scores_whole_request = True  # idf, anchors and ranks are computed over the request

    def __init__(
        self,
        *,
        model_path: str | os.PathLike[str] | None = None,
        guard: bool = True,
    ) -> None:
        super().__init__()
        self.model, self.model_sha256 = load_pool_model(model_path)
        self.guard = guard
        self.analyses = AnalysisCache()

    def __repr__(self) -> str:
        return f"PoolJudge(model={self.model_sha256[:12]!r}, guard={self.guard})"

    @property
    def identity(self) -> str:
        """The judge, its model file's sha256 and its guard: caches never mix them."""
        return f"pool:{self.model_sha256[:16]}" + ("" if self.guard else ":unguarded")

    async def _score(self, request: JudgeRequest) -> list[float]:
        """Score off the event loop: text analysis and the graph are CPU work."""
        return await asyncio.to_thread(self.score_now, request)

    def score_now(self, request: JudgeRequest) -> list[float]:
        """Score a request synchronously (the work behind `score`, without usage counting)."""
        features = request_features(request, self.analyses)
        scores = np.asarray(self.model.probabilities(features), dtype=np.float64)
        if self.guard:
            scores = guard_bm25_top(scores, features)
        return [float(s) for s in scores]
