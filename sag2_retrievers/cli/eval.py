"""``sag2 eval``: run a labelled question set, report R@k / AE@k, keep traces."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from ..backends.base import DocumentIndex
from ..corpus_io import read_corpus
from ..documents import Document
from ..errors import InvalidInputError
from ..eval.datasets import EvalQuestion, load_questions, pool_corpus
from ..eval.estimate import check_input_budget, estimate_run
from ..eval.estimate import describe as describe_estimate
from ..eval.runner import (
    EvalOptions,
    EvalRun,
    evaluate,
    read_budgets,
)
from ..judges.base import Judge
from ..server_dsn import is_server, shown
from ..trace_html import write_trace_html
from .common import (
    EXIT_OK,
    HELP_FORMAT,
    Commands,
    UsageError,
    build_index,
    chosen_judge,
    concurrency,
    existing_index,
    file_bytes,
    make_parent,
    positive_int,
    progress,
    sag2_config,
)


def add_eval_command(
    commands: Commands, quiet: argparse.ArgumentParser, judged: argparse.ArgumentParser
) -> None:
    """``sag2 eval QUESTIONS --db PATH --method bm25|sag2``."""
    command = commands.add_parser(
        "eval",
        formatter_class=HELP_FORMAT,
        parents=[quiet, judged],
        help="measure evidence recall on a question set",
    )
    command.add_argument("questions", help="MuSiQue/HippoRAG or HotpotQA question file")
    command.add_argument(
        "--db", required=True, help="index file; built from --corpus or the pooled paragraphs"
    )
    command.add_argument("--corpus", help="corpus to index when the --db file does not exist")
    command.add_argument("--method", choices=("bm25", "sag2"), required=True)
    command.add_argument("--no-context", action="store_true", help="judge without shared context")
    command.add_argument(
        "--budget-matched",
        metavar="FILE.json",
        help="one-shot BM25+judge with each question's judgment count from a sag2 report",
    )
    command.add_argument("--limit", type=positive_int, help="evaluate the first N questions")
    command.add_argument("--out", metavar="FILE.json", help="write the full report here")
    command.add_argument("--cache", metavar="PATH", help="judgment cache file (resumable runs)")
    command.add_argument(
        "--estimate", action="store_true", help="print expected judge calls and tokens; no run"
    )
    command.add_argument(
        "--max-input-tokens", type=positive_int, metavar="N", help="refuse a larger estimate"
    )
    command.add_argument(
        "--trace-html",
        metavar="DIR",
        help="with --method sag2: write one HTML trace per question here, gold passages marked",
    )
    command.add_argument(
        "--concurrency",
        type=positive_int,
        help="questions in flight (default: 16 for jev, 1 for local, 4 otherwise)",
    )
    command.set_defaults(handler=run_eval)


def run_eval(args: argparse.Namespace) -> int:
    """Evaluate a method on a question set, print the table, optionally write the report."""
    if args.budget_matched and args.method != "sag2":
        raise UsageError("--budget-matched needs --method sag2 (the one-shot pool is judged)")
    if args.trace_html and args.method != "sag2":
        raise UsageError("--trace-html needs --method sag2 (BM25 has no rounds to draw)")
    if (args.estimate or args.max_input_tokens) and args.method != "sag2":
        raise UsageError("--estimate and --max-input-tokens need --method sag2 (a judged run)")
    if args.trace_html and os.path.lexists(args.trace_html) and not Path(args.trace_html).is_dir():
        raise InvalidInputError(
            f"--trace-html {args.trace_html} exists and is not a folder; it was left as it is: "
            "name a folder for the pages (one per question)"
        )
    questions = _questions_with_gold(args.questions)
    selected = questions[: args.limit] if args.limit else questions
    budgets = read_budgets(args.budget_matched) if args.budget_matched else None
    index_seconds, index_bytes = _eval_index(args, questions)
    with existing_index(args.db) as index:
        judge = chosen_judge(args) if args.method == "sag2" else None
        config = sag2_config(args, shared_context=not args.no_context)
        if judge is not None and (args.estimate or args.max_input_tokens):
            expected = estimate_run(index, selected, judge, config)
            print(describe_estimate(expected))
            if args.estimate:
                return EXIT_OK
            check_input_budget(expected, args.max_input_tokens)
        options = EvalOptions(
            args.method,
            config,
            budgets,
            concurrency(args),
            keep_retrievals=bool(args.trace_html),
        )
        run = asyncio.run(evaluate_with_progress(index, selected, judge, options, args))
        report = run.to_json(index_seconds, index_bytes)
        if args.trace_html:
            _write_eval_traces(Path(args.trace_html), index, run)
    report.update(questions_file=str(args.questions), db=shown(args.db))
    _print_eval_table(report)
    if args.out:
        make_parent(args.out)
        Path(args.out).write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
        print(f"report written to {args.out}")
    return EXIT_OK


def _write_eval_traces(directory: Path, index: DocumentIndex, run: EvalRun) -> None:
    """One HTML trace per question, named by its position and id, gold passages marked."""
    directory.mkdir(parents=True, exist_ok=True)
    for number, question_run in enumerate(run.runs, start=1):
        if question_run.retrieval is None:
            continue
        name = f"{number:04d}-{_file_safe(question_run.question.id)}.html"
        write_trace_html(
            directory / name,
            question_run.retrieval,
            index,
            gold=question_run.question.gold,
            judge=run.judge or "",
        )
    print(f"HTML traces written to {directory}")


def _file_safe(text: str) -> str:
    """A question id reduced to characters safe in a file name on every system."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)[:80] or "question"


