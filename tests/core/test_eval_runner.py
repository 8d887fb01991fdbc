"""The evaluation loop on a tiny two-question corpus: metrics, judgments, budgets, comparison."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from sag2_retrievers import Document, SAG2Config, SQLiteIndex
from sag2_retrievers.errors import InvalidInputError
from sag2_retrievers.eval import EvalQuestion, Passage
from sag2_retrievers.eval.runner import (
    EvalOptions,
    bounded_map,
    compare_reports,
    config_json,
    evaluate,
    read_budgets,
    read_report,
)
from sag2_retrievers.judges import ScriptedJudge

WALTZ = Passage("Moonlight Waltz", "Moonlight Waltz is a piece composed by Arvid Lind in 1901.")
LIND = Passage("Arvid Lind", "Arvid Lind was a composer born in Uppsala.")
UPPSALA = Passage("Uppsala", "Uppsala is a city in Sweden with an old cathedral.")
ZEMBLA = Passage("Zembla", "The capital of Zembla is Onhava.")
ONHAVA = Passage("Onhava", "The Kalix river flows through Onhava.")
DISTRACTORS = (
    Passage("Sunrise March", "Sunrise March is a piece composed by Clara Holm."),
    Passage("Clara Holm", "Clara Holm was a pianist born in Bergen."),
    Passage("Bergen", "Bergen is a rainy city in Norway."),
    Passage("Kalix", "Kalix is a town with a long river history."),
)
PASSAGES = (WALTZ, LIND, UPPSALA, ZEMBLA, ONHAVA, *DISTRACTORS)
COMPOSER = EvalQuestion(
    "3hop1__1_2_3",
    "In which country was the composer of Moonlight Waltz born?",
    (WALTZ.identity, LIND.identity, UPPSALA.identity),
    3,
    PASSAGES,
)
RIVER = EvalQuestion(
    "2hop__4_5",
    "Which river flows through the capital of Zembla?",
    (ZEMBLA.identity, ONHAVA.identity),
    2,
    PASSAGES,
)
QUESTIONS = (COMPOSER, RIVER)
GOLD_TEXTS = {p.text: 0.9 for p in (WALTZ, LIND, UPPSALA, ZEMBLA, ONHAVA)}


@pytest.fixture()
def index(tmp_path: Path) -> Iterator[SQLiteIndex]:
    """An index of the tiny corpus, keyed by content ids as `sag2 eval` builds it."""
    with SQLiteIndex(tmp_path / "tiny.db") as built:
        built.add_documents(Document(p.doc_id, p.text, p.title) for p in PASSAGES)
        yield built


def _judge() -> ScriptedJudge:
    """A judge that knows the gold passages."""
    return ScriptedJudge(GOLD_TEXTS, default=0.1)


async def test_sag2_finds_the_third_hop_through_expansion(index: SQLiteIndex) -> None:
    """Uppsala shares no word with the question, so only expansion can retrieve it."""
    run = await evaluate(index, QUESTIONS, _judge(), EvalOptions("sag2"))
    composer = run.runs[0]
    assert composer.metrics["R@10"] == 1.0
    assert composer.metrics["AE@10"] == 1.0
    uppsala = next(s for s in composer.sources if s.identity == UPPSALA.identity)
    assert uppsala.round_found >= 1
    assert run.summary()["recall_at"]["10"] == 100.0


async def test_bm25_misses_the_passage_without_question_words(index: SQLiteIndex) -> None:
    """Lexical order alone never reaches Uppsala, spends no judgment and names no judge."""
    run = await evaluate(index, QUESTIONS, None, EvalOptions("bm25"))
    composer = run.runs[0]
    assert UPPSALA.identity not in {s.identity for s in composer.sources}
    assert composer.metrics["R@10"] == pytest.approx(2 / 3)
    assert run.judge is None
    assert run.judgments_per_question == 0


async def test_judgments_are_counted_per_question(index: SQLiteIndex) -> None:
    """Each question's judgments equal the candidates its judge scored."""
    judge = _judge()
    run = await evaluate(index, QUESTIONS, judge, EvalOptions("sag2", concurrency=1))
    scored = [len(request.candidates) for request in judge.requests]
    assert sum(r.judgments for r in run.runs) == sum(scored) == run.usage.judgments
    assert all(0 < r.judgments <= SAG2Config().max_judgments for r in run.runs)


async def test_runs_come_back_in_question_order(index: SQLiteIndex) -> None:
    """Concurrent questions still report in the order they were given."""
    run = await evaluate(index, (RIVER, COMPOSER), _judge(), EvalOptions("sag2", concurrency=2))
    assert [r.question.id for r in run.runs] == [RIVER.id, COMPOSER.id]


async def test_report_json_has_every_field(index: SQLiteIndex) -> None:
    """The report carries totals, the config, and a comparable row per question."""
    run = await evaluate(index, QUESTIONS, _judge(), EvalOptions("sag2"))
    report = run.to_json(1.5, 4096)
    assert report["n_questions"] == 2
    assert report["method"] == "sag2"
    assert report["judge"] == "fake-scripted:scripted"
    assert set(report["recall_at"]) == {"1", "2", "5", "10"}
    assert set(report["ae_at"]) == {"10"}
    assert (report["index_seconds"], report["index_bytes"]) == (1.5, 4096)
    assert report["config"]["hops"] == 2 and report["config"]["instruction"] == "default"
    row = report["per_question"][0]
    assert row["id"] == COMPOSER.id and row["hops"] == 3 and row["gold_count"] == 3
    assert row["retrieved"][0] in {p.doc_id for p in PASSAGES}
    assert len(row["retrieved"]) <= 10
    json.dumps(report)


