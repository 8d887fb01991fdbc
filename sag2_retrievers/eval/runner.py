"""The evaluation loop: run BM25 or SAG2 over questions, score the evidence, account the cost.

Used by ``sag2 eval``, ``sag2 demo`` and the benchmark scripts, so every number they report is
computed the same way. Retrieved documents are matched to gold through their identity string
(stored title, a newline, stored text), exactly as the gold passages are named.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from ..backends.base import DocumentIndex
from ..config import SAG2Config
from ..engine import SAG2Engine
from ..errors import InvalidInputError
from ..index_reads import SearchHit
from ..input_files import read_json
from ..judges.base import DEFAULT_INSTRUCTION, REASSESS_NOTE, Judge, UsageSnapshot
from ..results import RetrievalResult
from .bootstrap import PAPER_SEED, paired_bootstrap
from .datasets import EvalQuestion
from .metrics import QuestionResult, Summary, per_question_metrics, summarize
from .pool_diagnostics import RoundPool, lexical_pool, round_pools, summarize_pools

Method = Literal["bm25", "sag2"]
T = TypeVar("T")
R = TypeVar("R")

DEPTH = 20  # unique sources retrieved per question: R@10 stays exact if identities repeat
REPORTED_DOC_IDS = 10
COMPARED_METRICS = ("R@5", "R@10", "AE@10")
BOOTSTRAP_RESAMPLES = 2_000


@dataclass(frozen=True)
class EvalOptions:
    """How to run an evaluation: the method, its configuration and per-question budgets.

    ``budgets`` (question id -> judgments) turns the run into the paper's matched-budget
    control: each question judges that many one-shot BM25 candidates (``one_shot_budget``).
    ``concurrency`` bounds the questions in flight on one event loop. ``keep_retrievals``
    keeps each SAG2 question's full `RetrievalResult` on its run (for HTML traces); off by
    default, since a thousand of them hold every judged passage's text.
    """

    method: Method = "sag2"
    config: SAG2Config = field(default_factory=SAG2Config)
    budgets: Mapping[str, int] | None = None
    concurrency: int = 4
    keep_retrievals: bool = False

    def __post_init__(self) -> None:
        """Reject a method that does not exist or a non-positive concurrency."""
        if self.method not in ("bm25", "sag2"):
            raise InvalidInputError(f"unknown method {self.method!r}; use 'bm25' or 'sag2'")
        if self.concurrency < 1:
            raise InvalidInputError(f"concurrency must be at least 1, got {self.concurrency}")
        if self.budgets is not None and self.method != "sag2":
            raise InvalidInputError("a matched judgment budget needs a judge: use method 'sag2'")

    @property
    def name(self) -> str:
        """The method's name in reports."""
        return "bm25+judge-matched-budget" if self.budgets is not None else self.method


@dataclass(frozen=True)
class RankedSource:
    """One retrieved source document, as evaluated: its id, identity, title, score and round."""

    doc_id: str
    identity: str
    title: str
    score: float
    round_found: int


@dataclass(frozen=True)
class QuestionRun:
    """One question's retrieved sources (best first), judgments spent and elapsed seconds."""

    question: EvalQuestion
    sources: tuple[RankedSource, ...]
    judgments: int
    seconds: float
    degraded: bool = False
    retrieval: RetrievalResult | None = field(default=None, repr=False, compare=False)
    """The SAG2 retrieval behind ``sources`` (None for BM25), for traces such as HTML pages."""
    pool: tuple[RoundPool, ...] = ()
    """Per round, the gold passages in the judged pool and in the top 10 (`pool_diagnostics`)."""

    @property
    def result(self) -> QuestionResult:
        """The question's gold and retrieved identities, as the metrics take them."""
        identities = tuple(source.identity for source in self.sources)
        return QuestionResult(self.question.id, self.question.gold, identities)

    @property
    def metrics(self) -> dict[str, float]:
        """R@1, R@2, R@5, R@10 and AE@10 as fractions."""
        return per_question_metrics(self.result)


