"""``sag2 compare``: compare two saved evaluation reports with a paired bootstrap."""

from __future__ import annotations

import argparse
import json

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