def _questions_with_gold(path: str) -> list[EvalQuestion]:
    """The question set, without questions that have no gold passage (R@k is undefined)."""
    questions = load_questions(path)
    kept = [question for question in questions if question.gold]
    if not kept:
        raise InvalidInputError(f"{path}: no question has a gold (supporting) passage")
    if len(kept) < len(questions):
        print(f"skipping {len(questions) - len(kept)} question(s) without gold", file=sys.stderr)
    return kept


def _eval_index(
    args: argparse.Namespace, questions: Sequence[EvalQuestion]
) -> tuple[float | None, int]:
    """Build the index (timed) unless it exists; return build seconds and its bytes (a
    PostgreSQL index must have been built with `sag2 index`)."""
    if is_server(args.db):
        with existing_index(args.db) as index:
            print(f"using the existing index {shown(args.db)}")
            return None, index.stats()["bytes"]
    if Path(args.db).exists():
        print(f"using the existing index {args.db}")
        return None, file_bytes(args.db)
    documents = read_corpus(args.corpus) if args.corpus else pooled_documents(questions)
    seconds = build_index(args.db, documents, args)
    print(f"built {args.db} from {args.corpus or 'the pooled paragraphs'} in {seconds:.2f} s")
    return seconds, file_bytes(args.db)


def pooled_documents(questions: Iterable[EvalQuestion]) -> Iterator[Document]:
    """The de-duplicated paragraphs of every question, keyed by their content ids."""
    for passage in pool_corpus(questions):
        yield Document(passage.doc_id, passage.text, passage.title)


async def evaluate_with_progress(
    index: DocumentIndex,
    questions: Sequence[EvalQuestion],
    judge: Judge | None,
    options: EvalOptions,
    args: argparse.Namespace,
) -> EvalRun:
    """The evaluation loop with a progress bar, closing the judge afterwards."""
    try:
        with progress(args, options.name, "question", total=len(questions)) as bar:
            return await evaluate(
                index, questions, judge, options, on_question=lambda _: bar.update(1)
            )
    finally:
        if judge is not None:
            await judge.aclose()


def _print_eval_table(report: dict[str, Any]) -> None:
    """The headline numbers of an evaluation report."""
    recall, ae = report["recall_at"], report["ae_at"]
    print(
        f"{report['n_questions']} questions, method {report['method']}, "
        f"judge {report['judge'] or 'none'}"
    )
    print(f"{'R@1':>7}{'R@2':>7}{'R@5':>7}{'R@10':>7}{'AE@10':>7}{'judgments/q':>13}{'s/q':>8}")
    print(
        f"{recall['1']:>7.2f}{recall['2']:>7.2f}{recall['5']:>7.2f}{recall['10']:>7.2f}"
        f"{ae['10']:>7.2f}{report['judgments_per_question']:>13.1f}"
        f"{report['seconds_per_question']:>8.3f}"
    )
    if report["cost_usd"]:
        print(f"cost ${report['cost_usd']:.6f}, {report['input_tokens']:,} input tokens")
    if report["input_tokens"]:
        print(f"input tokens {report['input_tokens']:,}, cached {_cached_share(report)}")
    if report["unscored_candidates"]:
        print(
            f"{report['unscored_candidates']} candidates left unscored (answers unreadable "
            "when asked twice): they kept their previous score or a BM25 prior"
        )


def _cached_share(report: dict[str, Any]) -> str:
    """The cached share of input tokens, or "not reported" when the server says nothing."""
    if not report["cached_input_tokens_reported"]:
        return "not reported by the server"
    return f"{report['cached_input_tokens'] / report['input_tokens']:.0%}"
