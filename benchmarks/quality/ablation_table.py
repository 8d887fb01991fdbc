"""The paper's Appendix B.1 table structure, measured here with the offline judge.

Rows: BM25; BM25 + judge (H=0); SAG2 H=1; SAG2 H=2; SAG2 without shared context; a one-shot
BM25 + judge pool given each question's SAG2 (H=2) judgment count. Paired 95% bootstrap
intervals (2,000 resamples, seed 20261015) of each row against BM25 + judge (H=0).

Run from the repository root: ``python benchmarks/quality/ablation_table.py`` (offline judges:
``--judges local-pool fake``; ``--sets kag train hotpotqa-train``).
"gold in pool" and "in pool, not top 10" are the last round's pool diagnostics (micro, %).
Indexes are kept under ``runs/`` for reuse.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Sequence
from datetime import date
from pathlib import Path
from typing import Any

import _here  # noqa: F401 - puts benchmarks/ on the import path
from _common import (
    KAG_QUESTIONS,
    SHARED_DATA,
    TRAIN_CORPUS,
    TRAIN_QUESTIONS,
    git_revision,
    machine,
)

from sag2_retrievers import Document, SAG2Config, SQLiteIndex
from sag2_retrievers.eval import EvalQuestion, Passage, load_corpus, load_questions, pool_corpus
from sag2_retrievers.eval.runner import EvalOptions, compare_reports, evaluate
from sag2_retrievers.judges.base import Candidate, Judge
from sag2_retrievers.judges.factory import JUDGE_NAMES, make_judge

ROWS: list[tuple[str, str, dict[str, Any]]] = [
    ("BM25", "bm25", {}),
    ("BM25 + judge (H=0)", "sag2", {"hops": 0}),
    ("SAG2, H=1", "sag2", {"hops": 1}),
    ("SAG2, H=2", "sag2", {"hops": 2}),
    ("SAG2, no context", "sag2", {"shared_context": False}),
]
MATCHED = "BM25 + judge, matched budget"
HOTPOT_QUESTIONS = SHARED_DATA / "hotpotqa" / "hipporag_hotpotqa_train_fixture.json"
HOTPOT_CORPUS = SHARED_DATA / "hotpotqa" / "hipporag_hotpotqa_train_fixture_corpus.json"


def open_index(path: Path, passages: Sequence[Passage], judge: Judge, fresh: bool) -> SQLiteIndex:
    """Build the index once; let the judge prepare passage-side work (cached after the first)."""
    index = SQLiteIndex(path)
    if fresh:
        index.add_documents(Document(p.doc_id, p.text, p.title) for p in passages)
        judge.precompute([Candidate(p.title, p.text) for p in passages])
    return index


async def run_rows(
    index: SQLiteIndex, questions: Sequence[EvalQuestion], judge: Judge, concurrency: int
) -> dict[str, dict[str, Any]]:
    """Every row's report (the runner's JSON), keyed by row name."""
    reports: dict[str, dict[str, Any]] = {}
    for name, method, changes in ROWS:
        options = EvalOptions(method, SAG2Config(**changes), concurrency=concurrency)  # type: ignore[arg-type]
        run = await evaluate(index, questions, judge, options)
        reports[name] = run.to_json(None, index.stats()["bytes"])
    budgets = {row["id"]: row["judgments"] for row in reports["SAG2, H=2"]["per_question"]}
    options = EvalOptions("sag2", SAG2Config(), budgets=budgets, concurrency=concurrency)
    reports[MATCHED] = (await evaluate(index, questions, judge, options)).to_json(None, 0)
    return reports


def table(reports: dict[str, dict[str, Any]]) -> list[str]:
    """Markdown rows: metrics, judgments, seconds, and R@10 / AE@10 deltas vs H=0."""
    reference = reports["BM25 + judge (H=0)"]
    lines = [
        "| method | R@5 | R@10 | AE@10 | gold in pool | in pool, not top 10 | judgments/q | s/q "
        "| ΔR@10 vs H=0 [95% CI] | ΔAE@10 [95% CI] |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for name, report in reports.items():
        deltas = " | |"
        if report is not reference:
            _, comparisons = compare_reports(reference, report, ("R@10", "AE@10"))
            deltas = (
                "|".join(
                    f" {c.difference:+.2f} [{c.low:+.2f}, {c.high:+.2f}] " for c in comparisons
                )
                + "|"
            )
        last = report["pool"]["rounds"][-1]
        lines.append(
            f"| {name} | {report['recall_at']['5']:.2f} | {report['recall_at']['10']:.2f} "
            f"| {report['ae_at']['10']:.2f} | {last['gold_in_pool']:.1f} "
            f"| {last['in_pool_not_top_10']:.1f} | {report['judgments_per_question']:.1f} "
            f"| {report['seconds_per_question']:.3f} |{deltas}"
        )
    return lines


def contrasts(reports: dict[str, dict[str, Any]]) -> list[str]:
    """The issue's targets as paired contrasts: H=2 against BM25, H=0 and no context."""
    lines = ["| contrast | ΔR@10 [95% CI] | ΔAE@10 [95% CI] |", "|---|---|---|"]
    pairs = (
        ("SAG2, H=2", "BM25"),
        ("SAG2, H=2", "BM25 + judge (H=0)"),
        ("SAG2, H=2", "SAG2, no context"),
        ("SAG2, H=2", MATCHED),
    )
    for better, baseline in pairs:
        _, comparisons = compare_reports(reports[baseline], reports[better], ("R@10", "AE@10"))
        cells = " | ".join(
            f"{c.difference:+.2f} [{c.low:+.2f}, {c.high:+.2f}]" for c in comparisons
        )
        lines.append(f"| {better} − {baseline} | {cells} |")
    return lines


