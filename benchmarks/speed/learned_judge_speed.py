"""Judge time per question of the learned judge, cold and on a warm ~2,000-passage index.

    python benchmarks/speed/learned_judge_speed.py [--questions 50]

Corpus: the MuSiQue train fixture (1,890 passages), questions: its first ``--questions``.
Reports (1) cold start: loading the judge, and precomputing every passage's embedding and
terms, as an adapter does after ingest; (2) warm: judge seconds per question (the engine's
``judge_seconds`` summed over the rounds) after that precompute; (3) a cold question: judge
seconds when nothing was precomputed (each candidate is encoded when first judged).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import _here  # noqa: F401 - puts benchmarks/ on the import path
from _common import TRAIN_CORPUS, TRAIN_QUESTIONS, git_revision, machine

from sag2_retrievers import Document, SAG2Config, SAG2Engine, SQLiteIndex
from sag2_retrievers.eval import load_corpus, load_questions
from sag2_retrievers.judges.base import Candidate
from sag2_retrievers.judges.learned import LearnedJudge


def judge_seconds(engine: SAG2Engine, question: str) -> float:
    """Seconds spent inside the judge for one retrieval (all rounds)."""
    return sum(r.judge_seconds for r in engine.retrieve(question, 10).trace)


def main(argv: list[str] | None = None) -> int:
    """Build an index in a temporary directory, then time the judge cold and warm."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=50)
    args = parser.parse_args(argv)
    passages = load_corpus(TRAIN_CORPUS)
    questions = [q.question for q in load_questions(TRAIN_QUESTIONS)[: args.questions]]
    print(f"Run on {machine()}, commit {git_revision()}; {len(passages):,} passages.")
    with tempfile.TemporaryDirectory(prefix="sag2-speed-") as scratch:
        index = SQLiteIndex(Path(scratch) / "speed.db")
        index.add_documents(Document(p.doc_id, p.text, p.title) for p in passages)
        started = time.perf_counter()
        cold = LearnedJudge()
        loaded = time.perf_counter() - started
        cold_engine = SAG2Engine(index, cold, SAG2Config(hops=2))
        first = judge_seconds(cold_engine, questions[0])
        cold_engine.close()
        judge = LearnedJudge(cache_path=index.path)
        started = time.perf_counter()
        prepared = judge.precompute([Candidate(p.title, p.text) for p in passages])
        precompute = time.perf_counter() - started
        engine = SAG2Engine(index, judge, SAG2Config(hops=2))
        warm = [judge_seconds(engine, q) for q in questions]
        engine.close()
        index.close()
    warm.sort()
    print(f"- load the judge (MiniLM session + model file): {loaded:.2f} s")
    print(f"- precompute {prepared:,} passages (embeddings + terms): {precompute:.1f} s")
    print(f"- first question, nothing precomputed: {first:.2f} s of judge time")
    print(
        f"- warm, {len(warm)} questions: judge s/question median {statistics.median(warm):.3f}, "
        f"mean {statistics.fmean(warm):.3f}, p95 {warm[int(0.95 * (len(warm) - 1))]:.3f}, "
        f"max {warm[-1]:.3f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
