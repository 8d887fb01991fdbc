"""Scale on SQLite: index build vs bare FTS5, peak RSS, size, and per-question local time.

Run from the repository root::

    python benchmarks/faults_scale/scale.py --sizes 10000 100000 500000 --workdir /tmp/sag2-scale

Each corpus (the two shared MuSiQue corpora topped up with synthetic passages drawn from
their sentences, generated here by ``corpus_batches``) is built once into ``--workdir`` and
reused by later runs (``--questions-only`` skips building), so the local-time part can be run
again on another commit against the very same files. Local time is wall time minus judge time
over the KAG dev questions, with the instant judge ``--judge`` names (`_judges.py`; replay's
recording is kept in ``--workdir`` too). ``--rankings FILE`` writes every question's final
unit ranking, or, when FILE exists, counts the questions whose ranking differs from it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import statistics
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import date
from pathlib import Path

import _here  # noqa: F401 - puts benchmarks/ on the import path
from _common import KAG_QUESTIONS, TRAIN_CORPUS, git_revision, machine, stopwatch
from _judges import JUDGES, bench_judge

from sag2_retrievers import Document, SAG2Engine, SQLiteIndex
from sag2_retrievers.eval import Passage, load_corpus, load_questions, pool_corpus
from sag2_retrievers.eval.datasets import unique_passages
from sag2_retrievers.judges.base import Judge

BATCH = 5_000
# Per question: its final ranking as (unit id, score) pairs.
Rankings = dict[str, list[tuple[int, float]]]


def corpus_batches(size: int, seed: int = 20261130) -> Iterator[list[Passage]]:
    """The shared passages topped up to ``size`` with synthetic ones, in batches.

    Passages of 3-6 sentences drawn from the shared text with a reused title, generated as
    they are consumed (the same sequence as ``index_and_bm25.synthetic_passages``), so the
    benchmark process never holds the whole corpus.
    """
    questions = load_questions(KAG_QUESTIONS)
    shared = unique_passages([*pool_corpus(questions), *load_corpus(TRAIN_CORPUS)])[:size]
    rng = random.Random(seed)
    sentences = [s.strip() + "." for p in shared for s in p.text.split(". ") if len(s) > 20]
    titles = [p.title for p in shared]
    batch = list(shared)
    for n in range(size - len(shared)):
        title = rng.choice(titles)
        text = " ".join(rng.sample(sentences, rng.randint(3, 6))) + f" #{n}"
        batch.append(Passage(title, text))
        if len(batch) == BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def tree_rss_bytes(pid: int) -> int:
    """Resident memory of a process and all its descendants, from /proc."""
    total, pending = 0, [pid]
    while pending:
        current = pending.pop()
        try:
            status = Path(f"/proc/{current}/status").read_text()
            total += next(
                int(line.split()[1]) * 1024 for line in status.splitlines() if line[:6] == "VmRSS:"
            )
            for task in Path(f"/proc/{current}/task").iterdir():
                pending.extend(int(c) for c in (task / "children").read_text().split())
        except (OSError, StopIteration):
            continue
    return total


@contextmanager
def peak_rss() -> Iterator[list[int]]:
    """Sample the process tree's RSS every 50 ms during a block; the peak lands in the list."""
    peak = [tree_rss_bytes(os.getpid())]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.05):
            peak[0] = max(peak[0], tree_rss_bytes(os.getpid()))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        yield peak
    finally:
        done.set()
        sampler.join()


def bare_fts(size: int, path: Path) -> tuple[float, int]:
    """Seconds to insert the raw titles and texts into a bare FTS5 table (the reference,
    generation included as in the SAG2 build), and the raw text's UTF-8 bytes."""
    path.unlink(missing_ok=True)
    connection = sqlite3.connect(path)
    connection.execute("CREATE VIRTUAL TABLE fts USING fts5(title, body)")
    raw = 0
    with stopwatch() as elapsed:
        for batch in corpus_batches(size):
            raw += sum(len(p.title.encode()) + len(p.text.encode()) for p in batch)
            with connection:
                connection.executemany(
                    "INSERT INTO fts VALUES (?, ?)", [(p.title, p.text) for p in batch]
                )
    connection.close()
    return elapsed[0], raw


