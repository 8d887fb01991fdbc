"""The ``sag2`` command line: index a corpus, query it, evaluate, compare runs, run a demo."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import sqlite3
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, TextIO

from tqdm import tqdm

from . import __version__
from ._schema import IndexSettings
from .backend import DocumentIndex
from .config import SAG2Config
from .corpus_io import DEFAULT_BATCH_SIZE, add_in_batches, read_corpus, read_folder
from .documents import Document
from .engine import SAG2Engine
from .errors import InvalidInputError, SAG2Error
from .eval.datasets import EvalQuestion, load_questions, pool_corpus
from .eval.estimate import check_input_budget, estimate_run
from .eval.estimate import describe as describe_estimate
from .eval.runner import (
    EvalOptions,
    EvalRun,
    QuestionRun,
    compare_reports,
    evaluate,
    read_budgets,
    read_report,
)
from .index import SQLiteIndex, remove_index_files
from .judges.base import Judge
from .judges.factory import JUDGE_NAMES, default_judge_name, make_judge
from .results import RetrievalResult, RetrievedUnit
from .text import DEFAULT_PROFILE, PROFILES
from .trace_html import write_trace_html

PROG = "sag2"
TEXT_PREVIEW_CHARS = 200
DEMO_DEFAULT_QUESTIONS = 12
DEFAULT_CONCURRENCY = {
    "jev": 16,
    "local": 1,
    "local-learned": 1,
    "local-similarity": 1,
    "openai": 4,
    "fake": 4,
}
EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class HelpFormat(argparse.ArgumentDefaultsHelpFormatter):
    """Every option's help shows its default, except empty ones (None, False) that say nothing."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or action.default is False:
            return action.help
        return super()._get_help_string(action)


HELP_FORMAT = HelpFormat


class UsageError(Exception):
    """Options that parse but contradict each other; reported like an argparse error."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``sag2`` command; returns 0 on success, 2 on a usage error, 1 on failure."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else EXIT_USAGE
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except UsageError as error:
        parser.print_usage(sys.stderr)
        return _fail(str(error), EXIT_USAGE)
    except SAG2Error as error:
        return _fail(str(error), EXIT_FAILURE)
    except sqlite3.Error as error:
        return _fail(f"SQLite: {error}; check that --db names a SAG2 index file", EXIT_FAILURE)
    except OSError as error:
        return _fail(_file_problem(error), EXIT_FAILURE)
    except KeyboardInterrupt:
        return _fail("interrupted", EXIT_INTERRUPTED)


def _file_problem(error: OSError) -> str:
    """An OS error as a sentence naming the file, without Python's ``[Errno N]`` prefix."""
    reason = (error.strerror or str(error)).lower()
    if error.filename is None:
        return reason
    return f"cannot use {str(error.filename)!r}: {reason}"


def _fail(message: str, code: int) -> int:
    """Print a one-line error to stderr and return the exit code."""
    print(f"{PROG}: error: {message}", file=sys.stderr)
    return code


# -- argument parsing --------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="SAG2 multi-hop retrieval over one SQLite file.",
        formatter_class=HELP_FORMAT,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    quiet = argparse.ArgumentParser(add_help=False)
    quiet.add_argument("--quiet", "-q", action="store_true", help="no progress bars")
    judged = _judge_options()
    _add_index_command(commands, quiet)
    _add_query_command(commands, quiet, judged)
    _add_eval_command(commands, quiet, judged)
    _add_compare_command(commands)
    _add_demo_command(commands, quiet, judged)
    return parser


def _judge_options() -> argparse.ArgumentParser:
    """Options shared by every command that uses a judge."""
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument(
        "--judge",
        choices=JUDGE_NAMES,
        help="evidence judge (default: jev when OPENROUTER_API_KEY or TYPESAFE_API_KEY is set, "
        "else local, the offline learned judge; local-similarity is the embedding-similarity one)",
    )
    options.add_argument("--model", help="judge model name (jev, openai)")
    options.add_argument("--base-url", help="judge server URL (jev, openai)")
    options.add_argument(
        "--judge-transport",
        choices=("chat", "completions"),
        default="chat",
        help="openai judge: one chat call per candidate, or batched /v1/completions (vLLM)",
    )
    options.add_argument(
        "--judge-group", type=_positive_int, default=1, metavar="K", help="openai judge: K per call"
    )
    options.add_argument("--hops", type=int, choices=(0, 1, 2), default=2, help="expansion rounds")
    return options


