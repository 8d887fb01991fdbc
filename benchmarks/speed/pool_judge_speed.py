"""Judge time per question and peak memory of the pool judge on a ~2,000-passage index.

    python benchmarks/speed/pool_judge_speed.py [--questions 50]

Corpus: the MuSiQue train fixture (1,890 passages), questions: its first ``--questions``.
Reports the judge's load time, the first question's judge time (nothing analysed yet: every
candidate's text is analysed when first judged), the judge seconds per later question (the
engine's ``judge_seconds`` summed over the rounds), and the process's peak resident memory
with the judge's share (peak after the questions minus the peak before loading the judge).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

import _here  # noqa: F401 - puts benchmarks/ on the import path
from _common import TRAIN_CORPUS, TRAIN_QUESTIONS, git_revision, machine

from sag2_retrievers import Document, SAG2Config, SAG2Engine, SQLiteIndex
from sag2_retrievers.eval import load_corpus, load_questions
from sag2_retrievers.judges.offline.pool import PoolJudge


def judge_seconds(engine: SAG2Engine, question: str) -> float:
    """Seconds spent inside the judge for one retrieval (all rounds)."""
    return sum(r.judge_seconds for r in engine.retrieve(question, 10).trace)


def peak_mib() -> float:
    """This process's peak resident set size so far, in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv: list[str] | None = None) -> int:
    """Build an index in a temporary directory, then time the judge on the questions."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=50)
    args = parser.parse_args(argv)
    passages = load_corpus(TRAIN_CORPUS)
    questions = [q.question for q in load_questions(TRAIN_QUESTIONS)[: args.questions]]
    print(f"Run on {machine()}, commit {git_revision()}; {len(passages):,} passages.")
    with tempfile.TemporaryDirectory(prefix="sag2-speed-") as scratch:
        index = SQLiteIndex(Path(scratch) / "speed.db")
        index.add_documents(Document(p.doc_id, p.text, p.title) for p in passages)
        before = peak_mib()
        started = time.perf_counter()
        judge = PoolJudge()
        loaded = time.perf_counter() - started
        engine = SAG2Engine(index, judge, SAG2Config(hops=2))
        first = judge_seconds(engine, questions[0])
        later = sorted(judge_seconds(engine, q) for q in questions[1:])
        engine.close()
        index.close()
    after = peak_mib()
    print(f"- load the judge (model file): {loaded:.3f} s")
    print(f"- first question, no passage analysed yet: {first:.3f} s of judge time")
    print(
        f"- later {len(later)} questions: judge s/question median {statistics.median(later):.3f}, "
        f"mean {statistics.fmean(later):.3f}, p95 {later[int(0.95 * (len(later) - 1))]:.3f}, "
        f"max {later[-1]:.3f}"
    )
    print(
        f"- peak RSS {after:.0f} MiB (index built: {before:.0f} MiB; "
        f"judge share <= {after - before:.0f} MiB)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
