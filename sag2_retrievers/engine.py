"""SAG2Engine: the bounded rounds of judged retrieval and passage-term-passage expansion."""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
import warnings
import weakref
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from .analysis import Profile, question_words
from .analysis.paper.analyzer import sentence_words
from .analysis.paper.diversity import diversity_words, paper_dpp_order, word_vectors
from .analysis.paper.terms import PhraseTermIndex
from .analysis.sag2.diversity import cosine_matrix, greedy_dpp_order, tfidf_vectors
from .backends.base import LexicalBackend
from .config import SAG2Config
from .documents import Unit
from .errors import JudgeError, RemoteJudgeRefusedError
from .expansion import ExpansionTerm, Seed, expansion_candidates, select_terms
from .filters import Filters, parse_filters
from .index_reads import TermIndex
from .judges.base import (
    ALLOW_REMOTE_ENV,
    Candidate,
    ContextPassage,
    Judge,
    JudgeRequest,
    UsageSnapshot,
    remote_judges_allowed_by_environment,
    track_usage,
)
from .query import analysed_question, check_limit, check_question, query_terms
from .results import RetrievalResult, RetrievedUnit, RoundTrace

T = TypeVar("T")
# Called with each round's trace as soon as the round is scored; may be a coroutine function.
RoundCallback = Callable[[RoundTrace], Awaitable[None] | None]


