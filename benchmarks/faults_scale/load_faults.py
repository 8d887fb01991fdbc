"""Concurrent questions through the JEV judge while the service throttles and fails at random.

Run from the repository root: ``python -m benchmarks.faults_scale.load_faults [--questions 20]``.
The corpus pools the paragraphs of the shared KAG MuSiQue questions. The questions are
retrieved at once (``asyncio.gather`` of ``aretrieve``) against the fault server of
``tests/fault_server.py`` on 127.0.0.1: first without faults, then with 10% 429 (retry-after)
and 5% 500/502/503, both with a random 5-50 ms latency per request. Every question must
complete, every result must equal the fault-free one, and the judge's cap on concurrent HTTP
requests must hold at the server. Prints a Markdown report; exits 1 if a check fails.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from benchmarks._common import KAG_QUESTIONS, git_revision, machine
from sag2_retrievers import Document, RetrievalResult, SAG2Engine, SQLiteIndex
from sag2_retrievers.eval import load_questions, pool_corpus
from sag2_retrievers.judges import JEVJudge
from tests.fault_server import Fault, FaultPlan, FaultServer

LATENCY = (0.005, 0.05)
RATE_LIMITED = 0.10
SERVER_ERRORS = 0.05
RETRY_LOGGER = "sag2_retrievers.judges.llm._http"


@dataclass(frozen=True)
class Run:
    """What one batch of concurrent questions did, seen from the client and the server."""

    name: str
    questions: int
    completed: int
    requests: int
    faults: int
    retries: int
    peak: int
    seconds: float
    signatures: list[Any]


class RetryCounter(logging.Handler):
    """Counts the judge's "retrying" log records: one per scheduled retry."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.retries = 0

    def emit(self, record: logging.LogRecord) -> None:
        """Count a record announcing a retry."""
        if "retrying in" in record.getMessage():
            self.retries += 1


def fault_plan(seed: int) -> FaultPlan:
    """10% rate limits with retry-after, 5% server errors split over 500/502/503."""
    errors = [(SERVER_ERRORS / 3, Fault("status", status)) for status in (500, 502, 503)]
    rate_limits = [(RATE_LIMITED, Fault("status", 429, retry_after="1"))]
    return FaultPlan(rates=rate_limits + errors, latency=LATENCY, seed=seed)


def signature(result: RetrievalResult) -> tuple[Any, ...]:
    """A retrieval's hits, unit ranking and trace, without timings."""
    trace = [(r.round, r.seeds, r.new_candidates, r.pool_size, r.judgments) for r in result.trace]
    units = [(u.unit_id, u.score) for u in result.units]
    return ([(h.doc_id, h.score) for h in result.hits], units, trace, result.stop_reason)


def build_index(path: Path) -> SQLiteIndex:
    """An index of every paragraph of the KAG MuSiQue questions, pooled and de-duplicated."""
    index = SQLiteIndex(path)
    passages = pool_corpus(load_questions(KAG_QUESTIONS))
    index.add_documents(Document(p.doc_id, p.text, p.title) for p in passages)
    return index


async def run_questions(
    name: str, index: SQLiteIndex, questions: Sequence[str], plan: FaultPlan, args: Any
) -> Run:
    """Retrieve every question at once against a server following the plan."""
    counter = RetryCounter()
    logging.getLogger(RETRY_LOGGER).addHandler(counter)
    with FaultServer(plan) as server:
        judge = JEVJudge(
            "benchmark-key",
            base_url=server.url,
            max_concurrency=args.cap,
            token_budget=args.token_budget,
            max_retry_wait=args.max_retry_wait,
        )
        engine = SAG2Engine(index, judge)
        started = time.perf_counter()
        outcomes = await asyncio.gather(
            *(engine.aretrieve(question) for question in questions), return_exceptions=True
        )
        seconds = time.perf_counter() - started
        await judge.aclose()
    logging.getLogger(RETRY_LOGGER).removeHandler(counter)
    results = [o for o in outcomes if isinstance(o, RetrievalResult)]
    for failure in (o for o in outcomes if not isinstance(o, RetrievalResult)):
        print(f"<!-- {name}: a question failed: {failure!r} -->", file=sys.stderr)
    stats = server.stats
    return Run(
        name,
        len(questions),
        len(results),
        stats.requests,
        stats.fault_count,
        counter.retries,
        stats.peak_in_flight,
        seconds,
        [signature(r) if isinstance(r, RetrievalResult) else None for r in outcomes],
    )


def report(runs: Sequence[Run], args: Any) -> bool:
    """Print the Markdown report; return whether every check passed."""
    clean, faulty = runs
    equal = faulty.signatures == clean.signatures
    passed = (
        all(run.completed == run.questions for run in runs)
        and equal
        and all(run.peak <= args.cap for run in runs)
        and faulty.retries == faulty.faults
    )
    print(f"Run {date.today()} on {machine()}, commit {git_revision()}.")
    command = " ".join(["python -m benchmarks.faults_scale.load_faults", *sys.argv[1:]])
    print(f"Command: `{command}`\n")
    print(
        f"JEV judge against tests/fault_server.py on 127.0.0.1: cap {args.cap} concurrent "
        f"requests, token budget {args.token_budget:,} per request, retry waits capped at "
        f"{args.max_retry_wait} s; latency {LATENCY[0] * 1000:.0f}-{LATENCY[1] * 1000:.0f} ms "
        f"per request; faults: {RATE_LIMITED:.0%} 429 (retry-after 1), {SERVER_ERRORS:.0%} "
        "500/502/503.\n"
    )
    print(
        "| run | questions | completed | requests | faults injected | retries "
        "| peak concurrency | wall time (s) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for run in runs:
        print(
            f"| {run.name} | {run.questions} | {run.completed} | {run.requests} | {run.faults} "
            f"| {run.retries} | {run.peak} | {run.seconds:.2f} |"
        )
    verdict = "equal" if equal else "DIFFERENT"
    print(f"\nResults with faults: {verdict} to the fault-free ones. All checks passed: {passed}.")
    return passed


async def measure(args: Any) -> bool:
    """Build the index, run the fault-free and the faulty batch, and report."""
    questions = [q.question for q in load_questions(KAG_QUESTIONS)[: args.questions]]
    with tempfile.TemporaryDirectory() as tmp:
        index = build_index(Path(tmp) / "load.sqlite")
        clean_plan, faulty_plan = FaultPlan(latency=LATENCY), fault_plan(args.seed)
        clean = await run_questions("fault-free", index, questions, clean_plan, args)
        faulty = await run_questions("with faults", index, questions, faulty_plan, args)
        index.close()
    return report([clean, faulty], args)


def main(argv: list[str] | None = None) -> int:
    """Parse options, measure, and print the report."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--questions", type=int, default=20)
    parser.add_argument("--cap", type=int, default=20, help="the judge's max_concurrency")
    parser.add_argument(
        "--token-budget",
        type=int,
        default=8_000,
        help="tokens per JEV request; below the 48,000 default so that every round needs "
        "several requests and the concurrency cap is contended",
    )
    parser.add_argument("--max-retry-wait", type=float, default=0.25)
    parser.add_argument("--seed", type=int, default=6)
    args = parser.parse_args(argv)
    logging.getLogger(RETRY_LOGGER).propagate = False
    return 0 if asyncio.run(measure(args)) else 1


if __name__ == "__main__":
    sys.exit(main())
