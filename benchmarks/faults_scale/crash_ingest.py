"""Kill a writer with SIGKILL in the middle of an add, delete or upsert run, over and over.

Run from the repository root:
``python benchmarks/faults_scale/crash_ingest.py [--trials 5]`` (trials per operation).
Each trial starts a writer process that changes the index batch by batch (one transaction
per batch) and reports each committed batch on a pipe; the parent kills it at a
random moment, then checks:

- the file passes ``PRAGMA integrity_check`` and the FTS5 integrity check;
- ``add``: every batch is complete or absent, and every reported batch is present;
- ``delete`` (of a prebuilt index): every batch is complete or gone, and every reported one
  is gone; ``upsert`` (replacing a prebuilt index's documents): every batch is all old or all
  new text, and every reported one is new;
- at most one batch changed beyond those reported (committed just before the kill);
- the writer's analysis worker processes (add and upsert batches are large enough to use
  them) exit after the kill: none is left after 10 s.
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
from dataclasses import dataclass
from datetime import date
from multiprocessing.connection import Connection
from pathlib import Path

import _here  # noqa: F401 - puts benchmarks/ on the import path
from _common import git_revision, machine

from sag2_retrievers import Document, SQLiteIndex

BATCHES, BATCH_SIZE, WORDS_PER_DOC = 30, 400, 160  # ~520k characters a batch: parallel path
# Kill windows (seconds after start) that land inside each operation's run on 2 cores.
OPERATIONS = {"add": (2.0, 8.0), "delete": (1.0, 3.0), "upsert": (2.0, 8.0)}
WORKER_GRACE_SECONDS = 10.0


def batch_documents(batch: int, version: str) -> list[Document]:
    """Batch ``batch`` of synthetic passages; ``version`` marks the text (old or new)."""
    rng = random.Random(batch)
    words = [f"word{n}" for n in range(3000)]
    return [
        Document(
            f"b{batch}-{n}",
            f"{version} batch{batch} " + " ".join(rng.sample(words, WORDS_PER_DOC)),
        )
        for n in range(BATCH_SIZE)
    ]


def writer(path: str, operation: str, pipe: Connection) -> None:
    """Run one operation batch by batch, reporting worker pids and then each commit."""
    index = SQLiteIndex(path)
    if operation == "delete":
        pipe.send(("workers", []))
        for batch in range(BATCHES):
            index.delete([f"b{batch}-{n}" for n in range(BATCH_SIZE)])
            pipe.send(("committed", batch))
        return
    # Start the pool's workers now, so the parent knows every pid before the kill.
    pool = index._analysis_executor()
    list(pool.map(abs, range(16)))
    pipe.send(("workers", [child.pid for child in multiprocessing.active_children()]))
    version = "old" if operation == "add" else "new"
    committed = iter(range(BATCHES))
    index.ingest(
        (batch_documents(batch, version) for batch in range(BATCHES)),
        parallel=True,
        on_batch=lambda _: pipe.send(("committed", next(committed))),
    )


def build_template(path: Path) -> None:
    """The prebuilt index that delete and upsert trials start from (all batches, old text)."""
    with SQLiteIndex(path) as index:
        index.ingest((batch_documents(b, "old") for b in range(BATCHES)), parallel=True)


def copy_file(source: Path, target: Path) -> None:
    """A consistent copy of an index file (online backup)."""
    with sqlite3.connect(source) as origin, sqlite3.connect(target) as copy:
        origin.backup(copy)
    origin.close()
    copy.close()


def alive(pid: int) -> bool:
    """Whether a process exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return "\nState:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True


@dataclass
class Outcome:
    """What one killed trial left behind."""

    reported: int
    changed: int
    healthy: bool
    exact: bool
    workers: int
    leftover: int
    workers_gone_s: float


def trial(path: Path, operation: str, delay: float) -> Outcome:
    """Start the writer, kill it after ``delay`` seconds, and inspect file and processes."""
    receive, send = multiprocessing.Pipe(duplex=False)
    process = multiprocessing.get_context("spawn").Process(
        target=writer, args=(str(path), operation, send)
    )
    process.start()
    time.sleep(delay)
    os.kill(process.pid, signal.SIGKILL)
    process.join()
    killed_at = time.monotonic()
    reported: list[int] = []
    workers: list[int] = []
    while receive.poll():
        kind, value = receive.recv()
        if kind == "workers":
            workers = value
        else:
            reported.append(value)
    while (
        any(alive(pid) for pid in workers) and time.monotonic() - killed_at < WORKER_GRACE_SECONDS
    ):
        time.sleep(0.05)
    gone_s = time.monotonic() - killed_at
    leftover = [pid for pid in workers if alive(pid)]
    for pid in leftover:  # the benchmark's own strays: end them by pid, after counting them
        os.kill(pid, signal.SIGKILL)
    healthy, changed, exact = inspect(path, operation, set(reported))
    return Outcome(len(reported), changed, healthy, exact, len(workers), len(leftover), gone_s)


def inspect(path: Path, operation: str, reported: set[int]) -> tuple[bool, int, bool]:
    """Integrity, the number of batches changed, and whether every batch is whole and agrees
    with the reports."""
    connection = sqlite3.connect(path)
    healthy = connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    try:
        connection.execute("INSERT INTO units_fts(units_fts) VALUES ('integrity-check')")
    except sqlite3.DatabaseError:
        healthy = False
    rows = connection.execute(
        "SELECT substr(doc_id, 2, instr(doc_id, '-') - 2), substr(text, 1, 3), count(*) "
        "FROM documents GROUP BY 1, 2"
    ).fetchall()
    connection.close()
    by_batch: dict[int, dict[str, int]] = {}
    for batch, version, count in rows:
        by_batch.setdefault(int(batch), {})[version] = count
    whole = all(len(v) == 1 and sum(v.values()) == BATCH_SIZE for v in by_batch.values())
    if operation == "add":
        changed = set(by_batch)
    elif operation == "delete":
        changed = set(range(BATCHES)) - set(by_batch)
    else:
        changed = {batch for batch, versions in by_batch.items() if "new" in versions}
        whole = whole and set(by_batch) == set(range(BATCHES))
    exact = whole and reported <= changed and len(changed) - len(reported) <= 1
    return healthy, len(changed), exact


def main(argv: list[str] | None = None) -> int:
    """Run the trials and print a Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=5, help="trials per operation")
    args = parser.parse_args(argv)
    rng = random.Random(20261201)
    print(f"Run {date.today()} on {machine()}, commit {git_revision()}.\n")
    print(
        "| operation | trial | kill after s | batches reported | batches changed | integrity "
        "| exact | workers | left after kill | workers gone after s |"
    )
    print("|---|---:|---:|---:|---:|---|---|---:|---:|---:|")
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        template = Path(tmp) / "template.sqlite"
        build_template(template)
        for operation, (earliest, latest) in OPERATIONS.items():
            for number in range(1, args.trials + 1):
                path = Path(tmp) / f"{operation}-{number}.sqlite"
                if operation != "add":
                    copy_file(template, path)
                delay = rng.uniform(earliest, latest)
                outcome = trial(path, operation, delay)
                failures += not (outcome.healthy and outcome.exact and not outcome.leftover)
                print(
                    f"| {operation} | {number} | {delay:.2f} | {outcome.reported} "
                    f"| {outcome.changed} | {outcome.healthy} | {outcome.exact} "
                    f"| {outcome.workers} | {outcome.leftover} | {outcome.workers_gone_s:.2f} |",
                    flush=True,
                )
                path.unlink()
    print(f"\nAll checks passed: {failures == 0}.")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
