"""Kill a writer with SIGKILL in the middle of a large ingest, over and over, and check the file.

Run from the repository root: ``python benchmarks/crash_ingest.py [--trials 10]``.
Each trial starts a writer process that ingests batches of synthetic passages (one
transaction per batch) and reports each committed batch on a pipe; the parent kills it at a
random moment, then opens the file, runs ``PRAGMA integrity_check`` and the FTS5 integrity
check, and counts the batches present. A batch is present only if it is complete, and every
batch reported as committed must be present.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import signal
import sqlite3
import sys
import tempfile
import time
from datetime import date
from multiprocessing.connection import Connection
from pathlib import Path

from _common import git_revision, machine

from sag2_retrievers import Document, SQLiteIndex

BATCHES, BATCH_SIZE = 60, 400


def writer(path: str, pipe: Connection) -> None:
    """Ingest batches, sending each batch number after its commit."""
    rng = random.Random(7)
    words = [f"word{n}" for n in range(3000)]
    index = SQLiteIndex(path)

    def batches():  # type: ignore[no-untyped-def]
        for batch in range(BATCHES):
            yield [
                Document(f"b{batch}-{n}", f"batch{batch} " + " ".join(rng.sample(words, 80)))
                for n in range(BATCH_SIZE)
            ]

    committed = iter(range(BATCHES))
    index.ingest(batches(), parallel=False, on_batch=lambda _: pipe.send(next(committed)))
    pipe.send("done")


def trial(path: Path, delay: float) -> tuple[int, int, bool, bool]:
    """One kill: batches reported committed, batches found complete, integrity ok, no torn batch."""
    receive, send = multiprocessing.Pipe(duplex=False)
    process = multiprocessing.get_context("spawn").Process(target=writer, args=(str(path), send))
    process.start()
    time.sleep(delay)
    os.kill(process.pid, signal.SIGKILL)
    process.join()
    reported = []
    while receive.poll():
        message = receive.recv()
        if message != "done":
            reported.append(message)
    connection = sqlite3.connect(path)
    healthy = connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    try:
        connection.execute("INSERT INTO units_fts(units_fts) VALUES ('integrity-check')")
    except sqlite3.DatabaseError:
        healthy = False
    counts = connection.execute(
        "SELECT substr(doc_id, 1, instr(doc_id, '-') - 1), count(*) FROM documents GROUP BY 1"
    ).fetchall()
    connection.close()
    whole = all(count == BATCH_SIZE for _, count in counts)
    present = {int(batch[1:]) for batch, _ in counts}
    exact = whole and set(reported) <= present and len(present) - len(reported) <= 1
    return len(reported), len(present), healthy, exact


def main(argv: list[str] | None = None) -> int:
    """Run the trials and print a Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=10)
    args = parser.parse_args(argv)
    rng = random.Random(20261130)
    print(f"Run {date.today()} on {machine()}, commit {git_revision()}.\n")
    print(
        "| trial | kill after s | batches reported committed | batches present "
        "| integrity | exact |"
    )
    print("|---:|---:|---:|---:|---|---|")
    failures = 0
    for number in range(1, args.trials + 1):
        with tempfile.TemporaryDirectory() as tmp:
            delay = rng.uniform(1.0, 5.0)
            reported, present, healthy, exact = trial(Path(tmp) / "crash.sqlite", delay)
            failures += not (healthy and exact)
            print(f"| {number} | {delay:.2f} | {reported} | {present} | {healthy} | {exact} |")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
