"""The SAG2 rounds (ARCHITECTURE §4.3-§4.8), checked through the judge's requests."""

from __future__ import annotations

import asyncio
import gc
import random
import warnings
import zlib
from pathlib import Path

import pytest

from sag2_retrievers import (
    Document,
    InvalidInputError,
    JudgeError,
    RemoteJudgeRefusedError,
    SAG2Config,
    SAG2Engine,
    SQLiteIndex,
)
from sag2_retrievers.judges.base import Candidate, Judge, JudgeRequest
from sag2_retrievers.judges.fakes import OverlapJudge, ScriptedJudge

QUESTION = "Which harbour city hosted the lantern festival of the northern guild?"
VOCABULARY = [f"w{chr(97 + i // 26)}{chr(97 + i % 26)}" for i in range(260)]


def synthetic_documents(count: int = 700, seed: int = 7) -> list[Document]:
    """Documents mixing question words with a shared vocabulary, so every round is full."""
    rng = random.Random(seed)
    question_words = ["harbour", "city", "lantern", "festival", "northern", "guild"]
    documents = []
    for number in range(count):
        sentences = []
        for _ in range(3):
            words = rng.sample(VOCABULARY, 6) + rng.sample(question_words, rng.randint(0, 2))
            rng.shuffle(words)
            sentences.append(" ".join(words).capitalize() + ".")
        documents.append(Document(f"doc-{number}", " ".join(sentences), f"Entry {number}"))
    return documents


def hashed_score(_: JudgeRequest, candidate: Candidate) -> float:
    """A deterministic pseudo-random score per passage, spread over [0, 1], practically unique."""
    return zlib.crc32(candidate.text.encode()) / 2**32


@pytest.fixture(scope="module")
def big_index(tmp_path_factory: pytest.TempPathFactory) -> SQLiteIndex:
    index = SQLiteIndex(tmp_path_factory.mktemp("engine") / "big.db")
    index.add_documents(synthetic_documents(), parallel=False)
    return index


def texts_to_units(index: SQLiteIndex) -> dict[str, int]:
    units = index.units(range(1, index.unit_count() + 1))
    return {unit.body: unit.unit_id for unit in units.values()}


def run(engine: SAG2Engine, question: str = QUESTION, top_k: int = 10):  # type: ignore[no-untyped-def]
    return engine.retrieve(question, top_k)


def test_pool_sizes_and_judgments_stay_within_the_paper_bounds(big_index: SQLiteIndex) -> None:
    judge = ScriptedJudge(hashed_score)
    result = run(SAG2Engine(big_index, judge))
    sizes = [len(request.candidates) for request in judge.requests]
    assert len(sizes) == 3
    assert sizes[0] == 100
    assert 100 < sizes[1] <= 115
    assert 100 < sizes[2] <= 125
    assert result.judgments == sum(sizes) <= 340
    assert result.usage.judgments == result.judgments


def test_protected_units_and_seeds_are_in_every_expansion_pool(big_index: SQLiteIndex) -> None:
    judge = ScriptedJudge(hashed_score)
    result = run(SAG2Engine(big_index, judge))
    lookup = texts_to_units(big_index)
    protected = [hit.unit_id for hit in big_index.search(QUESTION, 5)]
    pools = [{lookup[c.text] for c in request.candidates} for request in judge.requests]
    seeds_1, seeds_2 = result.trace[1].seeds, result.trace[2].seeds
    assert set(protected) <= pools[1] and set(protected) <= pools[2]
    assert set(seeds_1) <= pools[1]
    assert set(seeds_1) | set(seeds_2) <= pools[2]


def test_seeds_are_the_best_ranked_unexpanded_units(big_index: SQLiteIndex) -> None:
    judge = ScriptedJudge(hashed_score)
    result = run(SAG2Engine(big_index, judge))
    lookup = texts_to_units(big_index)
    round0 = judge.requests[0]
    scores = {lookup[c.text]: hashed_score(round0, c) for c in round0.candidates}
    fusion = {u: 1 / (60 + r) for r, u in enumerate([lookup[c.text] for c in round0.candidates], 1)}
    expected = sorted(scores, key=lambda u: (-scores[u], -fusion[u], u))[:10]
    assert list(result.trace[1].seeds) == expected
    assert not set(result.trace[2].seeds) & set(result.trace[1].seeds)


