"""Pool diagnostics: where gold passages go, per round, on hand-made traces and a tiny eval."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from sag2_retrievers import Document, SQLiteIndex
from sag2_retrievers.eval import EvalQuestion, Passage
from sag2_retrievers.eval.pool_diagnostics import (
    RoundPool,
    pools_from_report,
    round_pools,
    summarize_pools,
)
from sag2_retrievers.eval.runner import EvalOptions, evaluate
from sag2_retrievers.judges import ScriptedJudge
from sag2_retrievers.results import RoundTrace

IDENTITIES = {unit: f"title {unit}\ntext {unit}" for unit in range(1, 30)}


def trace(round_: int, pool: list[int], scores: list[float]) -> RoundTrace:
    """A round that judged ``pool`` with ``scores``."""
    return RoundTrace(
        round_, (), (), (), len(pool), 0, len(pool), 0.0, 0.0, tuple(pool), tuple(scores)
    )


def identity_of(units: Iterable[int]) -> dict[int, str]:
    """The hand-made units' identities (unit 29 was deleted meanwhile)."""
    return {u: IDENTITIES[u] for u in units if u != 29}


def test_a_gold_passage_found_late_and_ranked_low_counts_as_in_pool_not_in_top() -> None:
    rounds = [
        trace(0, list(range(1, 12)), [1.0 - u / 100 for u in range(1, 12)]),
        trace(1, [11, 20, 29], [0.9, 0.1, 0.5]),
    ]
    gold = [IDENTITIES[11], IDENTITIES[20], IDENTITIES[28]]
    final = [IDENTITIES[11], *(IDENTITIES[u] for u in range(1, 10))]
    pools = round_pools(rounds, identity_of, gold, final)
    assert pools == [RoundPool(0, 1, 0), RoundPool(1, 2, 1)]


def test_summaries_are_micro_averaged_and_carry_early_stops_forward() -> None:
    summary = summarize_pools(
        [(2, [RoundPool(0, 1, 1), RoundPool(1, 2, 1)]), (2, [RoundPool(0, 2, 0)])]
    )
    assert summary["gold_passages"] == 4
    first, second = summary["rounds"]
    assert first == {
        "round": 0,
        "gold_in_pool": 75.0,
        "gold_in_top_10": 25.0,
        "in_pool_not_top_10": 50.0,
    }
    assert second["gold_in_pool"] == 100.0 and second["gold_in_top_10"] == 25.0


def test_a_report_without_pool_rows_summarises_to_nothing() -> None:
    assert pools_from_report([{"id": "q", "gold_count": 2}]) == {"gold_passages": 0, "rounds": []}


WALTZ = Passage("Moonlight Waltz", "Moonlight Waltz is a piece composed by Arvid Lind in 1901.")
LIND = Passage("Arvid Lind", "Arvid Lind was a composer born in Uppsala.")
UPPSALA = Passage("Uppsala", "Uppsala is a city in Sweden with an old cathedral.")
OTHER = Passage("Clara Holm", "Clara Holm was a pianist born in Bergen.")
QUESTION = EvalQuestion(
    "3hop1__1_2_3",
    "In which country was the composer of Moonlight Waltz born?",
    (WALTZ.identity, LIND.identity, UPPSALA.identity),
    3,
    (WALTZ, LIND, UPPSALA, OTHER),
)


@pytest.fixture()
def index(tmp_path: Path) -> Iterator[SQLiteIndex]:
    """The tiny corpus, keyed as `sag2 eval` keys it."""
    with SQLiteIndex(tmp_path / "tiny.db") as built:
        built.add_documents(Document(p.doc_id, p.text, p.title) for p in QUESTION.paragraphs)
        yield built


async def test_the_eval_report_shows_expansion_bringing_gold_into_the_pool(
    index: SQLiteIndex,
) -> None:
    judge = ScriptedJudge({WALTZ.text: 0.9, LIND.text: 0.8, UPPSALA.text: 0.7}, default=0.1)
    report = (await evaluate(index, [QUESTION], judge, EvalOptions("sag2"))).to_json(None, 0)
    rounds = report["pool"]["rounds"]
    assert rounds[0]["gold_in_pool"] == pytest.approx(200 / 3)
    assert rounds[-1]["gold_in_pool"] == 100.0
    assert rounds[-1]["gold_in_top_10"] == 100.0
    assert report["per_question"][0]["pool"][0] == {
        "round": 0,
        "gold_in_pool": 2,
        "gold_in_top_10": 2,
    }
    assert pools_from_report(report["per_question"]) == report["pool"]


async def test_a_bm25_report_has_one_lexical_round(index: SQLiteIndex) -> None:
    report = (await evaluate(index, [QUESTION], None, EvalOptions("bm25"))).to_json(None, 0)
    assert [r["round"] for r in report["pool"]["rounds"]] == [0]
    assert report["pool"]["rounds"][0]["in_pool_not_top_10"] == 0.0