async def test_matched_budget_caps_each_question(index: SQLiteIndex) -> None:
    """Each question judges at most its own budget of one-shot BM25 candidates."""
    budgets = {COMPOSER.id: 3, RIVER.id: 2}
    run = await evaluate(index, QUESTIONS, _judge(), EvalOptions("sag2", budgets=budgets))
    assert [r.judgments for r in run.runs] == [3, 2]
    assert all(s.round_found == 0 for r in run.runs for s in r.sources)
    report = run.to_json(None, 0)
    assert report["method"] == "bm25+judge-matched-budget"
    assert [row["budget"] for row in report["per_question"]] == [3, 2]


async def test_matched_budget_needs_every_question(index: SQLiteIndex) -> None:
    """A question without a budget is an error naming it."""
    options = EvalOptions("sag2", budgets={COMPOSER.id: 3})
    with pytest.raises(InvalidInputError, match=RIVER.id):
        await evaluate(index, QUESTIONS, _judge(), options)


def test_options_reject_budget_without_judge() -> None:
    """The matched-budget control is judged, so BM25 cannot carry budgets."""
    with pytest.raises(InvalidInputError, match="needs a judge"):
        EvalOptions("bm25", budgets={"q": 1})


async def test_sag2_without_judge_is_refused(index: SQLiteIndex) -> None:
    """SAG2 needs a judge."""
    with pytest.raises(InvalidInputError, match="needs a judge"):
        await evaluate(index, QUESTIONS, None, EvalOptions("sag2"))


def test_config_json_marks_ablations() -> None:
    """Ablation switches appear in the reported config; long strings are summarised."""
    options = EvalOptions("sag2", SAG2Config(hops=1, shared_context=False, instruction="Be brief."))
    fields = config_json(options)
    assert (fields["hops"], fields["shared_context"], fields["instruction"]) == (1, False, "custom")
    assert set(config_json(EvalOptions("bm25"))) == {"max_query_tokens", "candidates_per_round"}


async def test_bounded_map_keeps_order_and_limit() -> None:
    """No more than `limit` calls run at once, and results keep the input order."""
    running = peak = 0

    async def slow_square(value: int) -> int:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.01 * (5 - value))
        running -= 1
        return value * value

    assert await bounded_map(slow_square, [1, 2, 3, 4], 2) == [1, 4, 9, 16]
    assert peak == 2


async def test_bounded_map_cancels_the_rest_on_failure() -> None:
    """The first failure propagates and the calls still running are cancelled."""
    cancelled: list[int] = []

    async def fail_first(value: int) -> int:
        if value == 0:
            raise RuntimeError("judge down")
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.append(value)
            raise
        return value

    with pytest.raises(RuntimeError, match="judge down"):
        await bounded_map(fail_first, [0, 1, 2], 3)
    assert sorted(cancelled) == [1, 2]


def _report(tmp_path: Path, name: str, values: dict[str, float], **extra: object) -> Path:
    """Write a minimal report whose questions all have the given metric values."""
    rows = [{"id": f"q{n}", "judgments": n, **values} for n in range(4)]
    path = tmp_path / name
    path.write_text(json.dumps({"method": "sag2", "per_question": rows, **extra}))
    return path


def test_compare_reports_measures_the_paired_difference(tmp_path: Path) -> None:
    """B - A is in points, and its interval contains it."""
    a = read_report(_report(tmp_path, "a.json", {"R@5": 0.5, "R@10": 0.5, "AE@10": 0.0}))
    b = read_report(_report(tmp_path, "b.json", {"R@5": 0.75, "R@10": 1.0, "AE@10": 1.0}))
    shared, comparisons = compare_reports(a, b)
    assert shared == 4
    r10 = next(c for c in comparisons if c.metric == "R@10")
    assert (r10.mean_a, r10.mean_b, r10.difference) == (50.0, 100.0, 50.0)
    assert all(c.low <= c.difference <= c.high for c in comparisons)


def test_compare_needs_shared_questions() -> None:
    """Reports on disjoint question sets cannot be paired."""
    a = {"per_question": [{"id": "x", "R@5": 1.0}]}
    b = {"per_question": [{"id": "y", "R@5": 1.0}]}
    with pytest.raises(InvalidInputError, match="no question id in common"):
        compare_reports(a, b)


def test_read_report_requires_per_question(tmp_path: Path) -> None:
    """A summary-only file is refused with a hint."""
    path = tmp_path / "summary.json"
    path.write_text(json.dumps({"recall_at": {"10": 50.0}}))
    with pytest.raises(InvalidInputError, match="per_question"):
        read_report(path)


def test_read_budgets_from_a_sag2_report(tmp_path: Path) -> None:
    """Budgets are the per-question judgment counts of a sag2 run."""
    path = _report(tmp_path, "a.json", {"R@10": 1.0})
    assert read_budgets(path) == {"q0": 0, "q1": 1, "q2": 2, "q3": 3}


def test_read_budgets_refuses_a_bm25_report(tmp_path: Path) -> None:
    """A BM25 run spent no judgments, so it cannot set a budget."""
    path = tmp_path / "bm25.json"
    path.write_text(json.dumps({"method": "bm25", "per_question": [{"id": "q", "judgments": 0}]}))
    with pytest.raises(InvalidInputError, match="'sag2' run"):
        read_budgets(path)
