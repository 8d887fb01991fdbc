"""PostgreSQL against SQLite as the corpus grows: build time, size, per-question local time.

Run from the repository root::

    python benchmarks/postgres_scale.py --sizes 100000 500000 [--dsn DSN] [--questions 50]

Both backends index the same corpus (`scale.corpus_batches`: the shared MuSiQue corpora
topped up with synthetic passages) in one run, side by side, and answer the same KAG dev
questions with an instant judge; local time is wall time minus judge time. Peak client RSS
is this process and its analysis workers during one backend's build and questions (the
server's memory is not counted). Last, each question's BM25 top 100 is compared between the
backends, ids and scores. Without ``--dsn`` a throw-away PostgreSQL server is started on
127.0.0.1 (the tests' helper) and stopped.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from datetime import date
from pathlib import Path

from _common import KAG_QUESTIONS, git_revision, machine
from scale import corpus_batches, file_bytes, instant_score, peak_rss

from sag2_retrievers import Document, DocumentIndex, SAG2Engine, SQLiteIndex
from sag2_retrievers.backends.postgres import PostgresIndex
from sag2_retrievers.eval import load_questions
from sag2_retrievers.judges.fake import ScriptedJudge

sys.path.insert(0, str(Path(__file__).parents[1]))
from tests.postgres_server import server_dsn


def build(index: DocumentIndex, size: int) -> float:
    """Seconds to ingest the corpus of ``size`` passages into ``index``."""
    batches = (
        [Document(p.doc_id, p.text, p.title) for p in batch] for batch in corpus_batches(size)
    )
    started = time.perf_counter()
    index.ingest(batches)
    return time.perf_counter() - started


def local_ms(index: DocumentIndex, questions: Sequence[str]) -> tuple[float, float]:
    """Median and p95 local milliseconds per question (wall minus judge)."""
    engine = SAG2Engine(index, ScriptedJudge(instant_score))
    engine.retrieve(questions[0])  # warm caches and the loop thread
    local = []
    for question in questions:
        started = time.perf_counter()
        result = engine.retrieve(question, 10)
        wall = time.perf_counter() - started
        local.append(1000 * (wall - sum(r.judge_seconds for r in result.trace)))
    engine.close()
    local.sort()
    return statistics.median(local), local[int(0.95 * (len(local) - 1))]


def main(argv: list[str] | None = None) -> int:
    """Measure each size on both backends and print Markdown rows."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--questions", type=int, default=50)
    parser.add_argument("--dsn", help="an existing PostgreSQL server (default: start one)")
    args = parser.parse_args(argv)
    questions = [q.question for q in load_questions(KAG_QUESTIONS)][: args.questions]
    print(f"Run {date.today()} on {machine()}, commit {git_revision()}.\n")
    print(
        "| passages | backend | build s | MiB on disk | local ms median | local ms p95 "
        "| peak client RSS MiB |\n|---:|---|---:|---:|---:|---:|---:|"
    )
    with server_dsn(args.dsn) as dsn, tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes:
            path = Path(tmp) / f"scale-{size}.db"
            lite = SQLiteIndex(path)
            pg = PostgresIndex(dsn, schema=f"scale_{uuid.uuid4().hex[:8]}")
            for name, index in (("SQLite", lite), ("PostgreSQL", pg)):
                with peak_rss() as peak:
                    seconds = build(index, size)
                    size_bytes = file_bytes(path) if index is lite else pg.stats()["bytes"]
                    median, p95 = local_ms(index, questions)
                print(
                    f"| {size:,} | {name} | {seconds:.1f} | {size_bytes / 2**20:,.0f} "
                    f"| {median:.1f} | {p95:.1f} | {peak[0] / 2**20:,.0f} |",
                    flush=True,
                )
                if index is lite:
                    lite.close()
            with SQLiteIndex(path, create=False) as lite:
                same = identical_rankings(lite, pg, questions)
            pg.close()
            print(f"\n{size:,}: BM25 top 100 identical (ids and scores) for {same}\n")
    return 0


def identical_rankings(lite: SQLiteIndex, pg: PostgresIndex, questions: Sequence[str]) -> str:
    """How many questions get the very same BM25 top 100 (ids and scores) on both backends."""
    same = sum(
        lite.rank_expression(lite.query_terms(q), 100) == pg.rank_expression(pg.query_terms(q), 100)
        for q in questions
    )
    return f"{same} of {len(questions)} questions"


if __name__ == "__main__":
    raise SystemExit(main())
