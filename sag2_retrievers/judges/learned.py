"""An offline evidence judge: a logistic model over contextual evidence features.

`LearnedJudge` needs no network and no API key. For each candidate it computes the features of
`_evidence_features` (embedding and lexical closeness to the question and to the shared context
weighted by the context's scores, shared rare names, titles named across passages, what of the
question the candidate adds to the context, BM25 rank, the round that found it, its previous
score) and maps them to a yes-probability with a logistic model fitted on SAG2's own judgments
on the train fixtures (``benchmarks/fit_learned_judge.py``). The fitted parameters ship in
``sag2_retrievers/data/learned_judge.json``; their sha256 is part of the judge's identity.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from ..errors import JudgeConfigurationError
from ._embeddings import MODEL_NAME, CachedEncoder, MiniLMEncoder, cached_encoder
from .base import Candidate, Judge, JudgeRequest
from .offline._evidence_features import FEATURE_NAMES, Matrix, passage_terms, request_features
from .offline.model_files import check_header, read_model_file

MODEL_FILE = "data/learned_judge.json"
MODEL_FORMAT = "sag2-learned-judge/1"
PRECOMPUTE_BATCH = 256


@dataclass(frozen=True)
class LearnedModel:
    """Standardised logistic regression: p = sigmoid(((x - mean) / scale) . weights + bias)."""

    weights: tuple[float, ...]
    bias: float
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    fitted: Mapping[str, Any] = field(default_factory=dict)

    def probabilities(self, features: Matrix) -> list[float]:
        """The yes-probability of each feature row (tanh form: no overflow at extreme logits)."""
        standard = (features - np.asarray(self.mean)) / np.asarray(self.scale)
        logits = standard @ np.asarray(self.weights) + self.bias
        return [float(p) for p in np.clip(0.5 + 0.5 * np.tanh(0.5 * logits), 0.0, 1.0)]

    def to_json(self) -> dict[str, Any]:
        """The model file's content: format, feature names, parameters and how it was fitted."""
        return {
            "format": MODEL_FORMAT,
            "features": list(FEATURE_NAMES),
            "weights": list(self.weights),
            "bias": self.bias,
            "mean": list(self.mean),
            "scale": list(self.scale),
            "fitted": dict(self.fitted),
        }

    @classmethod
    def from_json(cls, payload: Mapping[str, Any], source: str) -> LearnedModel:
        """Read a model file's content, refusing another format or another feature list."""
        check_header(
            payload, source, MODEL_FORMAT, FEATURE_NAMES, "benchmarks/fit_learned_judge.py"
        )
        try:
            vectors = [tuple(float(v) for v in payload[k]) for k in ("weights", "mean", "scale")]
            bias = float(payload["bias"])
        except (KeyError, TypeError, ValueError) as error:
            raise JudgeConfigurationError(
                f"{source} has missing or malformed parameters"
            ) from error
        if any(len(v) != len(FEATURE_NAMES) for v in vectors) or min(vectors[2]) <= 0:
            raise JudgeConfigurationError(f"{source} has parameters of the wrong size or scale")
        return cls(vectors[0], bias, vectors[1], vectors[2], dict(payload.get("fitted", {})))


def load_model(path: str | os.PathLike[str] | None = None) -> tuple[LearnedModel, str]:
    """The model at ``path`` (default: the packaged file) and the sha256 of its bytes."""
    payload, digest, source = read_model_file(path, MODEL_FILE, "learned-judge")
    return LearnedModel.from_json(payload, source), digest


