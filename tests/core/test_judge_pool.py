"""The pool judge: graph features on hand-made pools, its packaged trees, identity, a tiny fit."""

from __future__ import annotations

import asyncio
import json
import socket
import sys
from pathlib import Path

import numpy as np
import pytest

from sag2_retrievers import Document, SQLiteIndex
from sag2_retrievers.errors import JudgeConfigurationError
from sag2_retrievers.eval.datasets import EvalQuestion, Passage
from sag2_retrievers.judges.base import Candidate, ContextPassage, JudgeRequest
from sag2_retrievers.judges.factory import make_judge
from sag2_retrievers.judges.pool import PoolJudge, load_pool_model
from sag2_retrievers.judges.pool_features import POOL_FEATURE_NAMES, pool_features
from sag2_retrievers.judges.pool_graph import personalised_pagerank

QUESTION = "Which country was the composer of the Zorvanic Requiem born in?"
WORK = ContextPassage(
    "Zorvanic Requiem",
    "The Zorvanic Requiem is a choral work composed by Ilmar Kesteven in 1911.",
    previous_score=0.9,
)
COUNTRY = ContextPassage(
    "Estonia", "Estonia is a country in Northern Europe on the Baltic Sea.", previous_score=0.6
)
BRIDGE = Candidate(
    "Ilmar Kesteven",
    "Ilmar Kesteven was a composer and organist, born in Estonia in 1870.",
    round_found=1,
    question_bm25=2.0,
)
DISTRACTOR = Candidate(
    "Requiem (music)",
    "A requiem is a choral composition for the dead; many a composer wrote one.",
    round_found=1,
    question_bm25=3.0,
)
REQUEST = JudgeRequest(QUESTION, (DISTRACTOR, BRIDGE), (WORK, COUNTRY))
BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def column(name: str) -> int:
    """The position of a feature in POOL_FEATURE_NAMES."""
    return POOL_FEATURE_NAMES.index(name)


@pytest.mark.parametrize(
    "feature",
    ["ppr_context", "mentioned_by_anchor", "mentions_anchor", "anchor_link_second", "pair_gain"],
)
def test_a_bridge_between_two_context_passages_outranks_a_same_topic_distractor(
    feature: str,
) -> None:
    rows = pool_features(REQUEST)
    distractor, bridge = rows[:, column(feature)]
    assert bridge > distractor


def test_features_are_finite_without_context_or_engine_facts() -> None:
    request = JudgeRequest(QUESTION, (Candidate(BRIDGE.title, BRIDGE.text), DISTRACTOR))
    rows = pool_features(request)
    assert rows.shape == (2, len(POOL_FEATURE_NAMES))
    assert np.isfinite(rows).all()
    assert rows[:, column("ppr_context")].tolist() == pytest.approx(
        rows[:, column("ppr_question")].tolist(), abs=1.0
    )


def test_a_single_candidate_and_an_empty_question_are_scored() -> None:
    judge = PoolJudge()
    assert len(judge.score_now(JudgeRequest("the of", (BRIDGE,)))) == 1


def test_pagerank_sums_to_one_and_favours_the_restart() -> None:
    links = np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 1.0], [0.0, 1.0, 0.0]])
    visits = personalised_pagerank(links, np.array([1.0, 0.0, 0.0]))
    assert visits.sum() == pytest.approx(1.0)
    assert visits[0] > visits[2]
    isolated = personalised_pagerank(np.zeros((2, 2)), np.zeros(2))
    assert isolated.tolist() == pytest.approx([0.5, 0.5])


def test_scores_are_deterministic_probabilities() -> None:
    first, second = PoolJudge(), PoolJudge()
    scores = first.score_now(REQUEST)
    assert scores == second.score_now(REQUEST)
    assert all(0.0 <= s <= 1.0 for s in scores)


def test_the_packaged_model_loads_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the pool judge tried to open a socket")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    model, digest = load_pool_model()
    assert len(digest) == 64
    assert model.trees.feature.shape[0] > 0


def test_identity_changes_with_the_model_file(tmp_path: Path) -> None:
    model, _ = load_pool_model()
    payload = model.to_json()
    payload["trees"]["value"][0][0] += 0.25
    other = tmp_path / "other.json"
    other.write_text(json.dumps(payload))
    assert PoolJudge(model_path=other).identity != PoolJudge().identity
    assert PoolJudge().identity.startswith("pool:")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"format": "other/1"}, "format"),
        ({"features": ["question_cos"]}, "other features"),
        ({"trees": {"depth": 1}}, "malformed trees"),
    ],
)
def test_malformed_model_files_are_refused(tmp_path: Path, change: dict, message: str) -> None:
    model, _ = load_pool_model()
    path = tmp_path / "model.json"
    path.write_text(json.dumps({**model.to_json(), **change}))
    with pytest.raises(JudgeConfigurationError, match=message):
        PoolJudge(model_path=path)


def test_a_split_on_an_unknown_feature_is_refused(tmp_path: Path) -> None:
    model, _ = load_pool_model()
    payload = model.to_json()
    payload["trees"]["feature"][0][0] = len(POOL_FEATURE_NAMES)
    path = tmp_path / "model.json"
    path.write_text(json.dumps(payload))
    with pytest.raises(JudgeConfigurationError, match="does not list"):
        PoolJudge(model_path=path)


def test_the_default_local_judge_is_the_pool_judge_and_needs_no_precompute() -> None:
    judge = make_judge("local")
    assert isinstance(judge, PoolJudge)
    assert judge.precompute([Candidate(BRIDGE.title, BRIDGE.text)]) == 0
    assert judge.scores_whole_request


def test_training_on_a_tiny_fixture_fits_a_loadable_model(tmp_path: Path) -> None:
    pytest.importorskip("lightgbm")
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import fit_pool_judge as training
    finally:
        sys.path.remove(str(BENCHMARKS))
    passages = [
        Passage(WORK.title, WORK.text),
        Passage(COUNTRY.title, COUNTRY.text),
        Passage(BRIDGE.title, BRIDGE.text),
        Passage(DISTRACTOR.title, DISTRACTOR.text),
        *(
            Passage(f"Choir {n}", f"Choir {n} sang a requiem by a composer in {n}.")
            for n in range(30)
        ),
    ]
    gold = (f"{WORK.title}\n{WORK.text}", f"{BRIDGE.title}\n{BRIDGE.text}")
    question = EvalQuestion("q1", QUESTION, gold, 2, tuple(passages))
    index = SQLiteIndex(tmp_path / "tiny.sqlite")
    index.add_documents([Document(p.doc_id, p.text, p.title) for p in passages], parallel=False)
    train = training.TrainSet("tiny", [question], index)
    rows = training.rows_for(train, training.NoisyOracle({QUESTION: set(gold)}), 0)
    assert rows.labels.sum() >= 2
    model = training.fit(
        [rows], {"test": True}, parameters={**training.PARAMETERS, "min_data_in_leaf": 2}, rounds=5
    )
    path = tmp_path / "model.json"
    path.write_text(json.dumps(model.to_json()))
    judge = PoolJudge(model_path=path)
    scores = asyncio.run(judge.score(REQUEST))
    assert len(scores) == 2
    assert all(0.0 <= s <= 1.0 for s in scores)
    index.close()
