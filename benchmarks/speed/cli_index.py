"""What a user runs: ``sag2 index corpus.json`` against a bare FTS5 insert, whole processes.

Run from the repository root::

    python benchmarks/speed/cli_index.py --size 100000 --workdir /tmp/sag2-cli [--repeats 3]
    python benchmarks/speed/cli_index.py --size 1000000 --workdir DIR --jsonl --repeats 1
    python benchmarks/speed/cli_index.py --size 1000000 --workdir DIR --jsonl --backend postgres

The corpus (`scale.corpus_batches`, written once into ``--workdir`` as a JSON list of
{id, title, text}, or as JSONL with ``--jsonl``, which ``sag2 index`` streams) is indexed by
the ``sag2`` command in a fresh process, and the same rows are inserted into a bare
``fts5(title, body)`` table by a fresh Python process that reads the file the same way; each
is timed from outside, start to exit, alternately, ``--repeats`` times. ``--compare DIR``
also times ``sag2 index`` of another checkout (``PYTHONPATH=DIR``) in the same rotation.
Peak resident memory is sampled every 50 ms from /proc: the writer process alone, and the
writer with its analysis workers. ``--backend postgres`` indexes into a throw-away
PostgreSQL server on 127.0.0.1 (the tests' helper; memory is the client's). Prints medians,
peaks and the ratio of each build to the bare insert.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import _here  # noqa: F401 - puts benchmarks/ on the import path
from _common import git_revision, machine
from faults_scale.scale import corpus_batches, tree_rss_bytes

sys.path.insert(0, str(Path(__file__).parents[2]))
from tests.postgres_server import server_dsn

MIB = 1024 * 1024
SAMPLE_SECONDS = 0.05


@dataclass(frozen=True)
class Run:
    """One timed process: seconds from start to exit, peak RSS of it and of its tree."""

    seconds: float
    process_peak: int
    tree_peak: int


def write_corpus(size: int, path: Path, jsonl: bool) -> None:
    """The benchmark corpus as one JSON list or as JSONL (kept for later runs)."""
    records = (
        {"id": p.doc_id, "title": p.title, "text": p.text}
        for batch in corpus_batches(size)
        for p in batch
    )
    with path.open("w", encoding="utf-8") as out:
        if jsonl:
            for record in records:
                out.write(json.dumps(record, ensure_ascii=False) + "\n")
        else:
            json.dump(list(records), out, ensure_ascii=False)


def read_records(corpus: Path) -> Iterator[dict[str, str]]:
    """The corpus's rows, read as `sag2 index` reads them (a JSON list whole, JSONL by line)."""
    if corpus.suffix == ".jsonl":
        with corpus.open(encoding="utf-8") as lines:
            yield from (json.loads(line) for line in lines if line.strip())
    else:
        yield from json.loads(corpus.read_text(encoding="utf-8"))


def bare_insert(corpus: Path, db: Path) -> None:
    """The reference: read the rows and insert them into a bare FTS5 table."""
    connection = sqlite3.connect(db)
    connection.execute("CREATE VIRTUAL TABLE fts USING fts5(title, body)")
    with connection:
        connection.executemany(
            "INSERT INTO fts VALUES (?, ?)", ((r["title"], r["text"]) for r in read_records(corpus))
        )
    connection.close()


def status_kib(pid: int, field: str) -> int:
    """A VmRSS-like field of /proc/PID/status in KiB (0 once the process is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def timed(command: list[str], leftovers: list[Path], compare: Path | None = None) -> Run:
    """A fresh process from start to exit (after removing its old output), with its peaks;
    ``compare`` runs it with that checkout first on the path."""
    for path in leftovers:
        path.unlink(missing_ok=True)
    env = None if compare is None else {**os.environ, "PYTHONPATH": str(compare)}
    started = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, env=env, cwd=compare)
    process_peak = tree_peak = 0
    while child.poll() is None:
        # VmHWM is the process's own high-water mark, so a peak between samples is not lost.
        process_peak = max(process_peak, status_kib(child.pid, "VmHWM:") * 1024)
        tree_peak = max(tree_peak, tree_rss_bytes(child.pid))
        time.sleep(SAMPLE_SECONDS)
    seconds = time.perf_counter() - started
    if child.returncode:
        raise SystemExit(f"{command[0]} failed with exit code {child.returncode}")
    return Run(seconds, process_peak, tree_peak)


def drop_schema(dsn: str) -> None:
    """Remove the CLI's default schema, so each PostgreSQL build starts empty."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute("DROP SCHEMA IF EXISTS sag2 CASCADE")