Commands = Any  # argparse's subparsers action has no public type


def _add_index_command(commands: Commands, quiet: argparse.ArgumentParser) -> None:
    """``sag2 index CORPUS --db PATH``."""
    command = commands.add_parser(
        "index",
        formatter_class=HELP_FORMAT,
        parents=[quiet],
        help="add a corpus to an index file (upsert by document id)",
    )
    command.add_argument(
        "corpus",
        help="JSON list of {title, text}, title -> [sentences], JSONL, or a folder of "
        ".txt/.md/.json/.jsonl files (searched recursively; a text file's id is its path)",
    )
    command.add_argument(
        "--db", required=True, help="index file (created if absent), or a postgresql:// URL"
    )
    command.add_argument(
        "--batch-size", type=_positive_int, default=DEFAULT_BATCH_SIZE, help="documents per commit"
    )
    command.add_argument(
        "--chunk-chars",
        type=_positive_int,
        help=f"target unit size of a new index (default: {IndexSettings().chunk_chars}; "
        "an existing index keeps its own)",
    )
    command.add_argument(
        "--profile",
        choices=PROFILES,
        help=f"analyzer profile of a new index (default: {DEFAULT_PROFILE}; 'paper' reproduces "
        "the paper's reference rankings, see docs/method.md; an existing index keeps its own)",
    )
    command.set_defaults(handler=run_index)


def _add_query_command(
    commands: Commands, quiet: argparse.ArgumentParser, judged: argparse.ArgumentParser
) -> None:
    """``sag2 query --db PATH QUESTION``."""
    command = commands.add_parser(
        "query",
        formatter_class=HELP_FORMAT,
        parents=[quiet, judged],
        help="retrieve ranked evidence for one question",
    )
    command.add_argument("question")
    command.add_argument(
        "--db", required=True, help="an index built by `sag2 index` (file or postgresql:// URL)"
    )
    command.add_argument(
        "--top-k", type=_positive_int, default=10, help="source documents to return"
    )
    command.add_argument("--trace", action="store_true", help="show every round's seeds and terms")
    command.add_argument(
        "--trace-html",
        metavar="FILE",
        help="also write the retrieval's chain (rounds, seeds, terms, scores) as one HTML page",
    )
    command.add_argument("--json", action="store_true", help="machine-readable output")
    command.set_defaults(handler=run_query)


