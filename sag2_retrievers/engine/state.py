"""The bookkeeping of one retrieval: what is known so far, and the pool and context each
expansion round judges (§4.7)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..config import SAG2Config
from ..documents import Unit
from ..expansion import ExpansionTerm
from ..filters import Filters
from ..results import RoundTrace


@dataclass
class Retrieval:
    """The evolving state of one question's retrieval."""

    question: str
    question_tokens: frozenset[str]
    query_terms: list[str]
    filters: Filters | None
    units: dict[int, Unit] = field(default_factory=dict)
    scores: dict[int, float] = field(default_factory=dict)
    fusion: dict[int, float] = field(default_factory=dict)
    found: dict[int, int] = field(default_factory=dict)
    protected: list[int] = field(default_factory=list)
    seed_history: list[int] = field(default_factory=list)
    ranking: list[int] = field(default_factory=list)
    lexical: list[tuple[int, float]] = field(default_factory=list)
    # BM25 against the question of every pool member that matches it (a judge feature).
    question_scores: dict[int, float] = field(default_factory=dict)
    n_units: int = 0
    trace: list[RoundTrace] = field(default_factory=list)
    stop_reason: str = "completed"

    def rank(self, pool: Sequence[int]) -> list[int]:
        """Sort by (-judge score, -fusion score, document id, offset): the last keys are
        what the unit is, so the order does not depend on the ids the index's writes gave."""
        return sorted(
            pool, key=lambda u: (-self.scores[u], -self.fusion.get(u, 0.0), self._where(u))
        )

    def _where(self, unit_id: int) -> tuple[str, int]:
        """A unit's document id and character offset."""
        unit = self.units[unit_id]
        return unit.doc_id, unit.char_start

    def record_candidates(self, candidates: Sequence[int], round_: int, fusion_k: int) -> None:
        """Note when new candidates were found and their fusion score 1 / (k + rank)."""
        for rank, unit_id in enumerate(candidates, start=1):
            self.fusion.setdefault(unit_id, 1.0 / (fusion_k + rank))
            self.found.setdefault(unit_id, round_)


@dataclass(frozen=True)
class RoundPlan:
    """One scoring round to run: pool, context, and what produced them (for the trace)."""

    round: int
    pool: list[int]
    context: list[int]
    note: str | None
    with_previous_scores: bool
    seeds: tuple[int, ...] = ()
    terms: tuple[ExpansionTerm, ...] = ()
    new: tuple[int, ...] = ()
    planning_seconds: float = 0.0


def first_expansion_plan(state: Retrieval, new: list[int], config: SAG2Config) -> RoundPlan:
    """Round 1: protected + all seeds + new units; context = seeds + the first new units."""
    pool = list(dict.fromkeys([*state.protected, *state.seed_history, *new]))
    context = [*state.seed_history, *new[: config.seeds_per_round]]
    return RoundPlan(1, pool, context, None, False)


def final_plan(state: Retrieval, new: list[int], config: SAG2Config) -> RoundPlan:
    """Round 2: a few new units, then history (pool members first, then the others in ranking
    order: latest score, then what the unit is, never its id); context = the previous
    ranking's top units with their scores and a reassess note."""
    union = list(dict.fromkeys([*state.protected, *state.seed_history, *new]))
    members = [u for u in union if u in state.scores]
    member_set = set(members)
    earlier = state.rank([u for u in state.scores if u not in member_set])
    admitted = new[: config.final_new_candidates]
    size = min(len(union), config.final_pool_size)
    pool = list(dict.fromkeys([*admitted, *members, *earlier]))[:size]
    context = state.ranking[: config.context_size]
    return RoundPlan(2, pool, context, config.reassess_note, True)
