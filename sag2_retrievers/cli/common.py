"""Helpers every ``sag2`` subcommand shares: exit codes, help format, judges, index files."""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, TextIO

from tqdm import tqdm

from ..backends.base import DocumentIndex
from ..backends.sqlite import SQLiteIndex, remove_index_files
from ..config import SAG2Config
from ..corpus_io import add_in_batches
from ..documents import Document
from ..errors import InvalidInputError
from ..judges.base import Judge
from ..judges.factory import (
    JUDGE_NAMES,
    RETIRED_JUDGES,
    ServerOptions,
    default_judge_name,
    make_judge,
)
from ..judges.llm.transports import TEMPLATES
from ..server_dsn import is_server, shown

PROG = "sag2"
TEXT_PREVIEW_CHARS = 200
DEFAULT_CONCURRENCY = {
    "jev": 16,
    "local": 1,
    "local-pool": 1,
    "openai": 4,
    "fake": 4,
}
EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
JUDGE_DESCRIPTIONS = {
    "local": "the offline pool judge (lexical evidence features; nothing to prepare)",
    "local-pool": "the offline pool judge (lexical evidence features; nothing to prepare)",
    "jev": "JEV, the paper's hosted judge (sends passages to its API)",
    "openai": "your OpenAI-compatible model (sends passages to its server)",
    "fake": "a deterministic word-overlap judge for tests",
}


class HelpFormat(argparse.ArgumentDefaultsHelpFormatter):
    """Every option's help shows its default, except empty ones (None, False) that say nothing."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or action.default is False:
            return action.help
        return super()._get_help_string(action)


HELP_FORMAT = HelpFormat


class UsageError(Exception):
    """Options that parse but contradict each other; reported like an argparse error."""


def judge_name(name: str) -> str:
    """A --judge value, refusing a retired judge's name with what to use instead."""
    if name in RETIRED_JUDGES:
        raise argparse.ArgumentTypeError(f"judge {name!r}: {RETIRED_JUDGES[name]}")
    return name


def judge_options() -> argparse.ArgumentParser:
    """Options shared by every command that uses a judge."""
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument(
        "--judge",
        type=judge_name,
        choices=JUDGE_NAMES,
        help="evidence judge (default: jev when OPENROUTER_API_KEY or TYPESAFE_API_KEY is set, "
        "else local, the offline pool judge)",
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
        "--judge-group", type=positive_int, default=1, metavar="K", help="openai judge: K per call"
    )
    options.add_argument(
        "--judge-template",
        metavar="NAME|FILE",
        help="openai judge, completions transport: the model's chat template, one of "
        f"{', '.join(TEMPLATES)}, a Jinja template file, or 'server' for the one "
        "llama-server reports at /props (default chatml)",
    )
    options.add_argument(
        "--judge-fold-system",
        action="store_true",
        help="openai judge, chat transport: send the instruction inside the user message, for "
        "chat formats that drop system messages (llama-cpp-python's gemma)",
    )
    options.add_argument(
        "--judge-concurrency",
        type=positive_int,
        metavar="N",
        help="openai judge: requests in flight (default 8; halved after each timeout); "
        "1 suits a server with one slot",
    )
    options.add_argument(
        "--judge-timeout",
        type=positive_float,
        metavar="SECONDS",
        help="openai judge: seconds one request attempt may take (default 120)",
    )
    options.add_argument(
        "--deadline",
        type=positive_float,
        metavar="SECONDS",
        help="give up the judge after this many seconds per question (the judge's error "
        "then applies); default: no deadline",
    )
    options.add_argument("--hops", type=int, choices=(0, 1, 2), default=2, help="expansion rounds")
    return options


def sag2_config(args: argparse.Namespace, **settings: Any) -> SAG2Config:
    """The engine settings the judge options choose (hops, deadline), with ``settings``."""
    return SAG2Config(hops=args.hops, deadline_seconds=args.deadline, **settings)


Commands = Any  # argparse's subparsers action has no public type


def positive_int(text: str) -> int:
    """An argparse type: an integer of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def positive_float(text: str) -> float:
    """An argparse type: a number above 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
    return value


def warn(message: str) -> None:
    """A warning on stderr, worded like the errors."""
    print(f"{PROG}: warning: {message}", file=sys.stderr)