def _add_eval_command(
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
    command.add_argument("--limit", type=_positive_int, help="evaluate the first N questions")
    command.add_argument("--out", metavar="FILE.json", help="write the full report here")
    command.add_argument("--cache", metavar="PATH", help="judgment cache file (resumable runs)")
    command.add_argument(
        "--estimate", action="store_true", help="print expected judge calls and tokens; no run"
    )
    command.add_argument(
        "--max-input-tokens", type=_positive_int, metavar="N", help="refuse a larger estimate"
    )
    command.add_argument(
        "--trace-html",
        metavar="DIR",
        help="with --method sag2: write one HTML trace per question here, gold passages marked",
    )
    command.add_argument(
        "--concurrency",
        type=_positive_int,
        help="questions in flight (default: 16 for jev, 1 for local, 4 otherwise)",
    )
    command.set_defaults(handler=run_eval)


def _add_compare_command(commands: Commands) -> None:
    """``sag2 compare A.json B.json``."""
    command = commands.add_parser(
        "compare",
        formatter_class=HELP_FORMAT,
        help="paired bootstrap comparison of two eval reports (B - A)",
    )
    command.add_argument("a", metavar="A.json")
    command.add_argument("b", metavar="B.json")
    command.add_argument("--json", action="store_true", help="machine-readable output")
    command.set_defaults(handler=run_compare)


def _add_demo_command(
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
        type=_positive_int,
        default=DEMO_DEFAULT_QUESTIONS,
        help="how many bundled questions to run",
    )
    command.add_argument("--db", help="keep the demo index here instead of a temporary file")
    command.set_defaults(handler=run_demo)


def _positive_int(text: str) -> int:
    """An argparse type: an integer of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


# -- sag2 index --------------------------------------------------------------------------------


def run_index(args: argparse.Namespace) -> int:
    """Stream a corpus file or folder into the index in committed batches; print a summary.

    When the index file is new and nothing could be committed, it is removed again, so a
    failed first ingest leaves no empty index behind.
    """
    corpus = Path(args.corpus)
    documents = read_folder(corpus, _warn) if corpus.is_dir() else read_corpus(corpus)
    if _is_server(args.db):
        return _index_on_server(args, documents)
    existed = Path(args.db).exists()
    _make_parent(args.db)
    started = time.perf_counter()
    try:
        with SQLiteIndex(args.db, _requested_settings(args)) as index:
            with _progress(args, "indexing", "doc") as bar:
                report = add_in_batches(
                    index, documents, batch_size=args.batch_size, on_batch=bar.update
                )
            stats = index.stats()
    except BaseException:
        if not existed and _holds_no_documents(args.db):
            remove_index_files(args.db)
        raise
    print(
        f"indexed {report.records:,} records in {time.perf_counter() - started:.2f} s: "
        f"{args.db} holds {stats['documents']:,} documents, {stats['units']:,} units, "
        f"{_file_bytes(args.db):,} bytes"
    )
    return EXIT_OK


def _index_on_server(args: argparse.Namespace, documents: Iterable[Document]) -> int:
    """`sag2 index` into a PostgreSQL schema (batches commit as they go, like a file)."""
    from .postgres import PostgresIndex

    started = time.perf_counter()
    with PostgresIndex(args.db, _requested_settings(args)) as index:
        with _progress(args, "indexing", "doc") as bar:
            report = add_in_batches(
                index, documents, batch_size=args.batch_size, on_batch=bar.update
            )
        stats = index.stats()
    print(
        f"indexed {report.records:,} records in {time.perf_counter() - started:.2f} s: "
        f"{_shown(args.db)} holds {stats['documents']:,} documents, {stats['units']:,} units, "
        f"{stats['bytes']:,} bytes"
    )
    return EXIT_OK


def _is_server(db: str) -> bool:
    """Whether --db names a PostgreSQL server (a URL) rather than an SQLite file."""
    return db.startswith(("postgresql://", "postgres://"))


def _shown(db: str) -> str:
    """--db as it may be printed: a server URL without its password."""
    if not _is_server(db):
        return db
    parts = urllib.parse.urlsplit(db)
    host = parts.hostname or ""
    user = f"{parts.username}@" if parts.username else ""
    port = f":{parts.port}" if parts.port else ""
    return urllib.parse.urlunsplit((parts.scheme, f"{user}{host}{port}", parts.path, "", ""))


def _requested_settings(args: argparse.Namespace) -> IndexSettings | None:
    """--chunk-chars and --profile as settings (defaults for the one not given); None, when
    neither is given, adopts an existing index's settings (or the defaults)."""
    requested = {"chunk_chars": args.chunk_chars, "analyzer_profile": args.profile}
    given = {name: value for name, value in requested.items() if value}
    return IndexSettings(**given) if given else None


def _holds_no_documents(db: str) -> bool:
    """Whether the index file is absent, unreadable as an index, or empty."""
    try:
        with SQLiteIndex(db, create=False) as index:
            return index.document_count() == 0
    except (SAG2Error, sqlite3.Error):
        return True


def _warn(message: str) -> None:
    """A warning on stderr, worded like the errors."""
    print(f"{PROG}: warning: {message}", file=sys.stderr)


# -- sag2 query --------------------------------------------------------------------------------


def run_query(args: argparse.Namespace) -> int:
    """Retrieve evidence for one question and print it (with the rounds' trace if asked)."""
    with _existing_index(args.db) as index:
        judge = _judge(args)
        result = asyncio.run(_retrieve(index, judge, SAG2Config(hops=args.hops), args))
        if args.trace_html:
            _make_parent(args.trace_html)
            write_trace_html(args.trace_html, result, index, judge=judge.identity)
        if args.json:
            print(json.dumps(_result_json(index, result, judge.identity), ensure_ascii=False))
            return EXIT_OK
        if args.trace:
            _print_trace(index, result)
        _print_hits(result)
    return EXIT_OK


async def _retrieve(
    index: DocumentIndex, judge: Judge, config: SAG2Config, args: argparse.Namespace
) -> RetrievalResult:
    """One retrieval on a fresh event loop, closing the judge afterwards."""
    engine = SAG2Engine(index, judge, config)
    try:
        return await engine.aretrieve(args.question, top_k=args.top_k)
    finally:
        await judge.aclose()


def _print_hits(result: RetrievalResult) -> None:
    """Ranked evidence: position, judge score, round found, title, doc id, shortened text."""
    if not result.hits:
        print(f"no evidence found ({result.stop_reason})")
        return
    for position, hit in enumerate(result.hits, start=1):
        print(
            f"{position:>3}. [{hit.score:.3f}] round {hit.round_found}  {hit.title}  ({hit.doc_id})"
        )
        print(f"     {_preview(hit.text)}")
    suffix = "; judge failed, lexical order" if result.degraded else ""
    print(f"{result.judgments} judgments, stopped: {result.stop_reason}{suffix}")


def _print_trace(index: DocumentIndex, result: RetrievalResult) -> None:
    """Each round's seeds (unit id and title), expansion terms and new passages."""
    titles = _unit_titles(index, result)
    for round_ in result.trace:
        print(
            f"round {round_.round}: {len(round_.new_candidates)} new passages, "
            f"{round_.judgments} judged with {round_.context_size} in context"
        )
        if round_.seeds:
            seeds = ", ".join(f"{unit} {titles.get(unit, '')!r}" for unit in round_.seeds)
            print(f"  seeds: {seeds}")
        if round_.terms:
            terms = ", ".join(f"{term} ({priority:.2f})" for term, priority in round_.terms)
            print(f"  terms: {terms}")
    print()


def _unit_titles(index: DocumentIndex, result: RetrievalResult) -> dict[int, str]:
    """Titles of every seed unit in the trace."""
    seeds = {unit for round_ in result.trace for unit in round_.seeds}
    return {unit_id: unit.title for unit_id, unit in index.units(seeds).items()}


def _result_json(index: DocumentIndex, result: RetrievalResult, judge: str) -> dict[str, Any]:
    """A retrieval as JSON: hits with offsets and metadata, usage, and the rounds' trace."""
    titles = _unit_titles(index, result)
    return {
        "question": result.question,
        "judge": judge,
        "judgments": result.judgments,
        "stop_reason": result.stop_reason,
        "degraded": result.degraded,
        "hits": [_hit_json(position, hit) for position, hit in enumerate(result.hits, start=1)],
        "trace": [
            {
                "round": round_.round,
                "seeds": [{"unit_id": u, "title": titles.get(u, "")} for u in round_.seeds],
                "terms": [{"term": term, "priority": p} for term, p in round_.terms],
                "new_passages": len(round_.new_candidates),
                "pool_size": round_.pool_size,
                "context_size": round_.context_size,
                "judgments": round_.judgments,
                "local_seconds": round_.local_seconds,
                "judge_seconds": round_.judge_seconds,
            }
            for round_ in result.trace
        ],
    }


def _hit_json(position: int, hit: RetrievedUnit) -> dict[str, Any]:
    """One hit as JSON."""
    return {
        "rank": position,
        "score": hit.score,
        "round_found": hit.round_found,
        "title": hit.title,
        "doc_id": hit.doc_id,
        "unit_id": hit.unit_id,
        "char_start": hit.char_start,
        "char_end": hit.char_end,
        "text": hit.text,
        "metadata": dict(hit.metadata),
    }


# -- sag2 eval ---------------------------------------------------------------------------------


def run_eval(args: argparse.Namespace) -> int:
    """Evaluate a method on a question set, print the table, optionally write the report."""
    if args.budget_matched and args.method != "sag2":
        raise UsageError("--budget-matched needs --method sag2 (the one-shot pool is judged)")
    if args.trace_html and args.method != "sag2":
        raise UsageError("--trace-html needs --method sag2 (BM25 has no rounds to draw)")
    if (args.estimate or args.max_input_tokens) and args.method != "sag2":
        raise UsageError("--estimate and --max-input-tokens need --method sag2 (a judged run)")
    questions = _questions_with_gold(args.questions)
    selected = questions[: args.limit] if args.limit else questions
    budgets = read_budgets(args.budget_matched) if args.budget_matched else None
    index_seconds, index_bytes = _eval_index(args, questions)
    with _existing_index(args.db) as index:
        judge = _judge(args) if args.method == "sag2" else None
        config = SAG2Config(hops=args.hops, shared_context=not args.no_context)
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
            _concurrency(args),
            keep_retrievals=bool(args.trace_html),
        )
        run = asyncio.run(_evaluate(index, selected, judge, options, args))
        report = run.to_json(index_seconds, index_bytes)
        if args.trace_html:
            _write_eval_traces(Path(args.trace_html), index, run)
    report.update(questions_file=str(args.questions), db=_shown(args.db))
    _print_eval_table(report)
    if args.out:
        _make_parent(args.out)
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
    if _is_server(args.db):
        with _existing_index(args.db) as index:
            print(f"using the existing index {_shown(args.db)}")
            return None, index.stats()["bytes"]
    if Path(args.db).exists():
        print(f"using the existing index {args.db}")
        return None, _file_bytes(args.db)
    documents = read_corpus(args.corpus) if args.corpus else pooled_documents(questions)
    seconds = _build_index(args.db, documents, args)
    print(f"built {args.db} from {args.corpus or 'the pooled paragraphs'} in {seconds:.2f} s")
    return seconds, _file_bytes(args.db)