def judge_contrast(a: str, b: str, reports: dict[str, dict[str, dict[str, Any]]]) -> list[str]:
    """Judge ``b`` against judge ``a`` on the same rows (paired by question)."""
    lines = [f"| row: {b} − {a} | ΔR@10 [95% CI] | ΔAE@10 [95% CI] |", "|---|---|---|"]
    for row in reports[a]:
        if row in reports[b] and row != "BM25":
            _, comparisons = compare_reports(reports[a][row], reports[b][row], ("R@10", "AE@10"))
            cells = " | ".join(
                f"{c.difference:+.2f} [{c.low:+.2f}, {c.high:+.2f}]" for c in comparisons
            )
            lines.append(f"| {row} | {cells} |")
    return lines


DATASETS = (
    ("MuSiQue KAG dev subset (100 questions, 1,839 pooled passages; out of sample)", "kag"),
    (
        "MuSiQue train fixture (100 questions, 1,890 passages; IN-SAMPLE for the learned judges)",
        "train",
    ),
    ("HotpotQA train fixture (100 questions; IN-SAMPLE for the learned judges)", "hotpotqa-train"),
)


def load_dataset(slug: str) -> tuple[list[EvalQuestion], list[Passage]]:
    """A dataset's questions and corpus (the KAG subset pools its questions' paragraphs)."""
    if slug == "kag":
        kag = load_questions(KAG_QUESTIONS)
        return kag, pool_corpus(kag)
    if slug == "train":
        return load_questions(TRAIN_QUESTIONS), load_corpus(TRAIN_CORPUS)
    return load_questions(HOTPOT_QUESTIONS), load_corpus(HOTPOT_CORPUS)


def main(argv: list[str] | None = None) -> int:
    """Run the shared sets with each judge and print the tables."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--judges", nargs="+", default=["local-pool", "fake"], choices=JUDGE_NAMES)
    parser.add_argument("--sets", nargs="+", default=[slug for _, slug in DATASETS])
    parser.add_argument("--runs", type=Path, default=Path("runs"))
    parser.add_argument("--concurrency", type=int, default=1)
    args = parser.parse_args(argv)
    args.runs.mkdir(parents=True, exist_ok=True)
    judges = ", ".join(f"`{j}`" for j in args.judges)
    print(f"Run {date.today()} on {machine()}, commit {git_revision()}, judges {judges}.\n")
    for title, slug in DATASETS:
        if slug not in args.sets:
            continue
        questions, passages = load_dataset(slug)
        path = args.runs / f"ablation-{slug}.sqlite"
        fresh = not path.exists()
        by_judge: dict[str, dict[str, dict[str, Any]]] = {}
        for name in args.judges:
            judge = make_judge(name)
            started = time.perf_counter()
            index = open_index(path, passages, judge, fresh)
            fresh = False
            prepared = time.perf_counter() - started
            reports = asyncio.run(run_rows(index, questions, judge, args.concurrency))
            print(f"### {title}, judge `{judge.identity}`\n")
            print(f"Index and passage-side work ready in {prepared:.1f} s.\n")
            print("\n".join(table(reports)) + "\n")
            print("\n".join(contrasts(reports)) + "\n", flush=True)
            by_judge[name] = reports
            index.close()
            asyncio.run(judge.aclose())
        for a, b in zip(args.judges, args.judges[1:], strict=False):
            print(f"### {title}: `{b}` against `{a}`\n")
            print("\n".join(judge_contrast(a, b, by_judge)) + "\n", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