def test_context_per_round(big_index: SQLiteIndex) -> None:
    judge = ScriptedJudge(hashed_score)
    result = run(SAG2Engine(big_index, judge))
    lookup = texts_to_units(big_index)
    first, second, final = judge.requests
    assert first.context == () and first.note is None

    context_1 = [lookup[p.text] for p in second.context]
    assert context_1 == [*result.trace[1].seeds, *result.trace[1].new_candidates[:10]]
    assert all(p.previous_score is None for p in second.context)

    round1_ranking = sorted(
        (lookup[c.text] for c in second.candidates),
        key=lambda u: (-hashed_score(second, _candidate(big_index, u)), u),
    )
    assert len(final.context) == 10
    assert final.note is not None and "reassess" in final.note.lower()
    assert all(p.previous_score is not None for p in final.context)
    assert {lookup[p.text] for p in final.context} == set(round1_ranking[:10])


def _candidate(index: SQLiteIndex, unit_id: int) -> Candidate:
    unit = index.units([unit_id])[unit_id]
    return Candidate(unit.title, unit.body)


def test_final_round_admits_at_most_twenty_unseen_units(big_index: SQLiteIndex) -> None:
    judge = ScriptedJudge(hashed_score)
    run(SAG2Engine(big_index, judge))
    earlier = {c.text for request in judge.requests[:2] for c in request.candidates}
    unseen = [c for c in judge.requests[2].candidates if c.text not in earlier]
    assert len(unseen) == 20


def test_units_judged_once_are_never_retrieved_again_as_new(big_index: SQLiteIndex) -> None:
    judge = ScriptedJudge(hashed_score)
    result = run(SAG2Engine(big_index, judge))
    round0 = set(result.trace[0].new_candidates)
    assert not round0 & set(result.trace[1].new_candidates)
    judged_before_2 = round0 | set(result.trace[1].new_candidates)
    assert not judged_before_2 & set(result.trace[2].new_candidates)


def test_hops_limit_the_number_of_rounds(big_index: SQLiteIndex) -> None:
    for hops in (0, 1, 2):
        judge = ScriptedJudge(hashed_score)
        result = run(SAG2Engine(big_index, judge, SAG2Config(hops=hops)))
        assert len(judge.requests) == hops + 1
        assert len(result.trace) == hops + 1


def test_hops_share_one_trajectory(big_index: SQLiteIndex) -> None:
    one = run(SAG2Engine(big_index, ScriptedJudge(hashed_score), SAG2Config(hops=1)))
    two = run(SAG2Engine(big_index, ScriptedJudge(hashed_score), SAG2Config(hops=2)))
    for short, long in zip(one.trace, two.trace[:2], strict=True):
        assert (short.seeds, short.terms, short.new_candidates, short.pool_size) == (
            long.seeds,
            long.terms,
            long.new_candidates,
            long.pool_size,
        )


def test_without_shared_context_no_round_sees_context(big_index: SQLiteIndex) -> None:
    judge = ScriptedJudge(hashed_score)
    run(SAG2Engine(big_index, judge, SAG2Config(shared_context=False)))
    assert all(r.context == () and r.note is None for r in judge.requests)


def test_one_shot_budget_judges_that_many_bm25_candidates_once(big_index: SQLiteIndex) -> None:
    judge = ScriptedJudge(hashed_score)
    result = run(SAG2Engine(big_index, judge, SAG2Config(one_shot_budget=240)))
    assert [len(r.candidates) for r in judge.requests] == [240]
    assert result.judgments == 240


def test_output_has_unique_sources_in_final_ranking_order(big_index: SQLiteIndex) -> None:
    result = run(SAG2Engine(big_index, ScriptedJudge(hashed_score)), top_k=50)
    doc_ids = [hit.doc_id for hit in result.hits]
    assert len(doc_ids) == len(set(doc_ids)) == 50
    assert [h.rank for h in result.hits] == sorted(h.rank for h in result.hits)


def test_dpp_keeps_the_first_result_and_the_top_ten_set(big_index: SQLiteIndex) -> None:
    plain = run(SAG2Engine(big_index, ScriptedJudge(hashed_score), SAG2Config(diversity_top=0)))
    diverse = run(SAG2Engine(big_index, ScriptedJudge(hashed_score)))
    assert diverse.units[0].unit_id == plain.units[0].unit_id
    assert {u.unit_id for u in diverse.units[:10]} == {u.unit_id for u in plain.units[:10]}
    assert [u.unit_id for u in diverse.units[10:]] == [u.unit_id for u in plain.units[10:]]


def test_final_ranking_breaks_score_ties_by_retrieval_rank_then_unit_id(
    big_index: SQLiteIndex,
) -> None:
    config = SAG2Config(hops=0, diversity_top=0)
    result = run(SAG2Engine(big_index, ScriptedJudge({}, default=0.5), config), top_k=100)
    lexical = [hit.unit_id for hit in big_index.search(QUESTION, 100)]
    assert [u.unit_id for u in result.units] == lexical