def pooled_documents(questions: Iterable[EvalQuestion]) -> Iterator[Document]:
    """The de-duplicated paragraphs of every question, keyed by their content ids."""
    for passage in pool_corpus(questions):
        yield Document(passage.doc_id, passage.text, passage.title)


def _build_index(db: str, documents: Iterable[Document], args: argparse.Namespace) -> float:
    """Create an index of the documents and return the seconds it took.

    A half-built file is removed if anything fails, so a later run does not mistake it for
    a finished index.
    """
    _make_parent(db)
    started = time.perf_counter()
    try:
        with SQLiteIndex(db) as index, _progress(args, "indexing", "doc") as bar:
            add_in_batches(index, documents, on_batch=bar.update)
    except BaseException:
        remove_index_files(db)
        raise
    return time.perf_counter() - started


def _concurrency(args: argparse.Namespace) -> int:
    """Questions in flight: the option, else a default suited to the judge.

    The remote JEV judge gains from many questions in flight. The local judge is CPU-bound
    and questions in flight at once would encode the same passages before either caches them.
    """
    if getattr(args, "concurrency", None):
        return int(args.concurrency)
    return DEFAULT_CONCURRENCY[_judge_name(args)]


async def _evaluate(
    index: DocumentIndex,
    questions: Sequence[EvalQuestion],
    judge: Judge | None,
    options: EvalOptions,
    args: argparse.Namespace,
) -> EvalRun:
    """The evaluation loop with a progress bar, closing the judge afterwards."""
    try:
        with _progress(args, options.name, "question", total=len(questions)) as bar:
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