def build_index(db: str, documents: Iterable[Document], args: argparse.Namespace) -> float:
    """Create an index of the documents and return the seconds it took.

    A half-built file is removed if anything fails, so a later run does not mistake it for
    a finished index.
    """
    make_parent(db)
    started = time.perf_counter()
    try:
        with SQLiteIndex(db) as index, progress(args, "indexing", "doc") as bar:
            add_in_batches(index, documents, on_batch=bar.update)
    except BaseException:
        remove_index_files(db)
        raise
    return time.perf_counter() - started


def concurrency(args: argparse.Namespace) -> int:
    """Questions in flight: the option, else a default suited to the judge.

    The remote JEV judge gains from many questions in flight. The local judge is CPU-bound
    and questions in flight at once would encode the same passages before either caches them.
    """
    if getattr(args, "concurrency", None):
        return int(args.concurrency)
    return DEFAULT_CONCURRENCY[_judge_name(args)]


def chosen_judge(args: argparse.Namespace) -> Judge:
    """The judge named by --judge (or the default), with its cache when --cache is given."""
    return make_judge(
        _judge_name(args),
        model=args.model,
        base_url=args.base_url,
        cache_path=getattr(args, "cache", None),
        server=ServerOptions(
            args.judge_transport,
            args.judge_group,
            args.judge_template,
            args.judge_concurrency,
            args.judge_timeout,
            args.judge_fold_system,
        ),
    )


def describe_judge(args: argparse.Namespace) -> str:
    """The chosen judge's name and what it is, for a command's first line of output."""
    name = _judge_name(args)
    return f"judge: {name}, {JUDGE_DESCRIPTIONS[name]}"


def _judge_name(args: argparse.Namespace) -> str:
    """The --judge option, else the default judge."""
    return str(args.judge or default_judge_name())


@contextlib.contextmanager
def existing_index(db: str) -> Iterator[DocumentIndex]:
    """Open an index that must already exist (opening a missing path would create one) and
    hold documents: an empty one answers nothing, whatever the question's wording."""
    if is_server(db):
        from ..backends.postgres import PostgresIndex

        with PostgresIndex(db, create=False) as server_index:
            _refuse_empty(server_index, shown(db))
            yield server_index
        return
    refuse_folder(db)
    if not Path(db).is_file():
        raise InvalidInputError(
            f"index file {db!r} does not exist; build it with `sag2 index CORPUS --db {db}`"
        )
    with SQLiteIndex(db, create=False) as index:
        _refuse_empty(index, db)
        yield index


def refuse_folder(db: str) -> None:
    """Refuse a --db naming a folder, saying so (an index is one file)."""
    if Path(db).is_dir():
        raise InvalidInputError(
            f"--db {db!r} is a folder; an index is one file: give a file path such as "
            f"{str(Path(db) / 'index.sqlite')!r}"
        )


def _refuse_empty(index: DocumentIndex, name: str) -> None:
    """Refuse an index holding no documents, naming the command that fills it."""
    if index.document_count() == 0:
        raise InvalidInputError(
            f"index {name!r} is empty (0 documents), so no question can find anything; add "
            f"documents with `sag2 index CORPUS --db {name}`"
        )


@contextlib.contextmanager
def progress(
    args: argparse.Namespace, description: str, unit: str, total: int | None = None
) -> Iterator[tqdm[Any]]:
    """A progress bar on stderr, hidden with --quiet or when stderr is not a terminal."""
    stream: TextIO = sys.stderr
    hidden = bool(getattr(args, "quiet", False)) or not stream.isatty()
    with tqdm(total=total, desc=description, unit=unit, file=stream, disable=hidden) as bar:
        yield bar


def file_bytes(db: str) -> int:
    """The size of an index file with its write-ahead log, if one is present."""
    wal = Path(db + "-wal")
    return Path(db).stat().st_size + (wal.stat().st_size if wal.exists() else 0)


def make_parent(path: str) -> None:
    """Create the directory that will hold ``path``."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)


def preview(text: str, terms: Iterable[str] = ()) -> str:
    """The text on one line, shortened to about 200 characters around the first place one of
    ``terms`` occurs (what matched), else from its start."""
    flat = " ".join(text.split())
    if len(flat) <= TEXT_PREVIEW_CHARS:
        return flat
    folded = flat.casefold()
    found = [at for term in terms if (at := folded.find(term.casefold())) >= 0]
    start = max(0, min(found, default=0) - TEXT_PREVIEW_CHARS // 4)
    if start:
        start = flat.find(" ", start) + 1 or start
    excerpt = flat[start : start + TEXT_PREVIEW_CHARS].rsplit(" ", 1)[0]
    return ("... " if start else "") + excerpt + " ..."
