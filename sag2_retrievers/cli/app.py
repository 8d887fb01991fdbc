"""The ``sag2`` entry point: the parser of every subcommand, dispatch, and error reporting."""

from __future__ import annotations

import argparse
import io
import sqlite3
import sys
from collections.abc import Callable, Sequence

from .. import __version__
from ..errors import SAG2Error
from .common import (
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    HELP_FORMAT,
    PROG,
    UsageError,
    judge_options,
)
from .compare import add_compare_command
from .demo import add_demo_command
from .eval import add_eval_command
from .index import add_index_command
from .query import add_query_command


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``sag2`` command; returns 0 on success, 2 on a usage error, 1 on failure."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else EXIT_USAGE
    handler: Callable[[argparse.Namespace], int] = args.handler
    _tolerant_output()
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
    except MemoryError:
        return _fail(
            "out of memory; give a large corpus as JSONL, or lower --batch-size", EXIT_FAILURE
        )
    except KeyboardInterrupt as interrupt:
        # A command that knows what the interruption kept says so (sag2 index: the count).
        kept = f": {interrupt}" if str(interrupt) else ""
        return _fail(f"interrupted{kept}", EXIT_INTERRUPTED)


def _tolerant_output() -> None:
    """Let a terminal that cannot show a character (an ASCII locale) get an escape instead of
    a UnicodeEncodeError traceback halfway through the results."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")


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
    judged = judge_options()
    add_index_command(commands, quiet)
    add_query_command(commands, quiet, judged)
    add_eval_command(commands, quiet, judged)
    add_compare_command(commands)
    add_demo_command(commands, quiet, judged)
    return parser