# -- sag2 compare ------------------------------------------------------------------------------


def run_compare(args: argparse.Namespace) -> int:
    """Paired bootstrap comparison of R@5, R@10 and AE@10 between two reports."""
    shared, comparisons = compare_reports(read_report(args.a), read_report(args.b))
    if args.json:
        metrics = {
            c.metric: {
                "mean_a": c.mean_a,
                "mean_b": c.mean_b,
                "difference": c.difference,
                "ci95": [c.low, c.high],
            }
            for c in comparisons
        }
        payload = {"a": args.a, "b": args.b, "n_questions": shared, "metrics": metrics}
        print(json.dumps(payload, indent=2))
        return EXIT_OK
    print(f"{shared} shared questions; A = {args.a}, B = {args.b}")
    print(f"{'metric':<8}{'A':>8}{'B':>8}{'B - A':>8}  paired 95% CI")
    for c in comparisons:
        print(
            f"{c.metric:<8}{c.mean_a:>8.2f}{c.mean_b:>8.2f}{c.difference:>+8.2f}"
            f"  [{c.low:+.2f}, {c.high:+.2f}]"
        )
    return EXIT_OK


# -- sag2 demo ---------------------------------------------------------------------------------


def run_demo(args: argparse.Namespace) -> int:
    """Index the bundled multi-hop corpus, run its questions, and show each evidence chain."""
    data = resources.files("sag2_retrievers") / "data"
    with resources.as_file(data / "demo_questions.json") as questions_path:
        questions = load_questions(questions_path)[: args.questions]
    with tempfile.TemporaryDirectory(prefix="sag2-demo-") as scratch:
        db = args.db or os.path.join(scratch, "demo.db")
        if not Path(db).exists():
            with resources.as_file(data / "demo_corpus.json") as corpus_path:
                _build_index(db, read_corpus(corpus_path), args)
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
    """SAG2 with the chosen judge (its embedding cache in the demo index) on the questions."""
    judge = _judge(args, db_path=db)
    print(
        f"judge {judge.identity}; {index.document_count():,} passages; {len(questions)} questions"
    )
    options = EvalOptions("sag2", SAG2Config(hops=args.hops), None, _concurrency(args))
    return await _evaluate(index, questions, judge, options, args)


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


