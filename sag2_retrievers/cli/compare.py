"""``sag2 compare``: compare two saved evaluation reports with a paired bootstrap."""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from typing import Any

from ..eval.pool_diagnostics import TOP_K, pools_from_report
from ..eval.runner import (
    compare_reports,
    read_report,
)
from .common import EXIT_OK, HELP_FORMAT, Commands


def add_compare_command(commands: Commands) -> None:
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


def run_compare(args: argparse.Namespace) -> int:
    """Paired bootstrap comparison of R@5, R@10 and AE@10 between two reports, then where
    each run's gold passages went (pool diagnostics, on the questions both reports hold)."""
    report_a, report_b = read_report(args.a), read_report(args.b)
    shared, comparisons = compare_reports(report_a, report_b)
    pools = shared_pools(report_a, report_b)
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
        payload = {
            "a": args.a,
            "b": args.b,
            "n_questions": shared,
            "metrics": metrics,
            "pool": pools,
        }
        print(json.dumps(payload, indent=2))
        return EXIT_OK
    print(f"{shared} shared questions; A = {args.a}, B = {args.b}")
    print(f"{'metric':<8}{'A':>8}{'B':>8}{'B - A':>8}  paired 95% CI")
    for c in comparisons:
        print(
            f"{c.metric:<8}{c.mean_a:>8.2f}{c.mean_b:>8.2f}{c.difference:>+8.2f}"
            f"  [{c.low:+.2f}, {c.high:+.2f}]"
        )
    print_pools(pools)
    return EXIT_OK


def shared_pools(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    """Each report's pool diagnostics over the questions both hold."""
    ids_b = {str(row["id"]) for row in b["per_question"]}
    ids_a = {str(row["id"]) for row in a["per_question"]}
    return {
        "a": pools_from_report([r for r in a["per_question"] if str(r["id"]) in ids_b]),
        "b": pools_from_report([r for r in b["per_question"] if str(r["id"]) in ids_a]),
    }


def print_pools(pools: Mapping[str, Mapping[str, Any]]) -> None:
    """One line per run and round: % of gold in the pool, in the top k, in the pool only."""
    if not any(pools[side]["rounds"] for side in ("a", "b")):
        return
    print(f"\ngold passages, % (micro)  in pool  in top {TOP_K}  in pool, not top {TOP_K}")
    for side in ("a", "b"):
        for row in pools[side]["rounds"]:
            print(
                f"{side.upper()} round {row['round']:<16}{row['gold_in_pool']:>7.1f}"
                f"{row[f'gold_in_top_{TOP_K}']:>11.1f}{row[f'in_pool_not_top_{TOP_K}']:>21.1f}"
            )
