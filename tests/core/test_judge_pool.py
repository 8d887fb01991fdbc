"""The pool judge: features on hand-made requests, context that counts, bounded memory, the
BM25 guard, its packaged trees, identity, and a tiny fit."""

from __future__ import annotations

import asyncio
import json
import socket
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from sag2_retrievers import Document, SQLiteIndex
from sag2_retrievers.errors import InvalidInputError, JudgeConfigurationError
from sag2_retrievers.eval.datasets import EvalQuestion, Passage
from sag2_retrievers.judges.base import Candidate, ContextPassage, JudgeRequest
from sag2_retrievers.judges.factory import make_judge
from sag2_retrievers.judges.offline.pool import PoolJudge, guard_bm25_top, load_pool_model
from sag2_retrievers.judges.offline.pool_features import (
    FEATURE_NAMES,
    LINK_FEATURES,
    request_features,
)
from sag2_retrievers.judges.offline.pool_terms import MAX_QUESTION_TERMS, AnalysisCache

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
BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks" / "quality"


def column(name: str) -> int:
    """The position of a feature in FEATURE_NAMES."""
    return FEATURE_NAMES.index(name)


def features(request: JudgeRequest) -> np.ndarray:
    """The request's feature rows, with a fresh analysis cache."""
    return request_features(request, AnalysisCache())


@pytest.mark.parametrize(
    "feature",
    ["context_named_by", "context_chain_coverage", "context_shared_names", "novel_coverage"],
)
def test_a_bridge_named_by_the_context_outranks_a_same_topic_distractor(feature: str) -> None:
    distractor, bridge = features(REQUEST)[:, column(feature)]
    assert bridge > distractor


def test_context_columns_are_zero_without_context_and_read_it_with_context() -> None:
    alone = features(JudgeRequest(QUESTION, REQUEST.candidates))
    quoted = features(REQUEST)
    context = [column(name) for name in FEATURE_NAMES if name.startswith("context_")]
    assert not alone[:, context].any()
    assert quoted[:, context].any()
    # The context changes the request's idf, not what the candidate is.
    fixed = [column(n) for n in ("bm25_rank", "bm25_to_best", "round_found", "log_length")]
    assert alone[:, fixed].tolist() == quoted[:, fixed].tolist()


def test_a_context_passage_counts_with_its_previous_score() -> None:
    strong = features(REQUEST)[1, column("context_named_by")]
    weak_work = ContextPassage(WORK.title, WORK.text, previous_score=0.2)
    weak = features(JudgeRequest(QUESTION, REQUEST.candidates, (weak_work, COUNTRY)))
    assert strong > 0
    assert weak[1, column("context_named_by")] == pytest.approx(strong * 0.2 / 0.9)


def test_the_candidates_own_previous_score_does_not_link_it() -> None:
    scored = Candidate(BRIDGE.title, BRIDGE.text, 1, 2.0, previous_score=0.8)
    links = [column(f"context_{name}") for name in LINK_FEATURES]

    def quoted_at(score: float) -> np.ndarray:
        quoted = ContextPassage(BRIDGE.title, BRIDGE.text, previous_score=score)
        return features(JudgeRequest(QUESTION, (scored, DISTRACTOR), (WORK, quoted)))

    high, low = quoted_at(0.9), quoted_at(0.1)
    # A candidate is never its own bridge: its quoted copy is masked out of the pair columns,
    # so its own last score cannot raise it.
    assert high[0, links].tolist() == low[0, links].tolist()
    assert high[0, column("context_cosine")] < 0.99


def test_features_are_finite_without_context_or_engine_facts() -> None:
    request = JudgeRequest(QUESTION, (Candidate(BRIDGE.title, BRIDGE.text), DISTRACTOR))
    rows = features(request)
    assert rows.shape == (2, len(FEATURE_NAMES))
    assert np.isfinite(rows).all()
    assert rows[0, column("round_found")] == -1.0


def test_a_single_candidate_and_an_empty_question_are_scored() -> None:
    judge = PoolJudge()
    assert len(judge.score_now(JudgeRequest("the of", (BRIDGE,)))) == 1