@dataclass
class _Retrieval:
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
class _RoundPlan:
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
        self._loop_thread: _LoopThread | None = None
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
        self, state: _Retrieval, on_round: RoundCallback | None
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

    def _start(self, question: str, filters: Filters | None) -> _Retrieval:
        """Analyse the question and fetch the initial BM25 candidates (filters in the query)."""
        config = self.config
        expr = parse_filters(filters)  # once, so a bad filter fails before any query
        state = _Retrieval(
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

    async def _run_rounds(self, state: _Retrieval, on_round: RoundCallback | None) -> None:
        """Round 0 on the BM25 list, then up to ``hops`` expansions, stopping early if stuck."""
        initial = [unit_id for unit_id, _ in state.lexical]
        if not initial:
            state.stop_reason = "no lexical match"
            return
        first = _RoundPlan(0, initial, [], None, False, new=tuple(initial))
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

    def _plan_expansion(self, state: _Retrieval, round_: int) -> _RoundPlan | None:
        """Seeds, terms and new candidates for an expansion round, and its pool and context."""
        expansion = self._expand(state, round_)
        if expansion is None:
            return None
        seeds, terms, new = expansion
        if round_ == 1:
            plan = self._first_expansion_plan(state, new)
        else:
            plan = self._final_plan(state, new)
        # The trace lists the new units this round actually judges.
        pool = set(plan.pool)
        judged_new = tuple(u for u in new if u in pool)
        plan = replace(plan, seeds=tuple(seeds), terms=tuple(terms), new=judged_new)
        return self._with_units(state, plan)

    def _expand(
        self, state: _Retrieval, round_: int
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

    def _first_expansion_plan(self, state: _Retrieval, new: list[int]) -> _RoundPlan:
        """Round 1: protected + all seeds + new units; context = seeds + the first new units."""
        pool = list(dict.fromkeys([*state.protected, *state.seed_history, *new]))
        context = [*state.seed_history, *new[: self.config.seeds_per_round]]
        return _RoundPlan(1, pool, context, None, False)

    def _final_plan(self, state: _Retrieval, new: list[int]) -> _RoundPlan:
        """Round 2: a few new units, then history (pool members first, then by latest score);
        context = the previous ranking's top units with their scores and a reassess note."""
        config = self.config
        union = list(dict.fromkeys([*state.protected, *state.seed_history, *new]))
        members = [u for u in union if u in state.scores]
        member_set = set(members)
        earlier = sorted(
            (u for u in state.scores if u not in member_set), key=lambda u: (-state.scores[u], u)
        )
        admitted = new[: config.final_new_candidates]
        size = min(len(union), config.final_pool_size)
        pool = list(dict.fromkeys([*admitted, *members, *earlier]))[:size]
        context = state.ranking[: config.context_size]
        return _RoundPlan(2, pool, context, config.reassess_note, True)

    def _with_units(self, state: _Retrieval, plan: _RoundPlan) -> _RoundPlan:
        """Fetch the plan's new units and their question BM25; drop any a concurrent writer
        deleted since they ranked."""
        state.units.update(self.index.units(u for u in plan.pool if u not in state.units))
        unscored = [u for u in plan.pool if u not in state.question_scores]
        state.question_scores.update(self.index.score_units(state.query_terms, unscored))
        pool = [u for u in plan.pool if u in state.units]
        context = [u for u in plan.context if u in state.units]
        return replace(plan, pool=pool, context=context)

    async def _score_round(
        self, state: _Retrieval, plan: _RoundPlan, on_round: RoundCallback | None
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

    def _request(self, state: _Retrieval, plan: _RoundPlan) -> JudgeRequest:
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

    # -- output ----------------------------------------------------------------------------

    def _finish(
        self, state: _Retrieval, top_k: int, usage: UsageSnapshot, degraded: bool
    ) -> RetrievalResult:
        """Keep the top units, diversify the first ones, and keep at most
        ``units_per_document`` units of each source document (1: unique sources)."""
        if degraded or not state.ranking:
            ranked = [(u, s) for u, s in state.lexical][: self.config.keep]
        else:
            ranking = self._diversified(state, state.ranking[: self.config.keep])
            ranked = [(u, state.scores[u]) for u in ranking]
        # Read again: the output reflects the index as it is now, without units deleted by a
        # concurrent writer while the judge was working.
        units = self.index.units(u for u, _ in ranked)
        ordered = [
            _retrieved(units[u], score, state.found.get(u, 0), rank)
            for rank, (u, score) in enumerate(ranked, start=1)
            if u in units
        ]
        hits = _per_source(ordered, self.config.units_per_document)[:top_k]
        metadata = self.index.metadata(hit.doc_id for hit in hits)
        hits = [replace(hit, metadata=metadata.get(hit.doc_id, {})) for hit in hits]
        return RetrievalResult(
            state.question,
            tuple(hits),
            tuple(ordered),
            tuple(state.trace),
            usage,
            "judge failed; lexical order" if degraded else state.stop_reason,
            degraded,
        )

    def _diversified(self, state: _Retrieval, ranking: list[int]) -> list[int]:
        """Reorder the first ``diversity_top`` units by greedy DPP; the rest keep their order.

        "sag2" vectors use the stored analyzer tokens with unit-level df over the index;
        "paper" ones follow the port (`analysis/paper/diversity.py`).
        """
        top = ranking[: self.config.diversity_top]
        if len(top) <= 2:
            return ranking
        if self._profile == "paper":
            return self._paper_diversified(state, top) + ranking[len(top) :]
        sentences = self.index.expansion_units(top)
        token_lists = [
            [tok for s in sentences.get(u, []) for term in s for tok in term.split()] for u in top
        ]
        df = self.index.document_frequencies({t for tokens in token_lists for t in tokens})
        vectors = tfidf_vectors(token_lists, df, state.n_units)
        quality = [state.scores[u] for u in top]
        order = greedy_dpp_order(quality, cosine_matrix(vectors))
        return [top[i] for i in order] + ranking[len(top) :]

    def _paper_diversified(self, state: _Retrieval, top: list[int]) -> list[int]:
        """The port's diversity step: body words, idf over the corpus's documents."""
        bodies = [state.units[u].body for u in top]
        words = {w for body in bodies for w in diversity_words(body)}
        documents, df = self.index.word_document_frequencies(words)
        order = paper_dpp_order([state.scores[u] for u in top], word_vectors(bodies, df, documents))
        return [top[i] for i in order]

    def _sentence_words(self, state: _Retrieval, unit_id: int) -> list[frozenset[str]] | None:
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

    def _runner(self) -> _LoopThread:
        """The engine's private event loop thread, started on first blocking call."""
        with self._loop_lock:
            if self._loop_thread is None:
                self._loop_thread = _LoopThread()
                self._finalizer = weakref.finalize(self, self._loop_thread.stop)
            return self._loop_thread

    def _stop_loop(self) -> None:
        """Stop the private event loop thread if one was started."""
        with self._loop_lock:
            if self._loop_thread is not None:
                if self._finalizer is not None:
                    self._finalizer.detach()
                self._loop_thread.stop()
                self._loop_thread = None


class _LoopThread:
    """A daemon thread running one event loop, so blocking calls reuse the judge's clients."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True, name="sag2-loop")
        self.thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine on the loop and wait for its result."""
        if threading.current_thread() is self.thread:
            coroutine.close()
            raise RuntimeError("a blocking SAG2 call cannot run inside the engine's own loop")
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    def stop(self) -> None:
        """Stop and close the loop (a no-op when already stopped)."""
        if self.loop.is_closed():
            return
        if threading.current_thread() is self.thread:
            raise RuntimeError("cannot stop the engine's loop from inside it")
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()


def _check_request(question: object, top_k: object) -> None:
    """Reject a non-string question or a negative/non-integer top_k."""
    check_question(question)
    check_limit(top_k, "top_k")


def _retrieved(unit: Unit, score: float, round_found: int, rank: int) -> RetrievedUnit:
    """A result record for a unit."""
    return RetrievedUnit(
        unit.unit_id,
        unit.doc_id,
        unit.title,
        unit.body,
        score,
        round_found,
        rank,
        unit.char_start,
        unit.char_end,
    )


def _per_source(ordered: Sequence[RetrievedUnit], limit: int) -> list[RetrievedUnit]:
    """The first ``limit`` units of each source document, in order."""
    taken: Counter[str] = Counter()
    kept = []
    for hit in ordered:
        if taken[hit.doc_id] < limit:
            taken[hit.doc_id] += 1
            kept.append(hit)
    return kept
