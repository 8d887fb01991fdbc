"""SAG2Engine: the bounded rounds of judged retrieval and passage-term-passage expansion.

The rounds run here; what they know so far and the pools they judge are `state.py`'s
bookkeeping, the result `output.py`'s, the blocking bridge `loop.py`'s.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
import warnings
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any, TypeVar

from ..analysis import Profile, question_words
from ..analysis.paper.analyzer import sentence_words
from ..analysis.paper.terms import PhraseTermIndex
from ..backends.base import LexicalBackend
from ..config import SAG2Config
from ..errors import JudgeError, RemoteJudgeRefusedError
from ..expansion import ExpansionTerm, Seed, expansion_candidates, select_terms
from ..filters import Filters, parse_filters
from ..index_reads import TermIndex
from ..judges.base import (
    ALLOW_REMOTE_ENV,
    Candidate,
    ContextPassage,
    Judge,
    JudgeRequest,
    UsageSnapshot,
    remote_judges_allowed_by_environment,
    track_usage,
)
from ..query import analysed_question, check_limit, check_question, query_terms
from ..results import RetrievalResult, RoundTrace
from .loop import LoopThread
from .output import finish
from .state import Retrieval, RoundPlan, final_plan, first_expansion_plan

T = TypeVar("T")
# Called with each round's trace as soon as the round is scored; may be a coroutine function.
RoundCallback = Callable[[RoundTrace], Awaitable[None] | None]


class SAG2Engine:
    """Retrieve multi-hop evidence: BM25 candidates, judged in context, expanded through terms.

    ``aretrieve`` is the primary (async) API; ``retrieve`` is its blocking twin. Index reads
    run in worker threads, so the event loop only waits on the judge.
    """

    def __init__(
        self,
        index: LexicalBackend,
        judge: Judge,
        config: SAG2Config | None = None,
        *,
        allow_remote_judges: bool | None = None,
    ):
        # The environment is the deployment's policy: an argument can only tighten it.
        allowed = remote_judges_allowed_by_environment() and allow_remote_judges is not False
        if judge.sends_data_off_machine and not allowed:
            raise RemoteJudgeRefusedError(
                f"judge {judge.identity!r} sends questions and passages off this machine, and "
                f"remote judges are disallowed (allow_remote_judges=False or {ALLOW_REMOTE_ENV}=0)"
            )
        self.index = index
        self.judge = judge
        self.config = config or SAG2Config()
        self._loop_thread: LoopThread | None = None
        self._loop_lock = threading.Lock()
        self._finalizer: weakref.finalize[Any, Any] | None = None

    def __repr__(self) -> str:
        return f"SAG2Engine(index={self.index!r}, judge={self.judge.identity!r})"

    # -- public API ------------------------------------------------------------------------

    def retrieve(
        self,
        question: str,
        top_k: int = 10,
        *,
        filters: Filters | None = None,
        on_round: RoundCallback | None = None,
    ) -> RetrievalResult:
        """Blocking retrieval; runs ``aretrieve`` on the engine's own event loop thread."""
        return self._runner().run(
            self.aretrieve(question, top_k, filters=filters, on_round=on_round)
        )

    async def aretrieve(
        self,
        question: str,
        top_k: int = 10,
        *,
        filters: Filters | None = None,
        on_round: RoundCallback | None = None,
    ) -> RetrievalResult:
        """Retrieve up to ``top_k`` source documents of evidence for ``question``.

        ``on_round`` receives each round's trace as soon as that round is scored (awaited
        when it returns an awaitable), for progress reports and framework events.
        """
        _check_request(question, top_k)
        if top_k == 0:
            return RetrievalResult(question, (), (), (), UsageSnapshot(), "top_k is 0")
        state = await asyncio.to_thread(self._in_snapshot, self._start, question, filters)
        degraded = False
        with track_usage(self.judge.usage) as spent:
            if not state.query_terms:
                state.stop_reason = "no query expression"
            else:
                try:
                    await self._rounds_within_deadline(state, on_round)
                except JudgeError as error:
                    if self.config.on_judge_error != "bm25":
                        raise
                    warnings.warn(f"judge failed, returning lexical order: {error}", stacklevel=2)
                    degraded = True
        return await asyncio.to_thread(
            self._in_snapshot, self._finish, state, top_k, spent.snapshot(), degraded
        )

    async def _rounds_within_deadline(
        self, state: Retrieval, on_round: RoundCallback | None
    ) -> None:
        """Run the rounds; running past ``config.deadline_seconds`` is a JudgeError."""
        deadline = self.config.deadline_seconds
        try:
            await asyncio.wait_for(self._run_rounds(state, on_round), deadline)
        except asyncio.TimeoutError:
            raise JudgeError(
                f"the retrieval did not finish within its deadline of {deadline} s "
                "(SAG2Config.deadline_seconds); the judge is too slow for it"
            ) from None

    async def aclose(self) -> None:
        """Close the judge's resources and the engine's private event loop."""
        await self.judge.aclose()
        self._stop_loop()

    def close(self) -> None:
        """Blocking ``aclose`` (usable inside a running event loop: it runs on the engine's own).

        After async use on your own event loop, prefer ``await engine.aclose()`` there.
        """
        self._runner().run(self.judge.aclose())
        self._stop_loop()

    # -- rounds ----------------------------------------------------------------------------

    def _in_snapshot(self, step: Callable[..., T], *args: Any) -> T:
        """Run one step's index reads against a single consistent state of the index."""
        with self.index.snapshot():
            return step(*args)

    def _start(self, question: str, filters: Filters | None) -> Retrieval:
        """Analyse the question and fetch the initial BM25 candidates (filters in the query)."""
        config = self.config
        expr = parse_filters(filters)  # once, so a bad filter fails before any query
        state = Retrieval(
            question,
            frozenset(question_words(analysed_question(question), self._profile)),
            query_terms(self.index, question, config.max_query_tokens),
            expr,
        )
        if state.query_terms:
            limit = config.one_shot_budget or config.candidates_per_round
            state.n_units = self.index.unit_count()
            state.lexical = self.index.rank_expression(state.query_terms, limit, filters=expr)
            initial = [unit_id for unit_id, _ in state.lexical]
            state.question_scores = dict(state.lexical)
            state.record_candidates(initial, 0, config.fusion_k)
            state.protected = initial[: config.protected]
            state.units.update(self.index.units(initial))
        return state

    async def _run_rounds(self, state: Retrieval, on_round: RoundCallback | None) -> None:
        """Round 0 on the BM25 list, then up to ``hops`` expansions, stopping early if stuck."""
        initial = [unit_id for unit_id, _ in state.lexical]
        if not initial:
            state.stop_reason = "no lexical match"
            return
        first = RoundPlan(0, initial, [], None, False, new=tuple(initial))
        await self._score_round(state, first, on_round)
        if self.config.one_shot_budget is not None:
            return
        for round_ in range(1, self.config.hops + 1):
            started = time.perf_counter()
            plan = await asyncio.to_thread(self._in_snapshot, self._plan_expansion, state, round_)
            if plan is None:
                return
            plan = replace(plan, planning_seconds=time.perf_counter() - started)
            await self._score_round(state, plan, on_round)

    def _plan_expansion(self, state: Retrieval, round_: int) -> RoundPlan | None:
        """Seeds, terms and new candidates for an expansion round, and its pool and context."""
        expansion = self._expand(state, round_)
        if expansion is None:
            return None
        seeds, terms, new = expansion
        if round_ == 1:
            plan = first_expansion_plan(state, new, self.config)
        else:
            plan = final_plan(state, new, self.config)
        # The trace lists the new units this round actually judges.
        pool = set(plan.pool)
        judged_new = tuple(u for u in new if u in pool)
        plan = replace(plan, seeds=tuple(seeds), terms=tuple(terms), new=judged_new)
        return self._with_units(state, plan)

    def _expand(
        self, state: Retrieval, round_: int
    ) -> tuple[list[int], list[ExpansionTerm], list[int]] | None:
        """Passage -> term -> passage: pick seeds, select their terms, fetch unseen units."""
        config = self.config
        seeds = [u for u in state.ranking if u not in state.seed_history][: config.seeds_per_round]
        if not seeds:
            state.stop_reason = f"no seed for round {round_}"
            return None
        state.seed_history.extend(seeds)
        sentences = self.index.expansion_units(seeds)
        seed_records = [
            Seed(u, state.scores[u], sentences.get(u, []), self._sentence_words(state, u))
            for u in seeds
        ]
        term_index = self._term_index()
        terms = select_terms(
            term_index, seed_records, state.question_tokens, config.expansion_terms, state.n_units
        )
        if not terms:
            state.stop_reason = f"no expansion term for round {round_}"
            return None
        new = expansion_candidates(
            term_index,
            terms,
            state.query_terms,
            excluded=set(state.scores),
            filters=state.filters,
            per_term_limit=config.per_term_limit,
            limit=config.candidates_per_round,
        )
        if not new:
            state.stop_reason = f"no new candidate for round {round_}"
            return None
        state.record_candidates(new, round_, config.fusion_k)
        return seeds, terms, new

    def _with_units(self, state: Retrieval, plan: RoundPlan) -> RoundPlan:
        """Fetch the plan's new units and their question BM25; drop any a concurrent writer
        deleted since they ranked."""
        state.units.update(self.index.units(u for u in plan.pool if u not in state.units))
        unscored = [u for u in plan.pool if u not in state.question_scores]
        state.question_scores.update(self.index.score_units(state.query_terms, unscored))
        pool = [u for u in plan.pool if u in state.units]
        context = [u for u in plan.context if u in state.units]
        return replace(plan, pool=pool, context=context)

    async def _score_round(
        self, state: Retrieval, plan: RoundPlan, on_round: RoundCallback | None
    ) -> None:
        """Judge every pool member in the plan's context, re-rank the pool, report the round."""
        started = time.perf_counter()
        request = self._request(state, plan)
        judge_started = time.perf_counter()
        scores = await self.judge.score(request)
        judge_seconds = time.perf_counter() - judge_started
        state.scores.update(zip(plan.pool, scores, strict=True))
        state.ranking = state.rank(plan.pool)
        state.trace.append(
            RoundTrace(
                round=plan.round,
                seeds=plan.seeds,
                terms=tuple((t.term, t.priority) for t in plan.terms),
                new_candidates=plan.new,
                pool_size=len(plan.pool),
                context_size=len(request.context),
                judgments=len(plan.pool),
                local_seconds=plan.planning_seconds
                + (time.perf_counter() - started - judge_seconds),
                judge_seconds=judge_seconds,
                pool=tuple(plan.pool),
                scores=tuple(scores),
            )
        )
        if on_round is not None:
            reported = on_round(state.trace[-1])
            if inspect.isawaitable(reported):
                await reported

    def _request(self, state: Retrieval, plan: RoundPlan) -> JudgeRequest:
        """The judge request of a round: candidates, shared context and note (if enabled)."""
        candidates = tuple(
            Candidate(
                state.units[u].title,
                state.units[u].body,
                state.found.get(u),
                state.question_scores.get(u),
                state.scores.get(u),
            )
            for u in plan.pool
        )
        if not self.config.shared_context:
            return JudgeRequest(state.question, candidates, instruction=self.config.instruction)
        context = tuple(
            ContextPassage(
                state.units[u].title,
                state.units[u].body,
                state.scores[u] if plan.with_previous_scores else None,
            )
            for u in dict.fromkeys(plan.context)
        )
        return JudgeRequest(state.question, candidates, context, plan.note, self.config.instruction)

    def _finish(
        self, state: Retrieval, top_k: int, usage: UsageSnapshot, degraded: bool
    ) -> RetrievalResult:
        """The result of the rounds (`output.finish`), read in the caller's snapshot."""
        return finish(self.index, self.config, state, top_k, usage, degraded)

    def _sentence_words(self, state: Retrieval, unit_id: int) -> list[frozenset[str]] | None:
        """Each sentence's words for the question-connection test ("paper" only)."""
        if self._profile != "paper":
            return None
        return [frozenset(words) for words in sentence_words(state.units[unit_id].body)]

    def _term_index(self) -> TermIndex:
        """The index as expansion reads it: "paper" terms are words matched as phrases."""
        return PhraseTermIndex(self.index) if self._profile == "paper" else self.index

    @property
    def _profile(self) -> Profile:
        """The analyzer profile of the index, which the question must be analysed with."""
        return self.index.settings.analyzer_profile

    # -- sync bridge -----------------------------------------------------------------------

    def _runner(self) -> LoopThread:
        """The engine's private event loop thread, started on first blocking call."""
        with self._loop_lock:
            if self._loop_thread is None:
                self._loop_thread = LoopThread()
                # Not joining workers: the collection may run on one of them.
                self._finalizer = weakref.finalize(self, self._loop_thread.stop, False)
            return self._loop_thread

    def _stop_loop(self) -> None:
        """Stop the private event loop thread if one was started."""
        with self._loop_lock:
            if self._loop_thread is not None:
                if self._finalizer is not None:
                    self._finalizer.detach()
                self._loop_thread.stop()
                self._loop_thread = None


def _check_request(question: object, top_k: object) -> None:
    """Reject a non-string question or a negative/non-integer top_k."""
    check_question(question)
    check_limit(top_k, "top_k")
