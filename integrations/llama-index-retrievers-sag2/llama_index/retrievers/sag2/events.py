"""SAG2's rounds as LlamaIndex instrumentation events, dispatched as each round completes."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.utils import print_text
from llama_index_instrumentation import get_dispatcher

from sag2_retrievers import LexicalBackend, RoundTrace

dispatcher = get_dispatcher(__name__)


class SAG2RoundEvent(BaseEvent):
    """One scored SAG2 round: its seeds, expansion terms, pool, context and judgments.

    Seeds and new candidates are given as node ids (the indexed node each unit came from).
    It is dispatched inside the retrieval's span, so handlers see it as that span's child.
    """

    round: int
    seeds: list[str]
    terms: list[tuple[str, float]]
    new_candidates: list[str]
    pool_size: int
    context_size: int
    judgments: int
    local_seconds: float
    judge_seconds: float

    @classmethod
    def class_name(cls) -> str:
        """The event's name in instrumentation handlers."""
        return "SAG2RoundEvent"

    @property
    def seconds(self) -> float:
        """The round's wall time: local work plus waiting on the judge."""
        return self.local_seconds + self.judge_seconds

    def describe(self) -> str:
        """One line for ``verbose=True``: what the round judged and what linked it."""
        parts = [f"new candidates: {len(self.new_candidates)}", f"judgments: {self.judgments}"]
        if self.seeds:
            terms = ", ".join(term for term, _ in self.terms)
            parts[:0] = [f"seeds from {', '.join(dict.fromkeys(self.seeds))}", f"terms: {terms}"]
        return f"SAG2 round {self.round} ({self.seconds:.2f} s): {'; '.join(parts)}\n"


def round_reporter(index: LexicalBackend, verbose: bool) -> Callable[[RoundTrace], Awaitable[None]]:
    """An engine ``on_round`` callback dispatching a `SAG2RoundEvent` (and printing if verbose)."""

    async def report(trace: RoundTrace) -> None:
        sources = await asyncio.to_thread(_node_ids, index, (*trace.seeds, *trace.new_candidates))
        event = SAG2RoundEvent(
            round=trace.round,
            seeds=[sources.get(u, "?") for u in trace.seeds],
            terms=list(trace.terms),
            new_candidates=[sources.get(u, "?") for u in trace.new_candidates],
            pool_size=trace.pool_size,
            context_size=trace.context_size,
            judgments=trace.judgments,
            local_seconds=trace.local_seconds,
            judge_seconds=trace.judge_seconds,
        )
        dispatcher.event(event)
        if verbose:
            print_text(event.describe())

    return report


def _node_ids(index: LexicalBackend, unit_ids: tuple[int, ...]) -> dict[int, str]:
    """The node id (core document id) of each unit still in the index."""
    return {unit_id: unit.doc_id for unit_id, unit in index.units(unit_ids).items()}
