"""An offline judge: sentence-embedding similarity, calibrated into a yes-probability.

`LocalJudge` needs no network and no API key: it embeds the question and each candidate with
all-MiniLM-L6-v2 (int8 ONNX, on the CPU) and maps their cosine similarity to a probability
with a logistic curve fitted on MuSiQue training questions. It reads neither the instruction
nor the note: it judges topical closeness, a much weaker signal than an LLM judge's reading.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np
from tqdm import tqdm

from ..errors import InvalidInputError
from ._embeddings import MODEL_NAME, MiniLMEncoder, Vectors, cached_encoder
from .base import Candidate, Judge, JudgeRequest

Variant = Literal["question", "question+context"]
PRECOMPUTE_BATCH = 256  # passages per cache round trip when embedding ahead of questions


@dataclass(frozen=True)
class Calibration:
    """A logistic map from similarity s to probability: p = sigmoid(slope * s + intercept)."""

    slope: float
    intercept: float

    def probabilities(self, similarities: Vectors) -> list[float]:
        """The yes-probability of each similarity (tanh form: no overflow at extreme logits)."""
        logits = self.slope * similarities.astype(np.float64) + self.intercept
        return [float(p) for p in np.clip(0.5 + 0.5 * np.tanh(0.5 * logits), 0.0, 1.0)]


# Fitted by `python benchmarks/local_judge_variants.py fit`: logistic regression of
# is_supporting on the similarity over every judgment (~30,000, ~600 supporting) that SAG2
# (H=2) asks of each variant on the 100 MuSiQue train-fixture questions
# (hipporag_musique_train_fixture*.json); the dev questions used for evaluation never are.
CALIBRATIONS: dict[Variant, Calibration] = {
    "question": Calibration(slope=14.35, intercept=-8.03),
    "question+context": Calibration(slope=12.65, intercept=-7.67),
}

# Weight of the shared context in the context-augmented query: the best of 0.1, 0.25, 0.5 and
# 1.0 by SAG2 R@10 on the train fixture. On the dev subset the context variant did not beat
# the question-only one (R@10 68.0 vs 69.6 at H=2), which is why "question" is the default.
CONTEXT_WEIGHT = 0.25


class LocalJudge(Judge):
    """Scores candidates by calibrated embedding similarity to the question, on this machine.

    Variants: ``"question"`` uses cos(question, passage) alone; ``"question+context"`` also
    lets the shared context pull the query towards the passages already found, see
    `context_query`. Passage embeddings are cached in memory and, given ``cache_path``, in the
    SQLite table ``embedding_cache`` (it may be the index file), so each passage is encoded
    once per model. Pass ``encoder`` to share one loaded model between judges.
    """

    sends_data_off_machine = False

    def __init__(
        self,
        variant: Variant = "question",
        *,
        cache_path: str | os.PathLike[str] | None = None,
        threads: int = 2,
        memory_cache_size: int = 20_000,
        encoder: MiniLMEncoder | None = None,
    ) -> None:
        super().__init__()
        if variant not in get_args(Variant):
            raise InvalidInputError(
                f"unknown local judge variant {variant!r}; choose one of {get_args(Variant)}"
            )
        self.variant: Variant = variant
        self._embedder = cached_encoder(encoder, cache_path, threads, memory_cache_size)

    def __repr__(self) -> str:
        return f"LocalJudge(variant={self.variant!r}, embedder={self._embedder!r})"

    @property
    def identity(self) -> str:
        """The judge, its model and its variant, e.g. ``"local:all-MiniLM-L6-v2-int8:question"``."""
        return f"local:{MODEL_NAME}:{self.variant}"

    async def _score(self, request: JudgeRequest) -> list[float]:
        """Embed and score off the event loop, since encoding is CPU-bound."""
        return await asyncio.to_thread(self.score_now, request)

    def score_now(self, request: JudgeRequest) -> list[float]:
        """Score a request synchronously (the work behind `score`, without usage counting)."""
        return CALIBRATIONS[self.variant].probabilities(self.similarities(request))

    def similarities(self, request: JudgeRequest) -> Vectors:
        """The variant's similarity of each candidate, before calibration."""
        candidates = [passage_text(c.title, c.text) for c in request.candidates]
        use_context = self.variant == "question+context" and bool(request.context)
        context = [passage_text(c.title, c.text) for c in request.context] if use_context else []
        vectors = self._embedder.embed([request.question, *candidates, *context])
        question = vectors[0]
        passages = vectors[1 : 1 + len(candidates)]
        if use_context:
            context_vectors = vectors[1 + len(candidates) :]
            weights = context_weights(request, context_vectors @ question)
            question = context_query(question, context_vectors, weights)
        similarities: Vectors = passages @ question
        return similarities

    def precompute(self, candidates: Sequence[Candidate], *, progress: bool = False) -> int:
        """Embed passages into the cache ahead of questions (e.g. after an ingest); returns
        how many passages were prepared.

        Without it each passage is encoded the first time it is judged, which makes the first
        questions over a new corpus slow (the model encodes a few dozen passages a second).
        ``progress`` shows a bar on stderr when it is a terminal.
        """
        texts = [passage_text(c.title, c.text) for c in candidates]
        # disable=None lets tqdm hide the bar when stderr is not a terminal.
        hidden = True if not progress else None
        bar = tqdm(total=len(texts), desc="embedding passages", unit="passage", disable=hidden)
        with bar:
            for start in range(0, len(texts), PRECOMPUTE_BATCH):
                batch = texts[start : start + PRECOMPUTE_BATCH]
                self._embedder.embed(batch)
                bar.update(len(batch))
        return len(texts)

    def close(self) -> None:
        """Close the embedding cache's SQLite connection."""
        self._embedder.cache.close()

    async def aclose(self) -> None:
        """Release the cache; the model itself holds no external resource."""
        self.close()


def passage_text(title: str, text: str) -> str:
    """What is embedded for a passage: its title, a full stop, then its text."""
    return f"{title}. {text}" if title else text


def context_query(question: Vectors, context: Vectors, weights: Vectors) -> Vectors:
    """The question vector moved towards the weighted mean of the context vectors, unit length.

    q' = normalise(q + CONTEXT_WEIGHT * sum(w_j c_j) / sum(w_j)). A second-hop passage shares
    little with the question but much with the passage that names its entity, so the mix lets
    it rise; weights keep low-scored context from pulling the query.
    """
    total = float(weights.sum())
    if total <= 0.0:
        return question
    mixed = question + CONTEXT_WEIGHT * (weights @ context) / total
    return (mixed / max(float(np.linalg.norm(mixed)), 1e-12)).astype(np.float32)


def context_weights(request: JudgeRequest, similarities: Vectors) -> Vectors:
    """Each context passage's weight: its previous score, else its question-only probability.

    Round 1's context mixes judged seeds with unjudged new candidates; weighing the latter by
    their own closeness to the question keeps unrelated ones from pulling the query.
    """
    own = CALIBRATIONS["question"].probabilities(similarities)
    return np.array(
        [
            own[position] if passage.previous_score is None else passage.previous_score
            for position, passage in enumerate(request.context)
        ],
        dtype=np.float32,
    )
