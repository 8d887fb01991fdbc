"""Record (or check) rankings on the shared sets, to prove a refactor leaves results identical.

Run from the repository root: ``python benchmarks/quality/reference_rankings.py OUT.json`` records
BM25 top-100 (unit ids and scores) and SAG2 top-10 / full unit ranking under a judge (``--judge``,
a `make_judge` name: by default the deterministic overlap judge "fake"; "local-pool" for the
default offline judge), with and without a metadata filter, on the KAG subset (pooled corpus), the
MuSiQue train fixture and 5,000 synthetic passages; ``--check OUT.json`` compares with a record.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import _here  # noqa: F401 - puts benchmarks/ on the import path
from _common import KAG_QUESTIONS, TRAIN_CORPUS, TRAIN_QUESTIONS
from speed.index_and_bm25 import synthetic_passages

from sag2_retrievers import Document, SAG2Engine, SQLiteIndex
from sag2_retrievers.eval import load_corpus, load_questions, pool_corpus
from sag2_retrievers.eval.datasets import Passage, unique_passages
from sag2_retrievers.judges.factory import make_judge


def documents(passages: list[Passage]) -> list[Document]:
    """Documents with a metadata field that half of them share, to exercise filters."""
    return [Document(p.doc_id, p.text, p.title, {"half": n % 2}) for n, p in enumerate(passages)]


def record(passages: list[Passage], questions: list[str], path: Path, judge: str) -> dict[str, Any]:
    """Rankings of every question on one corpus."""
    out: dict[str, Any] = {}
    with SQLiteIndex(path) as index:
        index.add_documents(documents(passages), parallel=False)
        engine = SAG2Engine(index, make_judge(judge))
        for question in questions:
            row: dict[str, Any] = {}
            for label, filters in (("all", None), ("half", {"half": 1})):
                hits = index.search(question, 100, filters=filters)
                result = engine.retrieve(question, 10, filters=filters)
                row[label] = {
                    "bm25": [[h.unit_id, h.score] for h in hits],
                    "top10": [h.doc_id for h in result.hits],
                    "units": [[u.unit_id, u.score, u.round_found] for u in result.units],
                    "new": [list(t.new_candidates) for t in result.trace],
                }
            out[question] = row
        engine.close()
    return out


def main(argv: list[str] | None = None) -> int:
    """Record or check."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out", type=Path)
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--judge", default="fake", help="a make_judge name (default: fake)")
    args = parser.parse_args(argv)
    kag = load_questions(KAG_QUESTIONS)
    train = load_questions(TRAIN_QUESTIONS)
    train_corpus = load_corpus(TRAIN_CORPUS)
    shared = unique_passages([*pool_corpus(kag), *train_corpus])
    sets = {
        "kag": (unique_passages(pool_corpus(kag)), [q.question for q in kag]),
        "train": (unique_passages(train_corpus), [q.question for q in train]),
        "synthetic": (
            [*shared, *synthetic_passages(shared, 5000)],
            [q.question for q in kag[:40]],
        ),
    }
    result = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, (passages, questions) in sets.items():
            result[name] = record(passages, questions, Path(tmp) / f"{name}.db", args.judge)
    if not args.check:
        args.out.write_text(json.dumps(result))
        return 0
    expected = json.loads(args.out.read_text())
    differences = 0
    for name, rows in expected.items():
        for question, row in rows.items():
            for label, want in row.items():
                got = result[name][question][label]
                for key in want:
                    if want[key] != got[key]:
                        differences += 1
                        print(f"{name} {label} {key}: {question[:60]!r}")
    print(f"{differences} differences")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