def test_sync_and_async_retrieval_agree(big_index: SQLiteIndex) -> None:
    engine = SAG2Engine(big_index, ScriptedJudge(hashed_score))
    sync = engine.retrieve(QUESTION, 20)
    result = asyncio.run(engine.aretrieve(QUESTION, 20))
    assert [h.unit_id for h in result.hits] == [h.unit_id for h in sync.hits]
    assert [h.score for h in result.hits] == [h.score for h in sync.hits]


def test_a_question_of_stopwords_stops_before_judging(big_index: SQLiteIndex) -> None:
    judge = ScriptedJudge(hashed_score)
    result = run(SAG2Engine(big_index, judge), question="what is the of and")
    assert result.hits == () and judge.requests == []
    assert result.stop_reason == "no query expression"


def test_a_question_matching_nothing_returns_nothing(big_index: SQLiteIndex) -> None:
    judge = ScriptedJudge(hashed_score)
    result = run(SAG2Engine(big_index, judge), question="zzzyx qqqwv")
    assert result.hits == () and judge.requests == []


def test_expansion_stops_when_no_new_candidate_exists(tmp_path: Path) -> None:
    index = SQLiteIndex(tmp_path / "tiny.db")
    index.add_documents(
        [
            Document("a", "Marie Curie studied radium in Paris."),
            Document("b", "Radium glows in the dark."),
        ]
    )
    judge = ScriptedJudge({}, default=0.7)
    result = SAG2Engine(index, judge).retrieve("Where did Marie Curie study radium?")
    assert len(judge.requests) == 1
    assert result.stop_reason.startswith("no new candidate")
    assert {hit.doc_id for hit in result.hits} == {"a", "b"}


def test_expansion_finds_a_bridge_passage_the_question_cannot_reach(tmp_path: Path) -> None:
    index = SQLiteIndex(tmp_path / "bridge.db")
    index.add_documents(
        [
            Document("1", "The Lantern Festival is hosted by Port Varna each winter.", "Lantern"),
            Document("2", "Port Varna lies in the province of Ostrel.", "Port Varna"),
            Document("3", "Festival season brings crowds of visitors.", "Crowds"),
        ]
    )
    question = "In what territory is the host of the Lantern Festival?"
    assert "2" not in {hit.doc_id for hit in index.search(question, 10)}
    result = SAG2Engine(index, OverlapJudge()).retrieve(question)
    found = {hit.doc_id: hit.round_found for hit in result.hits}
    assert found["2"] == 1
    assert "port varna" in [term for term, _ in result.trace[1].terms]


def test_filters_restrict_every_round(tmp_path: Path) -> None:
    index = SQLiteIndex(tmp_path / "filtered.db")
    docs = synthetic_documents(150, seed=3)
    index.add_documents(
        Document(d.id, d.text, d.title, {"shard": int(d.id.split("-")[1]) % 2}) for d in docs
    )
    result = SAG2Engine(index, ScriptedJudge(hashed_score)).retrieve(
        QUESTION, 100, filters={"shard": 1}
    )
    assert result.hits
    assert all(hit.metadata["shard"] == 1 for hit in result.hits)
    assert all(int(u.doc_id.split("-")[1]) % 2 == 1 for u in result.units)


class FailingJudge(Judge):
    """A judge whose service is down."""

    @property
    def identity(self) -> str:
        return "failing"

    async def _score(self, request: JudgeRequest) -> list[float]:
        raise JudgeError("service unavailable")


def test_judge_failure_raises_by_default(big_index: SQLiteIndex) -> None:
    with pytest.raises(JudgeError, match="service unavailable"):
        run(SAG2Engine(big_index, FailingJudge()))


