"""SAG2Config: every retrieval parameter of the method, frozen, with the paper's defaults."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from .errors import InvalidInputError
from .judges.base import DEFAULT_INSTRUCTION, REASSESS_NOTE

OnJudgeError = Literal["raise", "bm25"]


@dataclass(frozen=True)
class SAG2Config:
    """Parameters of one SAG2 retrieval (paper §3, ARCHITECTURE §4; defaults in brackets there).

    Ablation switches reproduce the paper's Appendix B rows: ``hops`` (0, 1 or 2 expansions),
    ``shared_context=False`` (judge every candidate without retrieved context), and
    ``one_shot_budget`` (judge the first N BM25 candidates in one round, no expansion).
    """

    candidates_per_round: int = 100  # B: BM25 top-B and new candidates per expansion
    protected: int = 5  # p: initial BM25 top-p carried into every pool
    seeds_per_round: int = 10  # s: seeds per expansion and new candidates in round-1 context
    expansion_terms: int = 20  # L: terms kept per expansion
    hops: int = 2  # H: additional expansion rounds after the initial one
    max_query_tokens: int = 80  # distinct question tokens in the initial OR expression
    per_term_limit: int = 100  # units fetched for each expansion term
    final_new_candidates: int = 20  # unseen units admitted in the last scoring round
    final_pool_size: int = 125  # size of the last round's pool, history included
    context_size: int = 10  # previous top-k quoted as context in the final round
    keep: int = 100  # units kept in the final ranking
    diversity_top: int = 10  # units reordered by the greedy DPP
    fusion_k: int = 60  # fusion score 1/(k + rank) breaks ties between equal judge scores
    shared_context: bool = True
    one_shot_budget: int | None = None
    instruction: str = DEFAULT_INSTRUCTION
    reassess_note: str = REASSESS_NOTE
    on_judge_error: OnJudgeError = "raise"
    # Seconds a retrieval's rounds may take in all; past it the judging fails with JudgeError
    # (so on_judge_error="bm25" still answers, in lexical order). None: no overall limit.
    deadline_seconds: float | None = None

    def __post_init__(self) -> None:
        """Reject settings that would make a retrieval meaningless."""
        positive = (
            "candidates_per_round",
            "seeds_per_round",
            "expansion_terms",
            "max_query_tokens",
            "per_term_limit",
            "final_pool_size",
            "keep",
            "fusion_k",
        )
        for name in positive:
            if getattr(self, name) < 1:
                raise InvalidInputError(
                    f"SAG2Config.{name} must be >= 1, got {getattr(self, name)}"
                )
        for name in ("protected", "final_new_candidates", "context_size", "diversity_top"):
            if getattr(self, name) < 0:
                raise InvalidInputError(
                    f"SAG2Config.{name} must be >= 0, got {getattr(self, name)}"
                )
        if self.hops not in (0, 1, 2):
            raise InvalidInputError(f"SAG2Config.hops must be 0, 1 or 2, got {self.hops}")
        if self.one_shot_budget is not None and self.one_shot_budget < 1:
            raise InvalidInputError("SAG2Config.one_shot_budget must be >= 1 when given")
        deadline = self.deadline_seconds
        if deadline is not None and not (
            isinstance(deadline, (int, float)) and not isinstance(deadline, bool) and deadline > 0
        ):
            raise InvalidInputError(
                f"SAG2Config.deadline_seconds must be a positive number or None, got {deadline!r}"
            )
        if self.on_judge_error not in ("raise", "bm25"):
            raise InvalidInputError("SAG2Config.on_judge_error must be 'raise' or 'bm25'")

    def with_changes(self, **changes: object) -> SAG2Config:
        """Return a copy with some parameters changed (validated like the original)."""
        return replace(self, **changes)  # type: ignore[arg-type]

    @property
    def max_judgments(self) -> int:
        """Upper bound on judgments per question under this configuration (340 by default)."""
        if self.one_shot_budget is not None:
            return self.one_shot_budget
        first_expansion = self.protected + self.seeds_per_round + self.candidates_per_round
        final = min(self.final_pool_size, first_expansion + self.seeds_per_round)
        rounds = [self.candidates_per_round, first_expansion, final]
        return sum(rounds[: self.hops + 1])
