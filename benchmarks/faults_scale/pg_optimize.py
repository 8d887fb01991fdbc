"""PostgreSQL's optimize(): peak client memory and BM25 time, bounded merge against one merge.

Run from the repository root::

    python benchmarks/faults_scale/pg_optimize.py --size 200000 [--dsn DSN] [--questions 50]

One index of ``--size`` passages (`scale.corpus_batches`) is built in each of two schemas.
Each schema's ``optimize()`` runs in its own fresh process, whose peak resident set
(``VmHWM``) is read when it ends: one with the shipped bound (`compaction.MAX_MERGED_UNITS`),
one with the bound raised above the index's size, which merges every segment at once as
optimize() did before the bound. Then both answer the same KAG questions' BM25 top 100
(`rank_expression`), taking turns question by question, and the lists are compared. Without
``--dsn`` a throw-away server is started on 127.0.0.1 (the tests' helper) and stopped.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
import uuid
from datetime import date
from pathlib import Path

import _here  # noqa: F401 - puts benchmarks/ on the import path
from _common import KAG_QUESTIONS, git_revision, machine
from postgres_scale import build

from sag2_retrievers.backends.postgres import PostgresIndex, compaction
from sag2_retrievers.eval import load_questions

sys.path.insert(0, str(Path(__file__).parents[2]))
from tests.postgres_server import server_dsn

# Runs in a child process: optimize one schema under a bound, print the process's peak RSS.
_OPTIMIZE = """
import sys
from sag2_retrievers.backends.postgres import PostgresIndex, compaction
compaction.MAX_MERGED_UNITS = int(sys.argv[3])
with PostgresIndex(sys.argv[1], schema=sys.argv[2]) as index:
    index.optimize()
for line in open("/proc/self/status"):
    if line.startswith("VmHWM:"):
        print(int(line.split()[1]) // 1024)
"""


def optimize_in_child(dsn: str, schema: str, bound: int) -> tuple[float, int]:
    """Seconds and peak RSS (MiB) of optimize() in a fresh process under ``bound``."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", _OPTIMIZE, dsn, schema, str(bound)],
        check=True,
        capture_output=True,
        text=True,
    )
    return time.perf_counter() - started, int(done.stdout.split()[-1])


def segment_sizes(index: PostgresIndex) -> list[int]:
    """Units per segment, largest first."""
    rows = index._fetch(index._sql("SELECT length(units) / 8 FROM {s}.segments"))
    return sorted((int(units) for (units,) in rows), reverse=True)


def bm25_ms(indexes: dict[str, PostgresIndex], questions: list[str]) -> dict[str, list[float]]:
    """Milliseconds of each question's BM25 top 100 per index, the indexes taking turns."""
    times: dict[str, list[float]] = {name: [] for name in indexes}
    for turn, question in enumerate(questions):
        order = list(indexes) if turn % 2 == 0 else list(reversed(indexes))
        for name in order:
            index = indexes[name]
            started = time.perf_counter()
            index.rank_expression(index.query_terms(question), 100)
            times[name].append(1000 * (time.perf_counter() - started))
    return times


def main(argv: list[str] | None = None) -> int:
    """Build twice, optimize each way, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=200_000)
    parser.add_argument("--questions", type=int, default=50)
    parser.add_argument("--dsn", help="an existing PostgreSQL server (default: start one)")
    args = parser.parse_args(argv)
    questions = [q.question for q in load_questions(KAG_QUESTIONS)][: args.questions]
    bounds = {"bounded": compaction.MAX_MERGED_UNITS, "one merge": 10 * args.size + 1}
    print(f"Run {date.today()} on {machine()}, commit {git_revision()}, {args.size:,} passages.\n")
    with server_dsn(args.dsn) as dsn:
        indexes = {
            name: PostgresIndex(dsn, schema=f"opt_{uuid.uuid4().hex[:8]}") for name in bounds
        }
        rows = []
        for name, index in indexes.items():
            build(index, args.size)
            before = len(segment_sizes(index))
            seconds, peak = optimize_in_child(dsn, index.schema, bounds[name])
            sizes = segment_sizes(index)
            rows.append(
                f"| {name} | {before} | {len(sizes)} | {max(sizes):,} | {seconds:.1f} | {peak} |"
            )
        times = bm25_ms(indexes, questions)
        same = sum(
            indexes["bounded"].rank_expression(indexes["bounded"].query_terms(q), 100)
            == indexes["one merge"].rank_expression(indexes["one merge"].query_terms(q), 100)
            for q in questions
        )
        for index in indexes.values():
            index.close()
    print(
        "| optimize | segments before | after | largest (units) | s | peak RSS MiB "
        "| BM25 ms median |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for row, name in zip(rows, bounds, strict=True):
        print(f"{row} {statistics.median(times[name]):.1f} |")
    print(f"\nBM25 top 100 identical (ids and scores) for {same} of {len(questions)} questions")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