@dataclass(frozen=True)
class EvalRun:
    """A finished evaluation: its options, judge, per-question runs and total usage."""

    options: EvalOptions
    judge: str | None
    runs: tuple[QuestionRun, ...]
    usage: UsageSnapshot
    wall_seconds: float

    def summary(self) -> Summary:
        """Macro-averaged R@k and AE@k in percent."""
        return summarize([run.result for run in self.runs])

    def pool_summary(self) -> dict[str, Any]:
        """Per round, the shares of gold passages in the pool and in the top 10 (micro)."""
        return summarize_pools([(len(set(run.question.gold)), run.pool) for run in self.runs])

    @property
    def judgments_per_question(self) -> float:
        """Mean judgments per question (cached judgments included: they are part of the method)."""
        return sum(run.judgments for run in self.runs) / len(self.runs)

    def to_json(self, index_seconds: float | None, index_bytes: int) -> dict[str, Any]:
        """The machine-readable report, with enough per-question detail to compare two runs.

        Summary metrics are in percent, per-question ones are fractions. Usage counts what this
        run paid (cache hits add judgments but no calls, tokens or cost); cached input tokens
        are the part of the input tokens the provider reported serving from its prompt cache
        (``cached_input_tokens_reported`` is False when no reply reported any: "not reported",
        not 0% cached); ``unscored_candidates`` counts candidates left unscored after
        unreadable answers.
        ``seconds_per_question`` is wall time over questions, so it reflects the concurrency;
        each per-question ``seconds`` includes waiting for the judge shared with other questions.
        """
        n = len(self.runs)
        summary = self.summary()
        return {
            "n_questions": n,
            "method": self.options.name,
            "judge": self.judge,
            "config": config_json(self.options),
            "recall_at": summary["recall_at"],
            "ae_at": summary["ae_at"],
            "pool": self.pool_summary(),
            "index_seconds": index_seconds,
            "index_bytes": index_bytes,
            "judgments_per_question": self.judgments_per_question,
            "http_calls_per_question": self.usage.http_calls / n,
            "input_tokens_per_question": self.usage.input_tokens / n,
            "cached_input_tokens_per_question": self.usage.cached_input_tokens / n,
            "output_tokens_per_question": self.usage.output_tokens / n,
            "input_tokens": self.usage.input_tokens,
            "cached_input_tokens": self.usage.cached_input_tokens,
            "cached_input_tokens_reported": self.usage.cache_reports > 0,
            "unscored_candidates": self.usage.degraded,
            "output_tokens": self.usage.output_tokens,
            "cost_usd": self.usage.cost_usd,
            "seconds_per_question": self.wall_seconds / n,
            "wall_seconds": self.wall_seconds,
            "concurrency": self.options.concurrency,
            "degraded_questions": sum(run.degraded for run in self.runs),
            "per_question": [_question_json(run, self.options.budgets) for run in self.runs],
        }


@dataclass(frozen=True)
class MetricComparison:
    """Mean of a metric for runs A and B, and B - A with its paired 95% interval, in points."""

    metric: str
    mean_a: float
    mean_b: float
    difference: float
    low: float
    high: float


def config_json(options: EvalOptions) -> dict[str, Any]:
    """The configuration fields that change a method's results, for reports."""
    if options.method == "bm25":
        return {
            "max_query_tokens": options.config.max_query_tokens,
            "candidates_per_round": options.config.candidates_per_round,
        }
    fields = asdict(options.config)
    fields["instruction"] = "default" if fields["instruction"] == DEFAULT_INSTRUCTION else "custom"
    fields["reassess_note"] = "default" if fields["reassess_note"] == REASSESS_NOTE else "custom"
    if options.budgets is not None:
        fields["one_shot_budget"] = "per question (matched budget)"
    return fields


async def evaluate(
    index: DocumentIndex,
    questions: Sequence[EvalQuestion],
    judge: Judge | None,
    options: EvalOptions,
    *,
    on_question: Callable[[QuestionRun], None] | None = None,
) -> EvalRun:
    """Run the method on every question, at most ``options.concurrency`` at a time.

    ``judge`` is required for SAG2 and ignored by BM25. ``on_question`` is called as each
    question finishes (for progress bars). Runs come back in question order.
    """
    if not questions:
        raise InvalidInputError("no questions to evaluate")
    if options.method == "sag2" and judge is None:
        raise InvalidInputError("method 'sag2' needs a judge")
    budgets = _checked_budgets(options.budgets, questions)
    usage_before = judge.usage.snapshot() if judge is not None else UsageSnapshot()
    started = time.perf_counter()

    async def run_one(question: EvalQuestion) -> QuestionRun:
        if options.method == "bm25" or judge is None:
            run = await _bm25_question(index, question, options.config)
        else:
            run = await _sag2_question(
                index,
                judge,
                question,
                _question_config(options, budgets, question),
                keep_retrieval=options.keep_retrievals,
            )
        if on_question is not None:
            on_question(run)
        return run

    runs = await bounded_map(run_one, questions, options.concurrency)
    usage = (judge.usage.snapshot() - usage_before) if judge is not None else UsageSnapshot()
    return EvalRun(
        options,
        judge.identity if judge is not None and options.method == "sag2" else None,
        tuple(runs),
        usage,
        time.perf_counter() - started,
    )


