"""PostgreSQL against SQLite as the corpus grows: build time, size, per-question local time.

Run from the repository root::

    python benchmarks/faults_scale/postgres_scale.py --sizes 100000 500000 \
        [--dsn DSN] [--questions 50]

Both backends index the same corpus (`scale.corpus_batches`: the shared MuSiQue corpora
topped up with synthetic passages) in one run, side by side, and answer the same KAG dev
questions with the instant judge ``--judge`` names (`_judges.py`; replay records on SQLite
and replays on both, so PostgreSQL must take the same trajectory), taking turns question by
question; local time is wall time minus judge time. Peak client RSS is this process and its
analysis workers during one backend's build (the server's memory is not counted). Last,
each question's BM25 top 100 is compared between the backends, ids and scores. Without
``--dsn`` a throw-away PostgreSQL server is started on 127.0.0.1 (the tests' helper) and stopped.
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

import _here  # noqa: F401 - puts benchmarks/ on the import path
from _common import KAG_QUESTIONS, git_revision, machine
from _judges import JUDGES, bench_judge
from scale import corpus_batches, file_bytes, peak_rss

from sag2_retrievers import Document, DocumentIndex, SAG2Engine, SQLiteIndex
from sag2_retrievers.backends.postgres import PostgresIndex
from sag2_retrievers.eval import load_questions
from sag2_retrievers.judges.base import Judge

sys.path.insert(0, str(Path(__file__).parents[2]))
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
    indexes: dict[str, DocumentIndex], questions: Sequence[str], judge: str, recording: Path
) -> dict[str, list[float]]:
    """Per backend, local milliseconds per question (wall minus judge), sorted; the backends
    take turns question by question (first one, then the other), so a change in the
    machine's load falls on both alike. Replay records on the first backend."""
    engines = {name: _engine(index, judge, questions, recording) for name, index in indexes.items()}
    for engine in engines.values():
        engine.retrieve(questions[0])  # warm caches and the loop thread
    local: dict[str, list[float]] = {name: [] for name in engines}
    for turn, question in enumerate(questions):
        order = list(engines) if turn % 2 == 0 else list(reversed(engines))
        for name in order:
            started = time.perf_counter()
            result = engines[name].retrieve(question, 10)
            wall = time.perf_counter() - started
            local[name].append(1000 * (wall - sum(r.judge_seconds for r in result.trace)))
    for engine in engines.values():
        engine.close()
    return {name: sorted(times) for name, times in local.items()}


def _engine(
    index: DocumentIndex, judge: str, questions: Sequence[str], recording: Path
) -> SAG2Engine:
    """An engine over ``index`` with the benchmark judge called ``judge``."""

    def make_engine(inner: Judge) -> SAG2Engine:
        return SAG2Engine(index, inner)

    return make_engine(bench_judge(judge, make_engine, questions, recording))


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
        "| passages | backend | build s | MiB on disk | local ms median | local ms p95 "
        "| peak build RSS MiB |\n|---:|---|---:|---:|---:|---:|---:|"
    )
    with server_dsn(args.dsn) as dsn, tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes:
            path = Path(tmp) / f"scale-{size}.db"
            with peak_rss() as lite_peak, SQLiteIndex(path) as lite:
                lite_seconds = build(lite, size)
            pg = PostgresIndex(dsn, schema=f"scale_{uuid.uuid4().hex[:8]}")
            with peak_rss() as pg_peak:
                pg_seconds = build(pg, size)
            built = {
                "SQLite": (lite_seconds, file_bytes(path), lite_peak[0]),
                "PostgreSQL": (pg_seconds, pg.stats()["bytes"], pg_peak[0]),
            }
            with SQLiteIndex(path, create=False) as lite:
                indexes: dict[str, DocumentIndex] = {"SQLite": lite, "PostgreSQL": pg}
                recording = Path(tmp) / f"replay-{size}.json"
                local = local_ms(indexes, questions, args.judge, recording)
                same = identical_rankings(lite, pg, questions)
            pg.close()
            for name, (seconds, size_bytes, rss) in built.items():
                times = local[name]
                p95 = times[int(0.95 * (len(times) - 1))]
                print(
                    f"| {size:,} | {name} | {seconds:.1f} | {size_bytes / 2**20:,.0f} "
                    f"| {statistics.median(times):.1f} | {p95:.1f} | {rss / 2**20:,.0f} |",
                    flush=True,
                )
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
