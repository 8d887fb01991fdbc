"""Index build time, size and BM25 recall, side by side with bare FTS5 and bm25s.

Run from the repository root: ``python benchmarks/index_and_bm25.py [--synthetic 100000]``.
Prints a Markdown report (paste it into docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import random
import resource
import sqlite3
import statistics
import sys
import tempfile
from collections.abc import Iterator, Sequence
from datetime import date
from pathlib import Path

import _here  # noqa: F401 - puts benchmarks/ on the import path
from _common import KAG_QUESTIONS, TRAIN_CORPUS, TRAIN_QUESTIONS, git_revision, machine, stopwatch

from sag2_retrievers import Document, SQLiteIndex
from sag2_retrievers.eval import EvalQuestion, Passage, load_corpus, load_questions, pool_corpus
from sag2_retrievers.eval.metrics import all_evidence_at, recall_at

BATCH = 5_000


def bare_fts_seconds(passages: Sequence[Passage], path: Path) -> float:
    """Insert raw title and text into a bare FTS5 table (the reference cost)."""
    connection = sqlite3.connect(path)
    connection.execute("CREATE VIRTUAL TABLE fts USING fts5(title, body)")
    with stopwatch() as elapsed:
        for start in range(0, len(passages), BATCH):
            rows = [(p.title, p.text) for p in passages[start : start + BATCH]]
            with connection:
                connection.executemany("INSERT INTO fts VALUES (?, ?)", rows)
    connection.close()
    return elapsed[0]


def sag2_index(passages: Sequence[Passage], path: Path) -> tuple[SQLiteIndex, float]:
    """Build a SAG2 index in batches (one transaction each, pipelined) and time it."""
    index = SQLiteIndex(path)
    batches = (
        [Document(p.doc_id, p.text, p.title) for p in passages[start : start + BATCH]]
        for start in range(0, len(passages), BATCH)
    )
    with stopwatch() as elapsed:
        index.ingest(batches)
    return index, elapsed[0]


def sag2_recall(
    index: SQLiteIndex, questions: Sequence[EvalQuestion], identity: dict[str, str]
) -> dict[str, float]:
    """BM25 R@5, R@10 and AE@10 of the SAG2 index's lexical search, in percent."""
    rankings = [[identity[h.doc_id] for h in index.search(q.question, 100)] for q in questions]
    return _metrics(questions, rankings)


def bm25s_recall(
    passages: Sequence[Passage], questions: Sequence[EvalQuestion]
) -> dict[str, float]:
    """The same metrics with bm25s (default tokenizer, English stopwords) on the same corpus."""
    import bm25s

    corpus = [p.title + " " + p.text for p in passages]
    retriever = bm25s.BM25()
    retriever.index(
        bm25s.tokenize(corpus, stopwords="en", show_progress=False), show_progress=False
    )
    tokens = bm25s.tokenize([q.question for q in questions], stopwords="en", show_progress=False)
    results, _ = retriever.retrieve(tokens, k=100, show_progress=False)
    rankings = [[passages[i].identity for i in row] for row in results]
    return _metrics(questions, rankings)


def _metrics(questions: Sequence[EvalQuestion], rankings: list[list[str]]) -> dict[str, float]:
    """Macro-averaged R@5, R@10, AE@10 in percent."""
    pairs = list(zip(questions, rankings, strict=True))
    return {
        "R@5": 100 * statistics.mean(recall_at(q.gold, r, 5) for q, r in pairs),
        "R@10": 100 * statistics.mean(recall_at(q.gold, r, 10) for q, r in pairs),
        "AE@10": 100 * statistics.mean(all_evidence_at(q.gold, r, 10) for q, r in pairs),
    }


def synthetic_passages(
    source: Sequence[Passage], count: int, seed: int = 20261130
) -> list[Passage]:
    """``count`` passages of 3-6 sentences drawn from the shared text, titles reused."""
    rng = random.Random(seed)
    sentences = [s.strip() + "." for p in source for s in p.text.split(". ") if len(s) > 20]
    titles = [p.title for p in source]
    return [
        Passage(rng.choice(titles), " ".join(rng.sample(sentences, rng.randint(3, 6))) + f" #{n}")
        for n in range(count)
    ]


def dataset_rows(workdir: Path) -> Iterator[str]:
    """One table row per shared MuSiQue corpus."""
    kag = load_questions(KAG_QUESTIONS)
    train = load_questions(TRAIN_QUESTIONS)
    for name, questions, passages in (
        ("MuSiQue KAG dev subset (100 q, pooled)", kag, pool_corpus(kag)),
        ("MuSiQue train fixture (100 q)", train, load_corpus(TRAIN_CORPUS)),
    ):
        bare = bare_fts_seconds(passages, workdir / f"bare-{len(passages)}.db")
        index, seconds = sag2_index(passages, workdir / f"sag2-{len(passages)}.db")
        identity = {p.doc_id: p.identity for p in passages}
        ours = sag2_recall(index, questions, identity)
        theirs = bm25s_recall(passages, questions)
        size = index.stats()["bytes"] / 2**20
        yield (
            f"| {name} | {len(passages):,} | {seconds:.2f} | {bare:.2f} | {seconds / bare:.1f}x "
            f"| {size:.2f} | {ours['R@5']:.2f} / {ours['R@10']:.2f} / {ours['AE@10']:.2f} "
            f"| {theirs['R@5']:.2f} / {theirs['R@10']:.2f} / {theirs['AE@10']:.2f} |"
        )
        index.close()


def synthetic_row(workdir: Path, count: int) -> str:
    """Build time of a large synthetic corpus against the bare FTS5 reference."""
    passages = synthetic_passages(load_corpus(TRAIN_CORPUS), count)
    bare = bare_fts_seconds(passages, workdir / "bare-synthetic.db")
    index, seconds = sag2_index(passages, workdir / "sag2-synthetic.db")
    size = index.stats()["bytes"] / 2**20
    index.close()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return (
        f"| synthetic from shared text | {count:,} | {seconds:.2f} | {bare:.2f} "
        f"| {seconds / bare:.1f}x | {size:.2f} | peak RSS {peak:.0f} MiB main, "
        f"{children:.0f} MiB largest worker | |"
    )


def main(argv: list[str] | None = None) -> int:
    """Run every measurement and print the Markdown report."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--synthetic", type=int, default=100_000, help="passages (0 to skip)")
    args = parser.parse_args(argv)
    print(f"Run {date.today()} on {machine()}, commit {git_revision()}.\n")
    print(
        "| corpus | passages | SAG2 index s | bare FTS5 s | ratio | MiB "
        "| SAG2 BM25 R@5 / R@10 / AE@10 | bm25s R@5 / R@10 / AE@10 |"
    )
    print("|---|---:|---:|---:|---:|---:|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for row in dataset_rows(Path(tmp)):
            print(row, flush=True)
        if args.synthetic:
            print(synthetic_row(Path(tmp), args.synthetic), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