class LearnedJudge(Judge):
    """Scores candidates as evidence in context with a small learned model, on this machine.

    Passage embeddings are cached in memory and, given ``cache_path``, in the SQLite table
    ``embedding_cache`` (it may be the index file); `precompute` fills that cache ahead of
    questions. ``model_path`` replaces the packaged model; ``encoder`` shares a loaded MiniLM.
    """

    sends_data_off_machine = False
    scores_whole_request = True  # idf, z-scores and ranks are computed over the request

    def __init__(
        self,
        *,
        model_path: str | os.PathLike[str] | None = None,
        cache_path: str | os.PathLike[str] | None = None,
        threads: int = 2,
        memory_cache_size: int = 20_000,
        encoder: MiniLMEncoder | None = None,
    ) -> None:
        super().__init__()
        self.model, self.model_sha256 = load_model(model_path)
        self._embedder = cached_encoder(encoder, cache_path, threads, memory_cache_size)

    def __repr__(self) -> str:
        return f"LearnedJudge(model={self.model_sha256[:12]!r}, embedder={self._embedder!r})"

    @property
    def identity(self) -> str:
        """The judge, its encoder and its model file's sha256: caches never mix models."""
        return f"learned:{MODEL_NAME}:{self.model_sha256[:16]}"

    async def _score(self, request: JudgeRequest) -> list[float]:
        """Embed and score off the event loop, since encoding is CPU-bound."""
        return await asyncio.to_thread(self.score_now, request)

    def score_now(self, request: JudgeRequest) -> list[float]:
        """Score a request synchronously (the work behind `score`, without usage counting)."""
        return self.model.probabilities(self.features(request))

    def features(self, request: JudgeRequest) -> Matrix:
        """The evidence feature matrix of a request, one row per candidate."""
        return evidence_features(self._embedder, request)

    def precompute(self, candidates: Sequence[Candidate], *, progress: bool = False) -> int:
        """Prepare passage-side work (e.g. embeddings) ahead of questions; returns how many passages were prepared."""  # noqa: E501
        texts = [passage_text(c.title, c.text) for c in candidates]
        batches = range(0, len(texts), PRECOMPUTE_BATCH)
        if progress:
            from tqdm import tqdm

            # disable=None: no bar when stderr is not a terminal (a log, a CI job).
            batches = tqdm(batches, desc="embedding passages", unit="batch", disable=None)
        for start in batches:
            self._embedder.embed(texts[start : start + PRECOMPUTE_BATCH])
        for candidate in candidates:
            passage_terms(candidate.title, candidate.text)
        return len(texts)

    def close(self) -> None:
        """Close the embedding cache's SQLite connection."""
        self._embedder.cache.close()

    async def aclose(self) -> None:
        """Release the cache; the model itself holds no external resource."""
        self.close()


def evidence_features(embedder: CachedEncoder, request: JudgeRequest) -> Matrix:
    """A request's feature matrix: cosines from ``embedder``, then `request_features`."""
    candidates = [passage_text(c.title, c.text) for c in request.candidates]
    context = [passage_text(c.title, c.text) for c in request.context]
    vectors = embedder.embed([request.question, *candidates, *context]).astype(np.float64)
    passages = vectors[1 : 1 + len(candidates)]
    context_cos: npt.NDArray[np.float64] = passages @ vectors[1 + len(candidates) :].T
    return request_features(request, passages @ vectors[0], context_cos)


def passage_text(title: str, text: str) -> str:
    """What is embedded for a passage: its title, a full stop, then its text (as LocalJudge)."""
    return f"{title}. {text}" if title else text


def fit_model(
    features: Matrix,
    labels: npt.NDArray[np.float64],
    *,
    l2: float = 1.0,
    fitted: Mapping[str, Any] | None = None,
) -> LearnedModel:
    """Maximum-likelihood L2-regularised logistic regression on standardised features (Newton).

    ``l2`` is the penalty on the standardised weights (not on the bias); constant features get
    scale 1 and weight 0 in effect.
    """
    mean = features.mean(axis=0)
    scale = features.std(axis=0)
    scale[scale < 1e-9] = 1.0
    x = np.hstack([(features - mean) / scale, np.ones((len(features), 1))])
    penalty = np.full(x.shape[1], l2)
    penalty[-1] = 0.0
    w = np.zeros(x.shape[1])
    for _ in range(100):
        p = 0.5 + 0.5 * np.tanh(0.5 * (x @ w))
        gradient = x.T @ (p - labels) + penalty * w
        hessian = (x.T * (p * (1.0 - p))) @ x + np.diag(penalty + 1e-9)
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return LearnedModel(
        tuple(float(v) for v in w[:-1]),
        float(w[-1]),
        tuple(float(v) for v in mean),
        tuple(float(v) for v in scale),
        dict(fitted or {}),
    )
