"""The engine's time per question with the default offline judge against the fake judge.

    python benchmarks/speed/judge_share.py --passages 100000          # shared corpora + synthetic
    python benchmarks/speed/judge_share.py --db docs.sqlite --questions QUESTIONS.json

Per question, the engine's time is what its trace reports: every round's local seconds plus
judge seconds (the figure `sag2 query --json` prints). The two judges answer the same
questions in turns, question by question, so machine load shifts both alike, and the one that
goes first alternates, so neither always meets the operating system's cold pages. Each judge's
engine reads the index through its own connection, as two independent users would: sharing one
would let the first engine warm SQLite's page cache and the index's caches for the second
(before 2026-12-06 the pool judge always went first on a shared connection, and its
engine-local time came out about 20% above the fake judge's for that reason alone). Each judge
keeps its state across questions as a long-running process would (the pool judge's analysis
cache). Reported: median and p95 per judge and the ratio of the medians (issue 30 bounds it by
1.5).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from contextlib import ExitStack
from datetime import date
from pathlib import Path

import _here  # noqa: F401 - puts benchmarks/ on the import path
from _common import KAG_QUESTIONS, git_revision, machine
from engine_local_time import build
from quality.doc_folder import engine_seconds

from sag2_retrievers import SAG2Engine, SQLiteIndex
from sag2_retrievers.eval import load_questions
from sag2_retrievers.judges.factory import make_judge

JUDGES = ("local", "fake")


def questions_from(path: Path | None) -> list[str]:
    """Question texts: an eval question file, a doc-folder question list, or KAG's."""
    if path is None:
        return [q.question for q in load_questions(KAG_QUESTIONS)]
    payload = json.loads(path.read_text(encoding="utf-8"))
    if isinstance(payload, list) and payload and "answers" in payload[0]:
        return [record["question"] for record in payload]
    return [q.question for q in load_questions(path)]


def measure(path: Path, questions: list[str]) -> dict[str, list[float]]:
    """Engine seconds per question for each judge, each on its own connection to the index at
    ``path``, the judges taking turns in alternating order."""
    with ExitStack() as stack:
        engines = {}
        for name in JUDGES:
            index = stack.enter_context(SQLiteIndex(path, create=False))
            engines[name] = SAG2Engine(index, make_judge(name))
            stack.callback(engines[name].close)  # runs before its index closes
        for engine in engines.values():
            engine.retrieve(questions[0])  # the loop thread, SQLite's caches, jieba's dictionary
        times: dict[str, list[float]] = {name: [] for name in JUDGES}
        for number, question in enumerate(questions[1:]):
            for name in JUDGES if number % 2 == 0 else JUDGES[::-1]:
                times[name].append(engine_seconds(engines[name].retrieve(question, 10)))
        return times


def report(times: dict[str, list[float]], corpus: str) -> None:
    """Print the Markdown table."""
    print(f"Run {date.today()} on {machine()}, commit {git_revision()}; {corpus}.\n")
    print("| judge | questions | engine ms median | p95 |")
    print("|---|---:|---:|---:|")
    for name, values in times.items():
        ms = sorted(1000 * v for v in values)
        p95 = ms[int(0.95 * (len(ms) - 1))]
        print(f"| {name} | {len(ms)} | {statistics.median(ms):.1f} | {p95:.1f} |")
    ratio = statistics.median(times["local"]) / statistics.median(times["fake"])
    print(f"\nmedian ratio local / fake: **{ratio:.2f}x**")


def main(argv: list[str] | None = None) -> int:
    """Build or open the index, measure both judges, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=100_000)
    parser.add_argument("--db", type=Path, help="an existing index instead of a built one")
    parser.add_argument("--questions", type=Path, help="question file (default: KAG's 100)")
    args = parser.parse_args(argv)
    questions = questions_from(args.questions)
    if args.db is not None:
        with SQLiteIndex(args.db, create=False) as index:
            corpus = f"{index.unit_count():,} units in {args.db.name}"
        times = measure(args.db, questions)
    else:
        with tempfile.TemporaryDirectory() as scratch:
            path = Path(scratch) / "share.db"
            index, size = build(path, args.passages)
            index.close()
            times = measure(path, questions)
            corpus = f"{size:,} passages (shared corpora + synthetic)"
    report(times, corpus)
    return 0


if __name__ == "__main__":
    sys.exit(main())