def row(size: int, label: str, runs: list[Run], reference: float | None) -> str:
    """One table row: medians, peaks and the ratio to the bare insert's median."""
    median = statistics.median(run.seconds for run in runs)
    ratio = f"{median / reference:.2f}x" if reference else "-"
    times = ", ".join(f"{run.seconds:.1f}" for run in runs)
    process = max(run.process_peak for run in runs) / MIB
    tree = max(run.tree_peak for run in runs) / MIB
    peaks = f"{process:,.0f} | {tree:,.0f}"
    return f"| {size:,} | {label} | {median:.1f} ({times}) | {ratio} | {peaks} |"


def main(argv: list[str] | None = None) -> int:
    """Time the commands alternately and print the medians and peaks."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--jsonl", action="store_true", help="write and read the corpus as JSONL")
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--dsn", help="a PostgreSQL server to use instead of a throw-away one")
    parser.add_argument("--compare", type=Path, help="another checkout to time beside this one")
    parser.add_argument("--without-bare", action="store_true", help="time sag2 index only")
    parser.add_argument("--bare", nargs=2, type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.bare:
        bare_insert(*args.bare)
        return 0
    args.workdir = args.workdir.resolve()
    args.workdir.mkdir(parents=True, exist_ok=True)
    corpus = args.workdir / f"corpus-{args.size}.{'jsonl' if args.jsonl else 'json'}"
    if not corpus.exists():
        write_corpus(args.size, corpus, args.jsonl)
    beside = Path(sys.executable).parent / "sag2"
    sag2 = str(beside) if beside.exists() else shutil.which("sag2") or "sag2"
    index_db, bare_db = args.workdir / "cli-index.db", args.workdir / "cli-bare.db"
    index_files = [index_db, Path(f"{index_db}-wal"), Path(f"{index_db}-shm")]
    runs: dict[str, list[Run]] = {"bare FTS5 insert": [], "sag2 index": []}
    if args.compare:
        args.compare = args.compare.resolve()
        runs[f"sag2 index at {args.compare.name}"] = []
    with ExitStack() as stack:
        dsn = stack.enter_context(server_dsn(args.dsn)) if args.backend == "postgres" else None
        target = dsn or str(index_db)
        for _ in range(args.repeats):
            bare = [sys.executable, __file__, "--workdir", ".", "--bare", str(corpus), str(bare_db)]
            if not args.without_bare:
                runs["bare FTS5 insert"].append(timed(bare, [bare_db]))
            for label in runs:
                if label.startswith("bare"):
                    continue
                if dsn:
                    drop_schema(dsn)
                command = [sag2, "index", str(corpus), "--db", target, "-q"]
                if label == "sag2 index":
                    runs[label].append(timed(command, index_files))
                else:
                    command = [sys.executable, "-m", "sag2_retrievers.cli", *command[1:]]
                    runs[label].append(timed(command, index_files, args.compare))
    print(f"Run {date.today()} on {machine()}, commit {git_revision()}, backend {args.backend}.\n")
    print("| passages | process | s median (runs) | ratio to bare | peak RSS MiB | with workers |")
    print("|---:|---|---:|---:|---:|---:|")
    bare_runs = runs.pop("bare FTS5 insert")
    reference = statistics.median(run.seconds for run in bare_runs) if bare_runs else None
    if bare_runs:
        print(row(args.size, "bare FTS5 insert", bare_runs, None))
    for label, done in runs.items():
        print(row(args.size, label, done, reference))
    return 0


if __name__ == "__main__":
    sys.exit(main())