def test_judge_failure_can_degrade_to_lexical_order(big_index: SQLiteIndex) -> None:
    engine = SAG2Engine(big_index, FailingJudge(), SAG2Config(on_judge_error="bm25"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = run(engine)
    assert result.degraded and caught
    lexical = [hit.doc_id for hit in big_index.search(QUESTION, 10)]
    assert [hit.doc_id for hit in result.hits] == lexical


class RemoteJudge(OverlapJudge):
    """A judge that declares it sends data off the machine."""

    sends_data_off_machine = True


def test_remote_judges_can_be_refused(
    big_index: SQLiteIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(RemoteJudgeRefusedError):
        SAG2Engine(big_index, RemoteJudge(), allow_remote_judges=False)
    monkeypatch.setenv("SAG2_ALLOW_REMOTE_JUDGES", "0")
    with pytest.raises(RemoteJudgeRefusedError):
        SAG2Engine(big_index, RemoteJudge())
    assert SAG2Engine(big_index, OverlapJudge()).judge.identity


@pytest.mark.parametrize("value", ["0", "false", " OFF "])
def test_allowing_remote_judges_by_argument_does_not_override_the_environment(
    big_index: SQLiteIndex, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("SAG2_ALLOW_REMOTE_JUDGES", value)
    with pytest.raises(RemoteJudgeRefusedError, match="off this machine"):
        SAG2Engine(big_index, RemoteJudge(), allow_remote_judges=True)


def test_remote_judges_are_accepted_unless_the_argument_or_environment_refuses(
    big_index: SQLiteIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SAG2_ALLOW_REMOTE_JUDGES", raising=False)
    for allow in (None, True):
        assert SAG2Engine(big_index, RemoteJudge(), allow_remote_judges=allow).judge.identity
    monkeypatch.setenv("SAG2_ALLOW_REMOTE_JUDGES", "1")
    assert SAG2Engine(big_index, RemoteJudge(), allow_remote_judges=True).judge.identity
    with pytest.raises(RemoteJudgeRefusedError):
        SAG2Engine(big_index, RemoteJudge(), allow_remote_judges=False)


def test_bad_requests_raise_input_errors(big_index: SQLiteIndex) -> None:
    engine = SAG2Engine(big_index, OverlapJudge())
    with pytest.raises(InvalidInputError):
        engine.retrieve(42)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        engine.retrieve(QUESTION, -1)


def test_top_k_zero_returns_nothing_without_judging(big_index: SQLiteIndex) -> None:
    judge = ScriptedJudge(hashed_score)
    result = SAG2Engine(big_index, judge).retrieve(QUESTION, 0)
    assert result.hits == () and result.units == () and judge.requests == []


def test_empty_index_returns_nothing(tmp_path: Path) -> None:
    index = SQLiteIndex(tmp_path / "empty.db")
    result = SAG2Engine(index, OverlapJudge()).retrieve(QUESTION)
    assert result.hits == () and result.judgments == 0


def test_concurrent_retrievals_sharing_a_judge_each_count_their_own_usage(
    big_index: SQLiteIndex,
) -> None:
    engine = SAG2Engine(big_index, ScriptedJudge(hashed_score))
    questions = [QUESTION, "lantern guild northern harbour", "festival city"]

    async def all_at_once():  # type: ignore[no-untyped-def]
        return await asyncio.gather(*(engine.aretrieve(q) for q in questions))

    results = asyncio.run(all_at_once())
    for result in results:
        assert result.usage.judgments == result.judgments
    assert sum(r.judgments for r in results) == engine.judge.usage.judgments


def test_expansion_stops_when_seeds_hold_only_question_words(tmp_path: Path) -> None:
    index = SQLiteIndex(tmp_path / "no-terms.db")
    index.add_documents(
        [Document("a", "Radium glows."), Document("b", "Radium glows radium."), Document("c", "x")]
    )
    judge = ScriptedJudge({}, default=0.5)
    result = SAG2Engine(index, judge).retrieve("Does radium glow? glows")
    assert len(judge.requests) == 1
    assert result.stop_reason == "no expansion term for round 1"


def test_the_final_pool_fills_with_tied_history_by_what_units_are_not_their_ids() -> None:
    """Earlier candidates tied on score enter the final pool in ranking order (document id),
    so which of them fit does not depend on the order the index's writes gave ids."""
    from sag2_retrievers.config import SAG2Config
    from sag2_retrievers.documents import Unit
    from sag2_retrievers.engine.state import Retrieval, final_plan

    def pool_documents(ids_by_doc: dict[str, int]) -> list[str]:
        retrieval = Retrieval("q", frozenset(), [], None)
        for doc, unit_id in ids_by_doc.items():
            retrieval.units[unit_id] = Unit(unit_id, doc, "", "", "text", 0, 4)
            retrieval.scores[unit_id] = 0.5
        retrieval.protected = [10, 11, 12]  # unscored: a union of 3, so the pool holds 2
        pool = final_plan(retrieval, [], SAG2Config(final_pool_size=2)).pool
        return [retrieval.units[u].doc_id for u in pool]

    assert pool_documents({"a": 1, "b": 2, "c": 3}) == ["a", "b"]
    assert pool_documents({"a": 3, "b": 2, "c": 1}) == ["a", "b"]


def test_closing_engine_then_index_closes_every_connection_without_garbage_collection(
    tmp_path: Path,
) -> None:
    """The engine joins its worker threads on close, so closing the index afterwards closes
    their connections at once and SQLite checkpoints the WAL into the file (before, the
    workers' connections stayed open until garbage collection)."""
    path = tmp_path / "i.sqlite"
    gc.disable()
    try:
        index = SQLiteIndex(path)
        index.add_documents([Document("a", "Gustave Eiffel was born in Dijon.", "Eiffel")])
        engine = SAG2Engine(index, OverlapJudge())
        assert engine.retrieve("Where was Eiffel born?").hits
        engine.close()
        index.close()
        wal = path.with_name(path.name + "-wal")
        assert not wal.exists() or wal.stat().st_size == 0
    finally:
        gc.enable()
