"""Where the gold passages go, round by round: into the judged pool, and into the top k.

A multi-hop retriever can lose evidence twice: the lexical expansion may never bring a gold
passage into the pool, or the judge may rank it below the top k once it is there. These
counts separate the two. Per round r, "in pool" counts the question's gold passages judged in
any round up to r; "in top k" those among the first k unique sources of round r's ranking
(judge score, ties in pool order; the last round uses the returned ranking itself).
Summaries are micro-averaged over gold passages, in percent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..results import RoundTrace

TOP_K = 10


@dataclass(frozen=True)
class RoundPool:
    """One round's gold counts for one question."""

    round: int
    gold_in_pool: int
    gold_in_top: int

    def to_json(self) -> dict[str, int]:
        """The counts as a per-question report entry."""
        return {
            "round": self.round,
            "gold_in_pool": self.gold_in_pool,
            f"gold_in_top_{TOP_K}": self.gold_in_top,
        }


def round_pools(
    trace: Sequence[RoundTrace],
    identity_of: Callable[[Iterable[int]], Mapping[int, str]],
    gold: Iterable[str],
    final_sources: Sequence[str],
) -> list[RoundPool]:
    """Per round, how many gold identities were in the pool so far and in that round's top k.

    ``identity_of`` maps unit ids to source identities (units deleted meanwhile may be absent);
    ``final_sources`` is the returned ranking of unique source identities.
    """
    wanted = set(gold)
    identities = identity_of({u for r in trace for u in r.pool})
    pooled: set[str] = set()
    rows = []
    for number, round_ in enumerate(trace):
        pooled |= {identities[u] for u in round_.pool if u in identities}
        if number == len(trace) - 1:
            top = list(final_sources[:TOP_K])
        else:
            order = sorted(range(len(round_.pool)), key=lambda i: -round_.scores[i])
            ranked = [identities[round_.pool[i]] for i in order if round_.pool[i] in identities]
            top = list(dict.fromkeys(ranked))[:TOP_K]
        rows.append(RoundPool(round_.round, len(wanted & pooled), len(wanted & set(top))))
    return rows


def lexical_pool(
    candidates: Sequence[str], gold: Iterable[str], ranked: Sequence[str]
) -> RoundPool:
    """The one round of a BM25 run: its candidate list is the pool, its order the top k."""
    wanted = set(gold)
    return RoundPool(0, len(wanted & set(candidates)), len(wanted & set(ranked[:TOP_K])))


def summarize_pools(questions: Sequence[tuple[int, Sequence[RoundPool]]]) -> dict[str, Any]:
    """Micro-averaged shares of gold per round, in percent, from (gold count, rounds) pairs.

    A question that stopped early keeps its last round's counts for the later rounds, so
    each round's share is over every gold passage of every question.
    """
    total = sum(gold for gold, _ in questions)
    if not total:
        return {"gold_passages": 0, "rounds": []}
    depth = max((len(rounds) for _, rounds in questions), default=0)
    summary = []
    for number in range(depth):
        pooled = top = 0
        for _, rounds in questions:
            if rounds:
                row = rounds[min(number, len(rounds) - 1)]
                pooled += row.gold_in_pool
                top += row.gold_in_top
        summary.append(
            {
                "round": number,
                "gold_in_pool": 100.0 * pooled / total,
                f"gold_in_top_{TOP_K}": 100.0 * top / total,
                f"in_pool_not_top_{TOP_K}": 100.0 * (pooled - top) / total,
            }
        )
    return {"gold_passages": total, "rounds": summary}


def pools_from_report(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """`summarize_pools` over a report's per-question rows (reports written before: empty)."""
    questions = [
        (
            int(row.get("gold_count", 0)),
            [
                RoundPool(int(p["round"]), int(p["gold_in_pool"]), int(p[f"gold_in_top_{TOP_K}"]))
                for p in row.get("pool", ())
            ],
        )
        for row in rows
        if row.get("pool")
    ]
    return summarize_pools(questions)
