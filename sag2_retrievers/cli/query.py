"""``sag2 query``: answer one question from an index and print the hits or JSON."""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from ..backends.base import DocumentIndex
from ..config import SAG2Config
from ..engine import SAG2Engine
from ..judges.base import Judge
from ..lexical import bm25_retrieve
from ..output_files import require_replaceable_html
from ..query import query_terms
from ..results import RetrievalResult, RetrievedUnit, why_empty
from ..trace_html import write_trace_html
from .common import (
    EXIT_OK,
    HELP_FORMAT,
    Commands,
    UsageError,
    chosen_judge,
    describe_judge,
    existing_index,
    make_parent,
    positive_int,
    preview,
    sag2_config,
)

MAX_QUERY_TOKENS = 80  # as the backends' query_terms default
SCORE_LEGEND = (
    "[score]: the judge's probability that the passage supplies a needed fact; round: 0 = a "
    "BM25 candidate, 1-2 = found by expansion; the top 10 are reordered for diversity, so "
    "scores need not descend"
)
BM25_LINE = "method: bm25, the index's BM25 ranking alone (no judge, no expansion)"
BM25_LEGEND = (
    "[score]: the passage's BM25 score against the question (higher is better); round 0: "
    "every hit is a BM25 candidate; one line per source document, its best passage"
)


def add_query_command(
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
        "--method",
        choices=("bm25", "sag2"),
        default="sag2",
        help="sag2: judged rounds with expansion; bm25: the index's BM25 order, no judge",
    )
    command.add_argument(
        "--db", required=True, help="an index built by `sag2 index` (file or postgresql:// URL)"
    )
    command.add_argument(
        "--top-k", type=positive_int, default=10, help="source documents to return"
    )
    command.add_argument("--trace", action="store_true", help="show every round's seeds and terms")
    command.add_argument(
        "--trace-html",
        metavar="FILE",
        help="also write the retrieval's chain (rounds, seeds, terms, scores) as one HTML page",
    )
    command.add_argument("--json", action="store_true", help="machine-readable output")
    command.set_defaults(handler=run_query)


def run_query(args: argparse.Namespace) -> int:
    """Retrieve evidence for one question and print it (with the rounds' trace if asked)."""
    if args.method == "bm25" and (args.trace or args.trace_html):
        raise UsageError("--trace and --trace-html need --method sag2 (BM25 has no rounds)")
    if args.trace_html:
        require_replaceable_html(args.trace_html)
    with existing_index(args.db) as index:
        if args.method == "bm25":
            result, judge = bm25_retrieve(index, args.question, args.top_k), None
        else:
            result, judge = _judged_retrieval(index, args)
        if args.json:
            print(json.dumps(_result_json(index, result, args.method, judge), ensure_ascii=False))
            return EXIT_OK
        print(describe_judge(args) if judge is not None else BM25_LINE)
        if args.trace:
            _print_trace(index, result)
        _print_hits(
            result, query_terms(index, args.question, MAX_QUERY_TOKENS) if result.hits else []
        )
        _print_footer(result, args.method)
    return EXIT_OK


def _judged_retrieval(
    index: DocumentIndex, args: argparse.Namespace
) -> tuple[RetrievalResult, str]:
    """SAG2 with the chosen judge (its HTML trace written if asked); the judge's identity."""
    judge = chosen_judge(args)
    result = asyncio.run(_retrieve(index, judge, sag2_config(args), args))
    if args.trace_html:
        make_parent(args.trace_html)
        write_trace_html(args.trace_html, result, index, judge=judge.identity)
    return result, judge.identity


async def _retrieve(
    index: DocumentIndex, judge: Judge, config: SAG2Config, args: argparse.Namespace
) -> RetrievalResult:
    """One retrieval on a fresh event loop, closing the judge afterwards."""
    engine = SAG2Engine(index, judge, config)
    try:
        return await engine.aretrieve(args.question, top_k=args.top_k)
    finally:
        await judge.aclose()


def _print_hits(result: RetrievalResult, terms: list[str]) -> None:
    """Ranked evidence: position, score, round found, title, doc id, the text around what
    matched; a hit whose text repeats an earlier one's is named on that hit's line instead."""
    if not result.hits:
        print(f"no evidence found: {why_empty(result)}")
        return
    first_with_text: dict[str, list[str]] = {}
    shown = [h for h in result.hits if _first_of_its_text(h, first_with_text)]
    for position, hit in enumerate(shown, start=1):
        print(
            f"{position:>3}. [{hit.score:.3f}] round {hit.round_found}  {hit.title}  ({hit.doc_id})"
        )
        print(f"     {preview(hit.text, terms)}")
        if repeats := first_with_text[hit.text][1:]:
            print(f"     same text also in: {', '.join(repeats)}")


def _print_footer(result: RetrievalResult, method: str) -> None:
    """What the scores mean, and for SAG2 the judgments spent and why the rounds stopped."""
    if not result.hits:
        return
    if method == "bm25":
        print(BM25_LEGEND)
        return
    suffix = "; judge failed, lexical order" if result.degraded else ""
    if result.usage.degraded:
        suffix += f"; {result.usage.degraded} left unscored (unreadable answers)"
    print(f"{result.judgments} judgments, stopped: {result.stop_reason}{suffix}")
    print(SCORE_LEGEND)


def _first_of_its_text(hit: RetrievedUnit, first_with_text: dict[str, list[str]]) -> bool:
    """Record the hit under its text; True when no earlier hit had the same text."""
    first_with_text.setdefault(hit.text, []).append(hit.doc_id)
    return len(first_with_text[hit.text]) == 1


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


def _result_json(
    index: DocumentIndex, result: RetrievalResult, method: str, judge: str | None
) -> dict[str, Any]:
    """A retrieval as JSON: hits with offsets and metadata, usage, and the rounds' trace (BM25:
    no judge, no rounds)."""
    titles = _unit_titles(index, result)
    return {
        "question": result.question,
        "method": method,
        "judge": judge,
        "judgments": result.judgments,
        "stop_reason": result.stop_reason,
        "degraded": result.degraded,
        "unscored": result.usage.degraded,
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
