"""SAG2Config: every retrieval parameter of the method, frozen, with the paper's defaults."""

from __future__ import annotations

import math
import types
import typing
from dataclasses import dataclass, fields, replace
from typing import Any, Literal

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
    # Units of one source document allowed in the returned top_k; the paper returns unique
    # sources (1). More lets a long document contribute several of its chunks.
    units_per_document: int = 1
    shared_context: bool = True
    one_shot_budget: int | None = None
    instruction: str = DEFAULT_INSTRUCTION
    reassess_note: str = REASSESS_NOTE
    on_judge_error: OnJudgeError = "raise"
    # Seconds a retrieval's rounds may take in all; past it the judging fails with JudgeError
    # (so on_judge_error="bm25" still answers, in lexical order). None: no overall limit.
    deadline_seconds: float | None = None

    def __post_init__(self) -> None:
        """Reject settings of the wrong type, or that would make a retrieval meaningless."""
        hints = typing.get_type_hints(SAG2Config)
        for spec in fields(self):
            if not _fits(getattr(self, spec.name), hints[spec.name]):
                raise InvalidInputError(
                    f"SAG2Config.{spec.name} must be {_describe(hints[spec.name])}, "
                    f"got {getattr(self, spec.name)!r}"
                )
        positive = (
            "candidates_per_round",
            "seeds_per_round",
            "expansion_terms",
            "max_query_tokens",
            "per_term_limit",
            "final_pool_size",
            "keep",
            "fusion_k",
            "units_per_document",
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
        if self.deadline_seconds is not None and not self.deadline_seconds > 0:
            raise InvalidInputError(
                "SAG2Config.deadline_seconds must be a positive number of seconds or None, "
                f"got {self.deadline_seconds!r}"
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


MAX_COUNT = 2**31 - 1  # any count beyond this is a mistake, and LIMIT must stay in 64 bits


def _fits(value: object, hint: Any) -> bool:
    """Whether a value has a field's declared type (bool is not an int; counts are bounded)."""
    origin = typing.get_origin(hint)
    if origin is Literal:
        return value in typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, option) for option in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is int:
        return type(value) is int and abs(value) <= MAX_COUNT
    if hint is float:
        valid = isinstance(value, (int, float)) and not isinstance(value, bool)
        return valid and math.isfinite(value)  # type: ignore[arg-type]
    return type(value) is hint


def _describe(hint: Any) -> str:
    """A field's declared type in words, for error messages."""
    if typing.get_origin(hint) is Literal:
        return "one of " + ", ".join(repr(option) for option in typing.get_args(hint))
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " or ".join(_describe(option) for option in typing.get_args(hint))
    if hint is int:
        return f"an integer up to {MAX_COUNT:,}"
    return "None" if hint is type(None) else f"a {hint.__name__}"
