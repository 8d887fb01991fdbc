"""``sag2 index``: build or extend an index (a SQLite file or a PostgreSQL schema)."""

from __future__ import annotations

import argparse
import sqlite3
import time
from collections.abc import Iterable
from pathlib import Path

from ..backends.sqlite import SQLiteIndex, remove_index_files
from ..corpus_io import DEFAULT_BATCH_SIZE, add_in_batches, read_corpus, read_folder
from ..documents import Document
from ..errors import SAG2Error
from ..settings import IndexSettings
from ..text import DEFAULT_PROFILE, PROFILES
from .common import (
    EXIT_OK,
    HELP_FORMAT,
    Commands,
    file_bytes,
    is_server,
    make_parent,
    positive_int,
    progress,
    shown,
    warn,
)


def add_index_command(commands: Commands, quiet: argparse.ArgumentParser) -> None:
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
        "--batch-size", type=positive_int, default=DEFAULT_BATCH_SIZE, help="documents per commit"
    )
    command.add_argument(
        "--chunk-chars",
        type=positive_int,
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


def run_index(args: argparse.Namespace) -> int:
    """Stream a corpus file or folder into the index in committed batches; print a summary.

    When the index file is new and nothing could be committed, it is removed again, so a
    failed first ingest leaves no empty index behind.
    """
    corpus = Path(args.corpus)
    documents = read_folder(corpus, warn) if corpus.is_dir() else read_corpus(corpus)
    if is_server(args.db):
        return _index_on_server(args, documents)
    existed = Path(args.db).exists()
    make_parent(args.db)
    started = time.perf_counter()
    try:
        with SQLiteIndex(args.db, _requested_settings(args)) as index:
            with progress(args, "indexing", "doc") as bar:
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
        f"{file_bytes(args.db):,} bytes"
    )
    return EXIT_OK


def _index_on_server(args: argparse.Namespace, documents: Iterable[Document]) -> int:
    """`sag2 index` into a PostgreSQL schema (batches commit as they go, like a file)."""
    from ..backends.postgres import PostgresIndex

    started = time.perf_counter()
    with PostgresIndex(args.db, _requested_settings(args)) as index:
        with progress(args, "indexing", "doc") as bar:
            report = add_in_batches(
                index, documents, batch_size=args.batch_size, on_batch=bar.update
            )
        stats = index.stats()
    print(
        f"indexed {report.records:,} records in {time.perf_counter() - started:.2f} s: "
        f"{shown(args.db)} holds {stats['documents']:,} documents, {stats['units']:,} units, "
        f"{stats['bytes']:,} bytes"
    )
    return EXIT_OK


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