def build(size: int, path: Path) -> tuple[float, int]:
    """Seconds to build the SAG2 index, and the process tree's peak RSS meanwhile."""
    for leftover in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        leftover.unlink(missing_ok=True)
    batches = (
        [Document(p.doc_id, p.text, p.title) for p in batch] for batch in corpus_batches(size)
    )
    with peak_rss() as peak, stopwatch() as elapsed, SQLiteIndex(path) as index:
        index.ingest(batches)
    return elapsed[0], peak[0]


def file_bytes(path: Path) -> int:
    """A database file's size with its WAL."""
    wal = Path(f"{path}-wal")
    return path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


def local_times(
    path: Path, questions: Sequence[str], judge: str, recording: Path
) -> tuple[list[float], list[float], Rankings]:
    """Per-question local seconds of SAG2 with an instant judge, as wall time minus judge
    time and as the process's CPU time minus the judge's, and each final ranking."""
    with SQLiteIndex(path) as index:

        def make_engine(inner: Judge) -> SAG2Engine:
            return SAG2Engine(index, inner)

        metered = bench_judge(judge, make_engine, questions, recording)
        engine = make_engine(metered)
        engine.retrieve(questions[0])  # warm the page cache and the loop thread
        local, cpu, rankings = [], [], {}
        for question in questions:
            judged, cpu_started = metered.cpu_seconds, time.process_time()
            started = time.perf_counter()
            result = engine.retrieve(question, 10)
            wall = time.perf_counter() - started
            local.append(wall - sum(r.judge_seconds for r in result.trace))
            cpu.append(time.process_time() - cpu_started - (metered.cpu_seconds - judged))
            rankings[question] = [(u.unit_id, u.score) for u in result.units]
        engine.close()
    return local, cpu, rankings


def compare_rankings(rankings: Rankings, path: Path) -> str:
    """Write the rankings to a new file, or count the questions that differ from it."""
    if not path.exists():
        path.write_text(json.dumps(rankings))
        return f"rankings written to {path}"
    recorded = {
        q: [tuple(pair) for pair in ranked] for q, ranked in json.loads(path.read_text()).items()
    }
    differing = sum(recorded.get(q) != ranked for q, ranked in rankings.items())
    return f"rankings vs {path}: {differing} of {len(rankings)} questions differ"


def _median_p95(seconds: list[float]) -> str:
    """Median and 95th percentile, in milliseconds."""
    ms = sorted(1000 * x for x in seconds)
    return f"{statistics.median(ms):.1f} / {ms[int(0.95 * (len(ms) - 1))]:.1f}"


def main(argv: list[str] | None = None) -> int:
    """Build (unless asked not to), measure and print Markdown rows."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--questions", type=int, default=100)
    parser.add_argument("--questions-only", action="store_true")
    parser.add_argument("--judge", choices=JUDGES, default="overlap")
    parser.add_argument("--rankings", type=Path, help="write, or compare with, final rankings")
    args = parser.parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    questions = [q.question for q in load_questions(KAG_QUESTIONS)][: args.questions]
    print(f"Run {date.today()} on {machine()}, commit {git_revision()}, judge {args.judge}.\n")
    if not args.questions_only:
        print(
            "| passages | build s | bare FTS5 s | ratio | peak RSS MiB | DB MiB | raw MiB "
            "| size ratio |"
        )
        print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    rows = []
    for size in args.sizes:
        path = args.workdir / f"scale-{size}.db"
        if not args.questions_only:
            bare, raw = bare_fts(size, args.workdir / f"bare-{size}.db")
            seconds, peak = build(size, path)
            print(
                f"| {size:,} | {seconds:.1f} | {bare:.1f} | {seconds / bare:.2f}x "
                f"| {peak / 2**20:,.0f} | {file_bytes(path) / 2**20:,.0f} | {raw / 2**20:,.0f} "
                f"| {file_bytes(path) / raw:.2f}x |",
                flush=True,
            )
        recording = args.workdir / f"replay-{size}-{len(questions)}.json"
        local, cpu, rankings = local_times(path, questions, args.judge, recording)
        if args.rankings is not None:
            target = args.rankings.with_suffix(f".{args.judge}.{size}.json")
            print(compare_rankings(rankings, target))
        rows.append(f"| {size:,} | {len(questions)} | {_median_p95(local)} | {_median_p95(cpu)} |")
    print(
        "\n| passages | questions | local ms median / p95 | local CPU ms median / p95 |\n"
        "|---:|---:|---:|---:|"
    )
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