def test_a_hostile_question_is_read_only_up_to_its_term_bound() -> None:
    words = " ".join(f"w{n}x" for n in range(12_000))
    _, terms = AnalysisCache().request_terms([], words)
    assert len(terms.tokens) == len(terms.ids) == MAX_QUESTION_TERMS
    rows = features(JudgeRequest(words, (BRIDGE, DISTRACTOR), (WORK,)))
    assert np.isfinite(rows).all()


def test_the_analysis_cache_is_bounded_by_bytes_and_never_holds_questions() -> None:
    cache = AnalysisCache(limit=200_000)
    for n in range(40):
        cache.request_terms([(f"Title {n}", f"Passage {n} " + "word " * 2_000)], QUESTION)
    assert cache.bytes <= 200_000
    assert 0 < len(cache) < 40
    assert ("Title 39", "Passage 39 " + "word " * 2_000) in cache
    assert ("Title 0", "Passage 0 " + "word " * 2_000) not in cache
    judge = PoolJudge()
    judge.score_now(REQUEST)
    assert len(judge.analyses) == 4  # two candidates, two context passages, no question
    assert ("", QUESTION) not in judge.analyses


def test_a_full_vocabulary_starts_afresh_between_requests() -> None:
    cache = AnalysisCache(vocabulary_limit=50)
    first = features(REQUEST)
    for n in range(5):
        cache.request_terms([(f"T{n}", " ".join(f"w{n}q{k}" for k in range(30)))], QUESTION)
    assert len(cache) < 5
    assert request_features(REQUEST, cache).tolist() == first.tolist()


def test_a_full_name_vocabulary_starts_afresh_between_requests() -> None:
    cache = AnalysisCache(vocabulary_limit=5_000)  # the names alone hold 56 x 111 bytes
    first = features(REQUEST)
    words = ("Amber", "Birch", "Cedar", "Delta", "Ember", "Fjord", "Grove", "Heath")
    pairs = [f"{a} {b}" for a in words for b in words if a != b]  # 56 names of 8 tokens
    cache.request_terms([("Names", " and ".join(pairs))], QUESTION)
    assert len(cache) == 1
    cache.request_terms([("More", "few words")], QUESTION)
    assert len(cache) == 1  # the name vocabulary was over its bound: cache and ids reset
    assert request_features(REQUEST, cache).tolist() == first.tolist()


def test_long_names_count_against_the_vocabularies_bytes() -> None:
    cache = AnalysisCache(limit=100_000, vocabulary_limit=400_000)
    tracemalloc.start()
    try:
        for n in range(1_500):
            title = " ".join(f"Name{n}x{k}" for k in range(150))  # one 1,500-character name
            cache.request_terms([(title, "A short text.")], QUESTION)
            # checked when a request starts: over by at most one request's 150 tokens and name
            assert cache.vocabulary_bytes <= 400_000 + 150 * 110 + len(title) + 100
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert held < 3_000_000  # counted by entries alone, 1,500 such names held about 9 MB


def test_a_name_the_question_holds_links_no_passages() -> None:
    sea = "Both works were written on the Baltic Sea coast."
    work = ContextPassage("Zorvanic Requiem", f"A requiem. {sea}", previous_score=1.0)
    candidate = Candidate("Ilmar Kesteven", f"A composer. {sea}", round_found=1)

    def shared(question: str) -> float:
        rows = features(JudgeRequest(question, (candidate, DISTRACTOR), (work,)))
        return float(rows[0, column("context_shared_names")])

    assert shared(QUESTION) > 0
    assert shared(QUESTION + " Near the Baltic Sea?") == 0


def guard_rows(rows: list[dict[str, float]]) -> np.ndarray:
    """Feature rows with only the columns the guard reads set."""
    matrix = np.zeros((len(rows), len(FEATURE_NAMES)))
    for i, row in enumerate(rows):
        for name, value in row.items():
            matrix[i, column(name)] = value
    return matrix


def bm25_rows(bm25: list[float]) -> np.ndarray:
    """Feature rows whose BM25 columns follow ``bm25`` (scores against the question)."""
    order = sorted(range(len(bm25)), key=lambda i: -bm25[i])
    rank = {i: 1.0 / np.log2(2 + r) for r, i in enumerate(order)}
    return guard_rows(
        [{"bm25_rank": rank[i], "bm25_to_best": b / max(bm25)} for i, b in enumerate(bm25)]
    )