# -- shared helpers ----------------------------------------------------------------------------


def _judge(args: argparse.Namespace, db_path: str | None = None) -> Judge:
    """The judge named by --judge (or the default), with its cache when --cache is given."""
    return make_judge(
        _judge_name(args),
        model=args.model,
        base_url=args.base_url,
        cache_path=getattr(args, "cache", None),
        db_path=db_path or getattr(args, "db", None),
        transport=args.judge_transport,
        group_size=args.judge_group,
    )


def _judge_name(args: argparse.Namespace) -> str:
    """The --judge option, else the default judge."""
    return str(args.judge or default_judge_name())


@contextlib.contextmanager
def _existing_index(db: str) -> Iterator[DocumentIndex]:
    """Open an index that must already exist (opening a missing path would create one)."""
    if _is_server(db):
        from .postgres import PostgresIndex

        with PostgresIndex(db, create=False) as server_index:
            yield server_index
        return
    if not Path(db).is_file():
        raise InvalidInputError(
            f"index file {db!r} does not exist; build it with `sag2 index CORPUS --db {db}`"
        )
    with SQLiteIndex(db, create=False) as index:
        yield index


@contextlib.contextmanager
def _progress(
    args: argparse.Namespace, description: str, unit: str, total: int | None = None
) -> Iterator[tqdm[Any]]:
    """A progress bar on stderr, hidden with --quiet or when stderr is not a terminal."""
    stream: TextIO = sys.stderr
    hidden = bool(getattr(args, "quiet", False)) or not stream.isatty()
    with tqdm(total=total, desc=description, unit=unit, file=stream, disable=hidden) as bar:
        yield bar


def _file_bytes(db: str) -> int:
    """The size of an index file with its write-ahead log, if one is present."""
    wal = Path(db + "-wal")
    return Path(db).stat().st_size + (wal.stat().st_size if wal.exists() else 0)


def _make_parent(path: str) -> None:
    """Create the directory that will hold ``path``."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)


def _preview(text: str) -> str:
    """The text on one line, shortened to about 200 characters."""
    flat = " ".join(text.split())
    if len(flat) <= TEXT_PREVIEW_CHARS:
        return flat
    return flat[:TEXT_PREVIEW_CHARS].rsplit(" ", 1)[0] + " ..."


if __name__ == "__main__":
    sys.exit(main())
