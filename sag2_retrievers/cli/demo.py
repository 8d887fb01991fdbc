"""``sag2 demo``: index the bundled corpus and show SAG2's evidence chains."""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

from ..backends.sqlite import SQLiteIndex
from ..corpus_io import read_corpus
from ..eval.datasets import EvalQuestion, load_questions
from ..eval.runner import (
    EvalOptions,
    EvalRun,
    QuestionRun,
)
from ..server_dsn import is_server
from .common import (
    EXIT_OK,
    HELP_FORMAT,
    Commands,
    UsageError,
    build_index,
    chosen_judge,
    concurrency,
    describe_judge,
    positive_int,
    sag2_config,
)
from .eval import evaluate_with_progress

DEMO_DEFAULT_QUESTIONS = 12


def add_demo_command(
    commands: Commands, quiet: argparse.ArgumentParser, judged: argparse.ArgumentParser
) -> None:
    """``sag2 demo``."""
    command = commands.add_parser(
        "demo",
        formatter_class=HELP_FORMAT,
        parents=[quiet, judged],
        help="multi-hop retrieval on a small bundled corpus",
    )
    command.add_argument(
        "--questions",
        type=positive_int,
        default=DEMO_DEFAULT_QUESTIONS,
        help="how many bundled questions to run",
    )
    command.add_argument("--db", help="keep the demo index here instead of a temporary file")
    command.set_defaults(handler=run_demo)


def run_demo(args: argparse.Namespace) -> int:
    """Index the bundled multi-hop corpus, run its questions, and show each evidence chain."""
    if args.db and is_server(args.db):
        raise UsageError("sag2 demo keeps its index in a file: give --db a file path")
    data = resources.files("sag2_retrievers") / "data"
    with resources.as_file(data / "demo_questions.json") as questions_path:
        questions = load_questions(questions_path)[: args.questions]
    with tempfile.TemporaryDirectory(prefix="sag2-demo-") as scratch:
        db = args.db or os.path.join(scratch, "demo.db")
        if not Path(db).exists():
            with resources.as_file(data / "demo_corpus.json") as corpus_path:
                build_index(db, read_corpus(corpus_path), args)
        with SQLiteIndex(db) as index:
            run = asyncio.run(_demo_run(index, questions, args, db))
    for number, question_run in enumerate(run.runs, start=1):
        _print_chain(number, len(run.runs), question_run)
    summary = run.summary()
    print(
        f"\naverage over {len(run.runs)} questions: R@5 {summary['recall_at']['5']:.1f}  "
        f"R@10 {summary['recall_at']['10']:.1f}  AE@10 {summary['ae_at']['10']:.1f}  "
        f"({run.judgments_per_question:.0f} judgments/question, {run.wall_seconds:.1f} s)"
    )
    return EXIT_OK


async def _demo_run(
    index: SQLiteIndex, questions: Sequence[EvalQuestion], args: argparse.Namespace, db: str
) -> EvalRun:
    """SAG2 with the chosen judge on the questions."""
    judge = chosen_judge(args)
    print(
        f"{describe_judge(args)} [{judge.identity}]; {index.document_count():,} passages; "
        f"{len(questions)} questions"
    )
    print(DEMO_LEGEND)
    options = EvalOptions("sag2", sag2_config(args), None, concurrency(args))
    return await evaluate_with_progress(index, questions, judge, options, args)


DEMO_LEGEND = (
    "Each question lists its top 5 and any gold passage in its top 10. round: 0 = a BM25 "
    "candidate, 1-2 = found by expansion (passage -> term -> passage); score: the judge's "
    "probability that the passage supplies a needed fact; gold: a passage the dataset marks "
    "as supporting the answer. R@k: % of gold passages in the top k; AE@10: % of questions "
    "with every gold passage in the top 10."
)


def _print_chain(number: int, total: int, run: QuestionRun) -> None:
    """One demo question: the top five and every gold passage in the top ten, then R@5/R@10."""
    question = run.question
    hops = f", {question.hops} hops" if question.hops else ""
    print(f"\n[{number}/{total}] {question.question}  ({question.id}{hops})")
    print(f"  {'rank':>4} {'round':>5} {'score':>6}  gold  title")
    top_ten, gold = run.sources[:10], set(question.gold)
    for rank, source in enumerate(top_ten, start=1):
        if rank <= 5 or source.identity in gold:
            mark = "yes" if source.identity in gold else ""
            columns = f"{rank:>4} {source.round_found:>5} {source.score:>6.2f}  {mark:<4}"
            print(f"  {columns}  {source.title}")
    found = {source.identity for source in top_ten}
    missed = [identity.split("\n", 1)[0] for identity in question.gold if identity not in found]
    if missed:
        print(f"  gold not in the top 10: {'; '.join(missed)}")
    metrics = run.metrics
    print(f"  R@5 {100 * metrics['R@5']:.1f}  R@10 {100 * metrics['R@10']:.1f}")