def test_bm25_top_hits_stay_above_weaker_matches_the_trees_do_not_call_evidence() -> None:
    rows = bm25_rows([9.0, 8.0, 1.0, 0.5])
    guarded = guard_bm25_top(np.array([0.05, 0.02, 0.3, 0.1]), rows)
    assert guarded[0] > guarded[2] and guarded[1] > guarded[2]
    assert guarded[0] > guarded[1]  # BM25's own order between the two
    assert guarded[2:].tolist() == [0.3, 0.1]


def test_a_candidate_the_trees_call_evidence_keeps_its_place() -> None:
    rows = bm25_rows([9.0, 8.0, 1.0])
    scores = np.array([0.05, 0.02, 0.8])
    guarded = guard_bm25_top(scores, rows)
    assert guarded[2] == 0.8 > guarded[0]
    assert guarded.max() == 0.8


def test_the_guard_never_lifts_past_yes_nor_lowers_a_score() -> None:
    rows = bm25_rows([9.0, 1.0])
    guarded = guard_bm25_top(np.array([0.01, 0.49999999]), rows)
    assert guarded[0] <= 0.5
    assert guard_bm25_top(np.array([0.9, 0.2]), rows).tolist() == [0.9, 0.2]


def test_the_sixth_bm25_candidate_is_not_guarded() -> None:
    rows = bm25_rows([9.0, 8.0, 7.0, 6.0, 5.0, 4.0, 1.0])
    guarded = guard_bm25_top(np.array([0.4, 0.4, 0.4, 0.4, 0.4, 0.01, 0.3]), rows)
    assert guarded[5] == 0.01
    assert guarded[4] > 0.3


def test_the_guard_is_part_of_the_identity() -> None:
    assert PoolJudge(guard=False).identity != PoolJudge().identity
    assert "guard=False" in repr(PoolJudge(guard=False))


def test_feature_memory_grows_linearly_with_the_pool() -> None:
    def request(size: int) -> JudgeRequest:
        pool = tuple(
            Candidate(f"Choir {n}", f"Choir {n} sang the Zorvanic Requiem in town {n}.", 0, 1.0)
            for n in range(size)
        )
        return JudgeRequest(QUESTION, pool, (WORK, COUNTRY))

    def peak(size: int) -> int:
        cache = AnalysisCache()
        cache.request_terms([(c.title, c.text) for c in request(size).candidates], QUESTION)
        tracemalloc.start()
        rows = request_features(request(size), cache)
        used = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert rows.shape == (size, len(FEATURE_NAMES)) and np.isfinite(rows).all()
        return used

    assert peak(800) < 16 * peak(100)  # linear is 8x; a pool x pool array would be 64x


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
    payload["trees"]["feature"][0][0] = len(FEATURE_NAMES)
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
    rows = training.teacher_rows(train, "oracle", tmp_path)
    assert rows.labels.sum() >= 2
    parameters = {**training.PARAMETERS, "min_data_in_leaf": 2}
    model = training.fit([train], tmp_path, {"test": True}, parameters=parameters, rounds=5)
    path = tmp_path / "model.json"
    path.write_text(json.dumps(model.to_json()))
    judge = PoolJudge(model_path=path)
    scores = asyncio.run(judge.score(REQUEST))
    assert len(scores) == 2
    assert all(0.0 <= s <= 1.0 for s in scores)
    index.close()


@pytest.mark.parametrize("value", [float("inf"), float("nan")])
def test_a_score_that_is_not_a_finite_number_is_refused_by_name(value: float) -> None:
    """A direct caller's non-finite BM25 or previous score is an input error naming it, not
    an error from deep inside the trees."""
    judge = PoolJudge()
    bad_bm25 = JudgeRequest(QUESTION, (Candidate("a", "text", 0, value), BRIDGE))
    with pytest.raises(InvalidInputError, match="candidate 0: question_bm25"):
        judge.score_now(bad_bm25)
    bad_context = JudgeRequest(QUESTION, (BRIDGE,), (ContextPassage("w", "text", value),))
    with pytest.raises(InvalidInputError, match="context passage 0: previous_score"):
        judge.score_now(bad_context)
