"""Where a question's local time goes on a built scale corpus: calls, postings, cache hits.

Run from the repository root, on a file built by ``benchmarks/faults_scale/scale.py``::

    python benchmarks/faults_scale/scale_profile.py \
        --db /tmp/sag2-scale/scale-500000.db --judge replay

Each index read the engine makes, and the scorer's steps below it, is wrapped in a timer
(nested: a step's time includes the steps it calls); per question it prints the
milliseconds and calls of each, the postings read from the segments and the share of term
contributions found in the scorer's cache. Replay's recording is ``replay-SIZE-N.json``
beside the file, as `scale.py` writes it.
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import _here  # noqa: F401 - puts benchmarks/ on the import path
from _common import KAG_QUESTIONS, git_revision, machine
from _judges import JUDGES, bench_judge

from sag2_retrievers import SAG2Engine, SQLiteIndex
from sag2_retrievers.backends import scorer
from sag2_retrievers.backends.sqlite import postings
from sag2_retrievers.backends.sqlite.index import SQLiteIndex as IndexClass
from sag2_retrievers.eval import load_questions
from sag2_retrievers.judges.base import Judge

INDEX_READS = (
    "rank_expression",
    "expand",
    "score_units",
    "document_frequencies",
    "units",
    "expansion_units",
    "metadata",
)
SCORER_STEPS = ("contributions", "_dense")


class Tally:
    """Seconds and calls per label, and plain counts."""

    def __init__(self) -> None:
        self.seconds: Counter[str] = Counter()
        self.calls: Counter[str] = Counter()
        self.counts: Counter[str] = Counter()

    def timed(self, owner: Any, name: str, label: str) -> None:
        """Replace ``owner.name`` by a version that adds its time and calls under ``label``."""
        inner = getattr(owner, name)

        @functools.wraps(inner)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                self.seconds[label] += time.perf_counter() - started
                self.calls[label] += 1

        setattr(owner, name, wrapper)


def instrument(tally: Tally) -> None:
    """Wrap the index reads, the scorer's steps, postings reads and cache look-ups."""
    for name in INDEX_READS:
        tally.timed(IndexClass, name, f"index.{name}")
    for name in SCORER_STEPS:
        tally.timed(scorer.ArrayScorer, name, f"scorer.{name}")
    tally.timed(postings.SQLitePostings, "phrase_scores", "FTS5 phrase scores")
    tally.timed(scorer, "token_contribution", "token contributions (numpy)")
    read = postings.read_postings

    def counted_read(connection: Any, tokens: Sequence[str]) -> dict[str, Any]:
        found = read(connection, tokens)
        tally.counts["tokens read"] += len(found)
        tally.counts["postings read"] += sum(len(units) for units, _ in found.values())
        return found

    postings.read_postings = counted_read
    tally.timed(postings, "read_postings", "segment postings read")
    contributions = scorer.ArrayScorer.contributions

    def counted(self: scorer.ArrayScorer, source: Any, stats: Any, terms: Any) -> Any:
        distinct = list(dict.fromkeys(terms))
        tally.counts["terms asked"] += len(distinct)
        tally.counts["terms cached"] += sum(term in self._cache for term in distinct)
        return contributions(self, source, stats, distinct)

    scorer.ArrayScorer.contributions = counted  # type: ignore[method-assign]


def profile(db: Path, questions: Sequence[str], judge: str, recording: Path) -> Tally:
    """Run every question once (after a warm-up) with the reads instrumented."""
    tally = Tally()
    with SQLiteIndex(db) as index:

        def make_engine(inner: Judge) -> SAG2Engine:
            return SAG2Engine(index, inner)

        engine = make_engine(bench_judge(judge, make_engine, questions, recording))
        engine.retrieve(questions[0])
        instrument(tally)
        for question in questions:
            started = time.perf_counter()
            result = engine.retrieve(question, 10)
            wall = time.perf_counter() - started
            tally.seconds["local (wall minus judge)"] += wall - sum(
                r.judge_seconds for r in result.trace
            )
        engine.close()
    return tally


def report(tally: Tally, n: int, write: Callable[[str], object] = print) -> None:
    """Markdown rows: per question ms and calls, then the counts."""
    write("| step | ms per question | calls per question |\n|---|---:|---:|")
    for label, seconds in tally.seconds.most_common():
        write(f"| {label} | {1000 * seconds / n:.1f} | {tally.calls[label] / n:.1f} |")
    asked = max(tally.counts["terms asked"], 1)
    write(
        f"\nper question: {tally.counts['tokens read'] / n:.1f} tokens and "
        f"{tally.counts['postings read'] / n:,.0f} postings read from the segments; "
        f"{100 * tally.counts['terms cached'] / asked:.0f}% of term contributions asked "
        "were cached"
    )


def main(argv: list[str] | None = None) -> int:
    """Profile one built file with one judge."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--judge", choices=JUDGES, default="overlap")
    parser.add_argument("--questions", type=int, default=100)
    args = parser.parse_args(argv)
    questions = [q.question for q in load_questions(KAG_QUESTIONS)][: args.questions]
    size = args.db.stem.rsplit("-", 1)[-1]
    recording = args.db.parent / f"replay-{size}-{len(questions)}.json"
    print(f"Run on {machine()}, commit {git_revision()}, judge {args.judge}, {args.db.name}.\n")
    report(profile(args.db, questions, args.judge, recording), len(questions))
    return 0


if __name__ == "__main__":
    sys.exit(main())
