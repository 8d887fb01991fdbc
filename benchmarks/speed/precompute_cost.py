"""Cost of the local judge's passage precompute at ingest, and what it saves on the first question.

Run from the repository root: ``python benchmarks/speed/precompute_cost.py [--passages 1000]``.
Indexes the first ``--passages`` passages of the shared MuSiQue train corpus into a fresh
file, then measures (a) `precompute_judge` with a fresh LocalJudge, per 1,000 passages, and
(b) the first question's wall time on a cold judge against one after precompute.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

import _here  # noqa: F401 - puts benchmarks/ on the import path
from _common import TRAIN_CORPUS, TRAIN_QUESTIONS, git_revision, machine

from sag2_retrievers import Document, SAG2Engine, SQLiteIndex
from sag2_retrievers.adapter_kit import precompute_judge
from sag2_retrievers.eval import load_corpus, load_questions
from sag2_retrievers.eval.datasets import unique_passages
from sag2_retrievers.judges._embeddings import MiniLMEncoder
from sag2_retrievers.judges.similarity import LocalJudge


def first_question_seconds(index: SQLiteIndex, judge: LocalJudge, question: str) -> float:
    """Wall time of one SAG2 retrieval with this judge."""
    engine = SAG2Engine(index, judge)
    try:
        started = time.perf_counter()
        engine.retrieve(question, 10)
        return time.perf_counter() - started
    finally:
        engine.close()


def main() -> int:
    """Measure and print one Markdown table row per measurement."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--passages", type=int, default=1000)
    args = parser.parse_args()
    passages = unique_passages(load_corpus(TRAIN_CORPUS))[: args.passages]
    question = load_questions(TRAIN_QUESTIONS)[0].question
    encoder = MiniLMEncoder(threads=2)  # loaded once: model loading is not the measured cost
    with tempfile.TemporaryDirectory() as scratch:
        cold_path, warm_path = Path(scratch) / "cold.db", Path(scratch) / "warm.db"
        for path in (cold_path, warm_path):
            with SQLiteIndex(path) as index:
                index.add_documents(Document(p.doc_id, p.text, p.title) for p in passages)
        with SQLiteIndex(cold_path) as index:
            cold = first_question_seconds(
                index, LocalJudge(cache_path=cold_path, encoder=encoder), question
            )
        with SQLiteIndex(warm_path) as index:
            judge = LocalJudge(cache_path=warm_path, encoder=encoder)
            doc_ids = [p.doc_id for p in passages]
            started = time.perf_counter()
            prepared = precompute_judge(index, judge, doc_ids, progress=False)
            precompute = time.perf_counter() - started
            warm = first_question_seconds(index, judge, question)
    print(f"Run {date.today()} on {machine()}, commit {git_revision()}.", file=sys.stderr)
    print("| passages (units) | precompute s | s per 1,000 | first question cold s | after |")
    print("|---:|---:|---:|---:|---:|")
    per_thousand = 1000 * precompute / prepared
    print(
        f"| {len(passages):,} ({prepared:,}) | {precompute:.1f} | {per_thousand:.1f} "
        f"| {cold:.2f} | {warm:.2f} |"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