async def bounded_map(
    function: Callable[[T], Awaitable[R]], items: Sequence[T], limit: int
) -> list[R]:
    """Apply an async function to every item with at most ``limit`` calls in flight.

    Results keep the items' order. The first failure cancels the calls still running and is
    raised, so a broken judge stops an evaluation at once.
    """
    results: dict[int, R] = {}
    pending: Iterator[tuple[int, T]] = iter(enumerate(items))

    async def worker() -> None:
        for position, item in pending:
            results[position] = await function(item)

    workers = [asyncio.ensure_future(worker()) for _ in range(min(limit, len(items)))]
    try:
        done, _ = await asyncio.wait(workers, return_when=asyncio.FIRST_EXCEPTION)
        for task in done:
            task.result()
    finally:
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
    return [results[position] for position in range(len(items))]


def read_budgets(path: str | Path) -> dict[str, int]:
    """Per-question judgment counts (question id -> judgments) of an earlier SAG2 report."""
    report = read_report(path)
    if report.get("method") != "sag2":
        raise InvalidInputError(
            f"{path}: a matched budget must come from a 'sag2' run, not {report.get('method')!r}"
        )
    budgets: dict[str, int] = {}
    for row in report["per_question"]:
        judgments = row.get("judgments") if isinstance(row, Mapping) else None
        if isinstance(judgments, bool) or not isinstance(judgments, int) or judgments < 0:
            raise InvalidInputError(f"{path}: a per_question entry lacks a `judgments` count")
        budgets[str(row["id"])] = judgments
    return budgets


def read_report(path: str | Path) -> dict[str, Any]:
    """An evaluation report written by ``sag2 eval --out``, checked to hold per-question rows."""
    if not Path(path).is_file():
        raise InvalidInputError(f"report {str(path)!r} does not exist")
    report = read_json(Path(path), "write reports with `sag2 eval ... --out FILE.json`")
    rows = report.get("per_question") if isinstance(report, dict) else None
    if not isinstance(rows, list) or not all(isinstance(r, dict) and "id" in r for r in rows):
        raise InvalidInputError(
            f"{path}: has no `per_question` list with question ids; "
            "write reports with `sag2 eval ... --out FILE.json`"
        )
    checked: dict[str, Any] = report
    return checked


def compare_reports(
    a: Mapping[str, Any], b: Mapping[str, Any], metrics: Sequence[str] = COMPARED_METRICS
) -> tuple[int, list[MetricComparison]]:
    """Paired comparison on the questions both reports hold (matched by id).

    Returns the number of shared questions and, per metric, the means, B - A and its paired
    percentile bootstrap interval (2,000 resamples, the paper's seed), all in points.
    """
    rows_a = {str(row["id"]): row for row in a["per_question"]}
    rows_b = {str(row["id"]): row for row in b["per_question"]}
    shared = [question_id for question_id in rows_a if question_id in rows_b]
    if not shared:
        raise InvalidInputError("the two reports have no question id in common")
    comparisons = []
    for metric in metrics:
        values_a = [_metric_value(rows_a[q], metric) for q in shared]
        values_b = [_metric_value(rows_b[q], metric) for q in shared]
        interval = paired_bootstrap(
            values_a, values_b, resamples=BOOTSTRAP_RESAMPLES, seed=PAPER_SEED
        )
        comparisons.append(
            MetricComparison(
                metric,
                100.0 * sum(values_a) / len(shared),
                100.0 * sum(values_b) / len(shared),
                100.0 * interval.mean_difference,
                100.0 * interval.low,
                100.0 * interval.high,
            )
        )
    return len(shared), comparisons


def _metric_value(row: Mapping[str, Any], metric: str) -> float:
    """A per-question metric (a fraction), or an error naming the question and metric."""
    value = row.get(metric)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidInputError(f"question {row['id']!r} has no numeric {metric!r} value")
    return float(value)


