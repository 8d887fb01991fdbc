"""PostgreSQL against SQLite as the corpus grows: build time, size, per-question local time.

Run from the repository root::

    python benchmarks/postgres_scale.py --sizes 10000 100000 [--dsn DSN] [--questions 50]

Both backends index the same corpus (`scale.corpus_batches`: the shared MuSiQue corpora
topped up with synthetic passages) in one run, side by side, and answer the same KAG dev
questions with the instant judge ``--judge`` names (`_judges.py`; replay records on SQLite
and replays on both, so PostgreSQL must take the same trajectory); local time is wall time
minus judge time. Without ``--dsn``
a throw-away PostgreSQL server is started on 127.0.0.1 (the tests' helper) and stopped.
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
from _judges import JUDGES, bench_judge
from scale import corpus_batches, file_bytes

from sag2_retrievers import Document, DocumentIndex, SAG2Engine, SQLiteIndex
from sag2_retrievers.backends.postgres import PostgresIndex
from sag2_retrievers.eval import load_questions
from sag2_retrievers.judges.base import Judge

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


def local_ms(
    index: DocumentIndex, questions: Sequence[str], judge: str, recording: Path
) -> tuple[float, float]:
    """Median and p95 local milliseconds per question (wall minus judge)."""

    def make_engine(inner: Judge) -> SAG2Engine:
        return SAG2Engine(index, inner)

    engine = make_engine(bench_judge(judge, make_engine, questions, recording))
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
    parser.add_argument("--judge", choices=JUDGES, default="overlap")
    parser.add_argument("--dsn", help="an existing PostgreSQL server (default: start one)")
    args = parser.parse_args(argv)
    questions = [q.question for q in load_questions(KAG_QUESTIONS)][: args.questions]
    print(f"Run {date.today()} on {machine()}, commit {git_revision()}, judge {args.judge}.\n")
    print(
        "| passages | backend | build s | MiB on disk | local ms median | local ms p95 |\n"
        "|---:|---|---:|---:|---:|---:|"
    )
    with server_dsn(args.dsn) as dsn, tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes:
            path = Path(tmp) / f"scale-{size}.db"
            lite = SQLiteIndex(path)
            pg = PostgresIndex(dsn, schema=f"scale_{uuid.uuid4().hex[:8]}")
            for name, index in (("SQLite", lite), ("PostgreSQL", pg)):
                seconds = build(index, size)
                size_bytes = file_bytes(path) if index is lite else pg.stats()["bytes"]
                recording = Path(tmp) / f"replay-{size}.json"
                median, p95 = local_ms(index, questions, args.judge, recording)
                print(
                    f"| {size:,} | {name} | {seconds:.1f} | {size_bytes / 2**20:,.0f} "
                    f"| {median:.1f} | {p95:.1f} |",
                    flush=True,
                )
                index.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
