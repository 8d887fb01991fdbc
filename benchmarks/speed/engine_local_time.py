"""Local (non-judge) time per question of the full SAG2 procedure, with an instant fake judge.

Run from the repository root: ``python benchmarks/speed/engine_local_time.py [--passages 10000]``.
The corpus is the two shared MuSiQue corpora, topped up to ``--passages`` with synthetic
passages made from their sentences; questions are the 100 KAG dev questions.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import zlib
from datetime import date
from pathlib import Path

import _here  # noqa: F401 - puts benchmarks/ on the import path
from _common import KAG_QUESTIONS, TRAIN_CORPUS, git_revision, machine
from index_and_bm25 import synthetic_passages

from sag2_retrievers import Document, SAG2Engine, SQLiteIndex
from sag2_retrievers.eval import load_corpus, load_questions, pool_corpus
from sag2_retrievers.eval.datasets import unique_passages
from sag2_retrievers.judges.base import JudgeRequest
from sag2_retrievers.judges.fakes import ScriptedJudge


def instant_score(_: JudgeRequest, candidate: object) -> float:
    """A constant-time pseudo-score so judge time is negligible."""
    return zlib.crc32(getattr(candidate, "text", "").encode()) / 2**32


def build(path: Path, target: int) -> tuple[SQLiteIndex, int]:
    """Index the shared corpora plus synthetic passages up to ``target``."""
    questions = load_questions(KAG_QUESTIONS)
    shared = unique_passages([*pool_corpus(questions), *load_corpus(TRAIN_CORPUS)])
    extra = synthetic_passages(shared, max(0, target - len(shared)))
    passages = [*shared, *extra]
    index = SQLiteIndex(path)
    index.ingest(
        [Document(p.doc_id, p.text, p.title) for p in passages[start : start + 5000]]
        for start in range(0, len(passages), 5000)
    )
    return index, len(passages)


def main(argv: list[str] | None = None) -> int:
    """Measure and print a Markdown report."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--passages", type=int, default=10_000)
    args = parser.parse_args(argv)
    questions = load_questions(KAG_QUESTIONS)
    with tempfile.TemporaryDirectory() as tmp:
        index, size = build(Path(tmp) / "bench.db", args.passages)
        engine = SAG2Engine(index, ScriptedJudge(instant_score))
        engine.retrieve(questions[0].question)  # warm caches and the loop thread
        local, judgments, rounds = [], [], []
        for question in questions:
            started = time.perf_counter()
            result = engine.retrieve(question.question, 10)
            wall = time.perf_counter() - started
            local.append(wall - sum(r.judge_seconds for r in result.trace))
            judgments.append(result.judgments)
            rounds.append(len(result.trace))
        engine.close()
    local_ms = sorted(1000 * x for x in local)
    p95 = local_ms[int(0.95 * (len(local_ms) - 1))]
    print(f"Run {date.today()} on {machine()}, commit {git_revision()}.\n")
    print(
        "| corpus units | questions | local ms median | local ms p95 "
        "| judgments mean | max | rounds |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|")
    print(
        f"| {size:,} | {len(questions)} | {statistics.median(local_ms):.1f} | {p95:.1f} "
        f"| {statistics.mean(judgments):.1f} | {max(judgments)} | {statistics.mean(rounds):.2f} |"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