def _checked_budgets(
    budgets: Mapping[str, int] | None, questions: Sequence[EvalQuestion]
) -> Mapping[str, int] | None:
    """The budgets, after checking that every question has one."""
    if budgets is None:
        return None
    missing = [question.id for question in questions if question.id not in budgets]
    if missing:
        raise InvalidInputError(
            f"the matched-budget file has no judgment count for {len(missing)} question(s), "
            f"e.g. {missing[0]!r}; run the sag2 evaluation on the same questions first"
        )
    return budgets


def _question_config(
    options: EvalOptions, budgets: Mapping[str, int] | None, question: EvalQuestion
) -> SAG2Config:
    """The question's configuration: its own one-shot budget in a matched-budget run.

    A question that took no judgments under SAG2 had no lexical match, so a one-shot pool
    of one judges nothing either; the budget floor of 1 keeps the configuration valid.
    """
    if budgets is None:
        return options.config
    return options.config.with_changes(one_shot_budget=max(1, budgets[question.id]))


async def _sag2_question(
    index: DocumentIndex,
    judge: Judge,
    question: EvalQuestion,
    config: SAG2Config,
    *,
    keep_retrieval: bool = False,
) -> QuestionRun:
    """Retrieve with SAG2 and resolve the hits' identities."""
    started = time.perf_counter()
    engine = SAG2Engine(index, judge, config)
    result = await engine.aretrieve(question.question, top_k=DEPTH)
    hits = [(hit.doc_id, hit.title, hit.score, hit.round_found) for hit in result.hits]
    sources = await asyncio.to_thread(_resolve_sources, index, hits)
    pool = await asyncio.to_thread(
        round_pools,
        result.trace,
        lambda units: _unit_identities(index, units),
        question.gold,
        [source.identity for source in sources],
    )
    return QuestionRun(
        question,
        sources,
        result.judgments,
        time.perf_counter() - started,
        result.degraded,
        retrieval=result if keep_retrieval else None,
        pool=tuple(pool),
    )


async def _bm25_question(
    index: DocumentIndex, question: EvalQuestion, config: SAG2Config
) -> QuestionRun:
    """Rank by BM25 alone (no judge), keeping each source document's first unit."""
    started = time.perf_counter()

    def search() -> tuple[tuple[RankedSource, ...], RoundPool]:
        found = index.search(
            question.question,
            limit=config.candidates_per_round,
            max_tokens=config.max_query_tokens,
        )
        first_units: dict[str, SearchHit] = {}
        for hit in found:
            first_units.setdefault(hit.doc_id, hit)
        candidates = _resolve_sources(
            index, [(h.doc_id, h.title, h.score, 0) for h in first_units.values()]
        )
        identities = [source.identity for source in candidates]
        return candidates[:DEPTH], lexical_pool(identities, question.gold, identities)

    sources, pool = await asyncio.to_thread(search)
    return QuestionRun(question, sources, 0, time.perf_counter() - started, pool=(pool,))


def _resolve_sources(
    index: DocumentIndex, hits: Sequence[tuple[str, str, float, int]]
) -> tuple[RankedSource, ...]:
    """Attach each hit's identity string, read from the stored source document."""
    sources = []
    for doc_id, title, score, round_found in hits:
        document = index.document(doc_id)
        if document is not None:  # None only if deleted while the question ran
            identity = f"{document.title}\n{document.text}"
            sources.append(RankedSource(doc_id, identity, title, score, round_found))
    return tuple(sources)


def _unit_identities(index: DocumentIndex, unit_ids: Iterable[int]) -> dict[int, str]:
    """The source identity (title, newline, text) of each unit still in the index."""
    units = index.units(unit_ids)
    documents = {doc_id: index.document(doc_id) for doc_id in {u.doc_id for u in units.values()}}
    return {
        unit_id: f"{document.title}\n{document.text}"
        for unit_id, unit in units.items()
        if (document := documents[unit.doc_id]) is not None
    }


def _question_json(run: QuestionRun, budgets: Mapping[str, int] | None) -> dict[str, Any]:
    """One question's row: id, hops, gold count, judgments, metrics and first doc ids."""
    row: dict[str, Any] = {
        "id": run.question.id,
        "hops": run.question.hops,
        "gold_count": len(run.question.gold),
        "judgments": run.judgments,
    }
    if budgets is not None:
        row["budget"] = budgets[run.question.id]
    row.update(run.metrics)
    row["pool"] = [entry.to_json() for entry in run.pool]
    row["retrieved"] = [source.doc_id for source in run.sources[:REPORTED_DOC_IDS]]
    row["seconds"] = run.seconds
    row["degraded"] = run.degraded
    return row
