"""What a user runs: ``sag2 index corpus.json`` against a bare FTS5 insert, whole processes.

Run from the repository root::

    python benchmarks/speed/cli_index.py --size 100000 --workdir /tmp/sag2-cli [--repeats 3]

The corpus (`scale.corpus_batches`, written once as a JSON list of {id, title, text} into
``--workdir``) is indexed by the ``sag2`` command in a fresh process, and the same JSON rows
are inserted into a bare ``fts5(title, body)`` table by a fresh Python process that reads the
file the same way; each is timed from outside, start to exit, alternately, ``--repeats``
times. Prints the medians and their ratio.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

import _here  # noqa: F401 - puts benchmarks/ on the import path
from _common import git_revision, machine
from faults_scale.scale import corpus_batches


def write_corpus(size: int, path: Path) -> None:
    """The benchmark corpus as one JSON list (kept for later runs)."""
    records = [
        {"id": p.doc_id, "title": p.title, "text": p.text}
        for batch in corpus_batches(size)
        for p in batch
    ]
    path.write_text(json.dumps(records, ensure_ascii=False))


def bare_insert(corpus: Path, db: Path) -> None:
    """The reference: read the JSON rows and insert them into a bare FTS5 table."""
    records = json.loads(corpus.read_text())
    connection = sqlite3.connect(db)
    connection.execute("CREATE VIRTUAL TABLE fts USING fts5(title, body)")
    with connection:
        connection.executemany(
            "INSERT INTO fts VALUES (?, ?)", [(r["title"], r["text"]) for r in records]
        )
    connection.close()


def timed(command: list[str], leftovers: list[Path]) -> float:
    """Seconds a fresh process takes from start to exit (after removing its old output)."""
    for path in leftovers:
        path.unlink(missing_ok=True)
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    """Time both commands alternately and print the medians."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--bare", nargs=2, type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.bare:
        bare_insert(*args.bare)
        return 0
    args.workdir.mkdir(parents=True, exist_ok=True)
    corpus = args.workdir / f"corpus-{args.size}.json"
    if not corpus.exists():
        write_corpus(args.size, corpus)
    beside = Path(sys.executable).parent / "sag2"
    sag2 = str(beside) if beside.exists() else shutil.which("sag2") or "sag2"
    index_db, bare_db = args.workdir / "cli-index.db", args.workdir / "cli-bare.db"
    index_files = [index_db, Path(f"{index_db}-wal"), Path(f"{index_db}-shm")]
    ours, bare = [], []
    for _ in range(args.repeats):
        ours.append(timed([sag2, "index", str(corpus), "--db", str(index_db), "-q"], index_files))
        command = [sys.executable, __file__, "--workdir", ".", "--bare", str(corpus), str(bare_db)]
        bare.append(timed(command, [bare_db]))
    print(f"Run {date.today()} on {machine()}, commit {git_revision()}.\n")
    print("| passages | sag2 index s | bare FTS5 s | ratio |\n|---:|---:|---:|---:|")
    median, reference = statistics.median(ours), statistics.median(bare)
    print(f"| {args.size:,} | {median:.1f} | {reference:.1f} | {median / reference:.2f}x |")
    print(f"\nall runs: sag2 index {ours}, bare {bare}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
