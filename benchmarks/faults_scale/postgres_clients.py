"""Many client processes, one index: throughput and p95 for PostgreSQL beside one SQLite file.

Run from the repository root::

    python benchmarks/faults_scale/postgres_clients.py --size 100000 --clients 1 2 4 8 [--dsn DSN]

The corpus (`scale.corpus_batches`) is built once into a SQLite file and a PostgreSQL
schema. Then, per client count and backend, that many processes (spawned, sharing nothing
but the index) each open their own index (one `PostgresIndex`, so one connection, per
process), answer as many other questions to warm up, wait at a barrier, and answer the
same questions with SAG2 and an instant judge.
Throughput is all questions answered over the wall time from the barrier to the last
answer; p95 is over every question's wall time. Without ``--dsn`` a throw-away PostgreSQL
server is started on 127.0.0.1 (the tests' helper) and stopped.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from datetime import date
from pathlib import Path
from typing import Any

import _here  # noqa: F401 - puts benchmarks/ on the import path
from _common import TRAIN_QUESTIONS, git_revision, machine
from _judges import instant_score
from postgres_scale import build

from sag2_retrievers import DocumentIndex, SAG2Engine, SQLiteIndex
from sag2_retrievers.backends.postgres import PostgresIndex
from sag2_retrievers.eval import load_questions
from sag2_retrievers.judges.fakes import ScriptedJudge

sys.path.insert(0, str(Path(__file__).parents[2]))
from tests.postgres_server import server_dsn

SPAWN = multiprocessing.get_context("spawn")


def open_index(where: tuple[str, str]) -> DocumentIndex:
    """The index a client opens: ("sqlite", path) or ("postgres", "dsn|schema")."""
    kind, target = where
    if kind == "sqlite":
        return SQLiteIndex(target, create=False)
    dsn, schema = target.rsplit("|", 1)
    return PostgresIndex(dsn, schema=schema, create=False)


def client(
    where: tuple[str, str],
    questions: Sequence[str],
    warm_up: Sequence[str],
    start: Any,
    results: Any,
) -> None:
    """One client process: open the index, answer the ``warm_up`` questions (other ones, so
    the one-time costs of a process, such as SQLite's title catalogue, fall before the
    barrier without caching the measured questions), wait at the barrier, answer, report."""
    index = open_index(where)
    engine = SAG2Engine(index, ScriptedJudge(instant_score))
    for question in warm_up:
        engine.retrieve(question)
    start.wait()
    seconds = []
    for question in questions:
        started = time.perf_counter()
        engine.retrieve(question, 10)
        seconds.append(time.perf_counter() - started)
    results.put((time.perf_counter(), seconds))
    engine.close()
    index.close()


def run_clients(
    where: tuple[str, str], clients: int, questions: Sequence[str], warm_up: Sequence[str]
) -> tuple[float, float]:
    """Questions per second over all clients, and the p95 of a question's wall ms."""
    start, results = SPAWN.Barrier(clients + 1), SPAWN.Queue()
    processes = [
        SPAWN.Process(target=client, args=(where, questions, warm_up, start, results))
        for _ in range(clients)
    ]
    for process in processes:
        process.start()
    start.wait()
    began = time.perf_counter()
    reports = [results.get() for _ in processes]
    for process in processes:
        process.join()
    wall = max(finished for finished, _ in reports) - began
    latencies = sorted(1000 * s for _, seconds in reports for s in seconds)
    return len(latencies) / wall, latencies[int(0.95 * (len(latencies) - 1))]


def main(argv: list[str] | None = None) -> int:
    """Build both indexes, run each client count on each backend, print Markdown rows."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--questions", type=int, default=20, help="per client")
    parser.add_argument("--dsn", help="an existing PostgreSQL server (default: start one)")
    args = parser.parse_args(argv)
    asked = [q.question for q in load_questions(TRAIN_QUESTIONS)]
    questions, warm_up = asked[: args.questions], asked[args.questions : 2 * args.questions]
    print(f"Run {date.today()} on {machine()}, commit {git_revision()}.\n")
    with server_dsn(args.dsn) as dsn, tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "clients.db"
        schema = f"clients_{uuid.uuid4().hex[:8]}"
        with SQLiteIndex(path) as lite, PostgresIndex(dsn, schema=schema) as pg:
            for index in (lite, pg):
                build(index, args.size)
        targets = {"SQLite": ("sqlite", str(path)), "PostgreSQL": ("postgres", f"{dsn}|{schema}")}
        print(
            f"{args.size:,} passages, {len(questions)} questions per client.\n\n"
            "| clients | backend | questions/s | vs 1 client | p95 ms |\n|---:|---|---:|---:|---:|"
        )
        single: dict[str, float] = {}
        for clients in args.clients:
            for name, where in targets.items():
                rate, p95 = run_clients(where, clients, questions, warm_up)
                single.setdefault(name, rate)
                print(
                    f"| {clients} | {name} | {rate:.1f} | {rate / single[name]:.2f}x | {p95:.1f} |",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
