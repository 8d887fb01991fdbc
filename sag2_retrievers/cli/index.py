"""``sag2 index``: build or extend an index (a SQLite file or a PostgreSQL schema)."""

from __future__ import annotations

import argparse
import sqlite3
import time
from collections.abc import Iterable
from pathlib import Path

from ..analysis import DEFAULT_PROFILE, PROFILES
from ..backends.base import DocumentIndex
from ..backends.sqlite import SQLiteIndex, remove_index_files
from ..corpus_folder import SKIP_REASONS, UNREADABLE, FolderCorpus, FolderTally
from ..corpus_io import (
    DEFAULT_BATCH_CHARS,
    DEFAULT_BATCH_SIZE,
    IngestReport,
    add_in_batches,
    read_corpus,
    record_total,
)
from ..documents import Document
from ..errors import InvalidInputError, SAG2Error
from ..id_claims import IdClaims
from ..input_files import checked_encoding
from ..server_dsn import is_server, shown
from ..settings import IndexSettings
from .common import (
    EXIT_OK,
    HELP_FORMAT,
    Commands,
    file_bytes,
    make_parent,
    positive_int,
    progress,
    refuse_folder,
    warn,
)

SETTING_OPTIONS = {"chunk_chars": "--chunk-chars", "analyzer_profile": "--profile"}
# Documents and characters per commit into a SQLite file: each commit costs an upsert per
# distinct body term, an FTS5 flush and a postings segment, so larger commits build faster
# (docs/benchmarks.md, issue 35 round two); three batches in flight stay a few tens of MB.
# PostgreSQL keeps the library's smaller batches, with which its memory was measured.
SQLITE_BATCH_SIZE = 10_000
SQLITE_BATCH_CHARS = 8_000_000


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
        help="JSON list of {title, text}, title -> [sentences], JSONL, a text file, or a "
        "folder (searched recursively: .json/.jsonl files as corpora, every other text file "
        "as one document whose id is its path inside the folder)",
    )
    command.add_argument(
        "--db", required=True, help="index file (created if absent), or a postgresql:// URL"
    )
    command.add_argument(
        "--batch-size",
        type=positive_int,
        help=f"documents per commit (default: {SQLITE_BATCH_SIZE:,} into a file, "
        f"{DEFAULT_BATCH_SIZE:,} into PostgreSQL; a batch also ends at "
        f"{SQLITE_BATCH_CHARS:,} / {DEFAULT_BATCH_CHARS:,} characters)",
    )
    command.add_argument(
        "--chunk-chars",
        type=positive_int,
        help=f"target unit size of a new index (default: {IndexSettings().chunk_chars}; "
        "an existing index keeps its own: another value is refused)",
    )
    command.add_argument(
        "--profile",
        choices=PROFILES,
        help=f"analyzer profile of a new index (default: {DEFAULT_PROFILE}; 'paper' reproduces "
        "the paper's reference rankings, see docs/method.md; an existing index keeps its own: "
        "another profile is refused)",
    )
    command.add_argument(
        "--glob",
        action="append",
        metavar="PATTERN",
        help="in a folder, read only files whose path matches (repeatable; e.g. '*.rst', "
        "'README*'; default: every file that is not binary or hidden)",
    )
    command.add_argument(
        "--encoding",
        help="encoding of text that is not UTF-8 and has no byte-order mark (e.g. latin-1, "
        "cp1252); default: such files are listed and the command fails after the others",
    )
    command.add_argument(
        "--read-compressed",
        action="store_true",
        help="in a folder, read .gz/.bz2/.xz files decompressed (up to 128 MiB each, e.g. "
        "Debian's changelog.Debian.gz); default: counted as skipped, since long changelogs "
        "crowd other answers out (docs/benchmarks.md, issue 33)",
    )
    command.add_argument(
        "--skip-unreadable",
        action="store_true",
        help="in a folder, skip files that cannot be read (not UTF-8, too large, not a valid "
        ".json/.jsonl corpus) with a warning instead of failing after the others are indexed",
    )
    command.add_argument(
        "--skip-duplicates",
        action="store_true",
        help="accept records whose id an earlier record of the same run has with other content "
        "(the first is kept; each is listed either way) instead of failing after the others "
        "are indexed",
    )
    command.set_defaults(handler=run_index)


def run_index(args: argparse.Namespace) -> int:
    """Stream a corpus file or folder into the index in committed batches; print a summary.

    Documents stored already with the same text and metadata are not rewritten. When the
    index file is new and nothing could be committed, it is removed again, so a failed first
    ingest leaves no empty index behind. Unreadable files of a folder fail the command after
    every other file is indexed, unless --encoding or --skip-unreadable says what to do; so do
    records whose id an earlier record of the run has with other content (the first is kept),
    unless --skip-duplicates.
    """
    fallback = checked_encoding(args.encoding)
    corpus = Path(args.corpus)
    tally = FolderTally() if corpus.is_dir() else None
    claims = IdClaims()
    if is_server(args.db):
        return _index_on_server(args, corpus, tally, claims, fallback)
    refuse_folder(args.db)
    existed = Path(args.db).exists()
    make_parent(args.db)
    started = time.perf_counter()
    try:
        with SQLiteIndex(args.db, _requested_settings(args)) as index:
            report = _ingest(args, index, corpus, tally, claims, fallback)
            stats = index.stats()
    except BaseException as error:
        count = _stored_documents(args.db)
        if not existed and count == 0:
            remove_index_files(args.db)
        if isinstance(error, KeyboardInterrupt):
            raise KeyboardInterrupt(_saved(args.db, count)) from None
        raise
    print(
        f"indexed {_records(report, claims)} in {time.perf_counter() - started:.2f} s: "
        f"{args.db} holds {stats['documents']:,} documents, {stats['units']:,} units, "
        f"{file_bytes(args.db):,} bytes" + _files(tally)
    )
    return _outcome(args, tally, claims)


def _ingest(
    args: argparse.Namespace,
    index: DocumentIndex,
    corpus: Path,
    tally: FolderTally | None,
    claims: IdClaims,
    fallback: str | None,
) -> IngestReport:
    """Read the corpus into the index under a progress bar (its total: the files found)."""
    if tally is None:
        documents: Iterable[Document] = claims.kept(read_corpus(corpus, fallback), str(corpus))
        total = record_total(corpus)
    else:
        folder = FolderCorpus.at(
            corpus, args.glob or (), fallback, read_compressed=args.read_compressed
        )
        files = folder.files(tally)
        documents, total = folder.documents(files, tally, claims), len(files)
    with progress(args, "indexing", "doc", total=total) as bar:
        if tally is not None:
            tally.on_skip = bar.update
        size, chars = _batch_limits(args, index)
        report = add_in_batches(
            index,
            documents,
            batch_size=size,
            batch_chars=chars,
            on_batch=bar.update,
            skip_unchanged=True,
        )
    for conflict in claims.conflicts:
        warn(conflict.sentence())
    if tally is not None:
        _warn_skipped(tally)
        if tally.read == 0:
            raise InvalidInputError(
                f"folder {str(corpus)!r} holds no file to index: {tally.summary()}"
            )
    return report


def _batch_limits(args: argparse.Namespace, index: DocumentIndex) -> tuple[int, int]:
    """Documents and characters per commit: --batch-size (or the backend's default), and the
    backend's character bound."""
    if isinstance(index, SQLiteIndex):
        return args.batch_size or SQLITE_BATCH_SIZE, SQLITE_BATCH_CHARS
    return args.batch_size or DEFAULT_BATCH_SIZE, DEFAULT_BATCH_CHARS


def _warn_skipped(tally: FolderTally) -> None:
    """One warning per unreadable file (a real failure) and per .json file read as text; the
    rest (blank, hidden, binary, compressed files, symlinks leaving the folder: normal in a
    system folder) are counted in the summary line."""
    for note in tally.notes:
        warn(note)
    for reason in UNREADABLE:
        for relative in tally.skipped.get(reason, ()):
            problem = tally.problems.get(relative)
            warn(
                f"skipped {problem}" if problem else f"skipped {relative!r}: {SKIP_REASONS[reason]}"
            )


def _records(report: IngestReport, claims: IdClaims) -> str:
    """The summary's count: records read, those stored already unchanged, and those whose id
    an earlier record of the run has (the same document again, or another one)."""
    notes = [f"{report.unchanged:,} unchanged, not rewritten"] if report.unchanged else []
    if claims.repeats:
        notes.append(f"{claims.repeats:,} repeating an earlier record, stored once")
    if claims.conflicts:
        notes.append(f"{len(claims.conflicts):,} with a duplicate id, not indexed")
    read = report.records + claims.repeats + len(claims.conflicts)
    return f"{read:,} records" + (f" ({'; '.join(notes)})" if notes else "")


def _files(tally: FolderTally | None) -> str:
    """The summary's tail for a folder: files read and skipped, by reason."""
    return "" if tally is None else f"; {tally.summary()}"


def _outcome(args: argparse.Namespace, tally: FolderTally | None, claims: IdClaims) -> int:
    """Exit code after an ingest: a failure naming the fix when unreadable files or records
    with a duplicate id were met."""
    unreadable = [] if tally is None else [f for r in UNREADABLE for f in tally.skipped.get(r, [])]
    if unreadable and not args.skip_unreadable:
        # Given --encoding already read what it could: naming it again would not help.
        encoding = (
            ""
            if args.encoding
            else "--encoding NAME (e.g. latin-1) for text that is not UTF-8, or "
        )
        raise InvalidInputError(
            f"{len(unreadable):,} file(s) could not be read (listed above) and were not indexed; "
            f"everything else was. Re-run with {encoding}--skip-unreadable to accept skipping "
            "them"
        )
    if claims.conflicts and not args.skip_duplicates:
        raise InvalidInputError(
            f"{len(claims.conflicts):,} record(s) have the id of an earlier record with other "
            "content (listed above) and were not indexed; everything else was. Give each "
            "record its own id, or re-run with --skip-duplicates to keep the first of each"
        )
    return EXIT_OK


def _index_on_server(
    args: argparse.Namespace,
    corpus: Path,
    tally: FolderTally | None,
    claims: IdClaims,
    fallback: str | None,
) -> int:
    """`sag2 index` into a PostgreSQL schema (batches commit as they go, like a file)."""
    from ..backends.postgres import PostgresIndex

    started = time.perf_counter()
    with PostgresIndex(args.db, _requested_settings(args)) as index:
        report = _ingest(args, index, corpus, tally, claims, fallback)
        stats = index.stats()
    print(
        f"indexed {_records(report, claims)} in {time.perf_counter() - started:.2f} s: "
        f"{shown(args.db)} holds {stats['documents']:,} documents, {stats['units']:,} units, "
        f"{stats['bytes']:,} bytes" + _files(tally)
    )
    return _outcome(args, tally, claims)


def _requested_settings(args: argparse.Namespace) -> IndexSettings | None:
    """--chunk-chars and --profile as settings (defaults for the one not given); None, when
    neither is given, adopts an existing index's settings (or the defaults). On an existing
    index file, an option equal to its setting is accepted and another refused, naming only
    the options given."""
    requested = {"chunk_chars": args.chunk_chars, "analyzer_profile": args.profile}
    given = {name: value for name, value in requested.items() if value}
    if not given:
        return None
    built = None if is_server(args.db) else _built_settings(args.db)
    if built is None:
        return IndexSettings(**given)
    differing = [name for name, value in given.items() if getattr(built, name) != value]
    if differing:
        stored = ", ".join(f"{name}={getattr(built, name)!r}" for name in differing)
        options = ", ".join(f"{SETTING_OPTIONS[name]} {given[name]}" for name in differing)
        raise InvalidInputError(
            f"index {args.db!r} was built with {stored}; {options} applies to a new index "
            "only: drop the option, or give a new --db"
        )
    return built


def _built_settings(db: str) -> IndexSettings | None:
    """The settings an existing index file was built with, or None if there is no file."""
    if not Path(db).is_file():
        return None
    with SQLiteIndex(db, create=False) as index:
        return index.settings


def _saved(db: str, count: int) -> str:
    """What an interrupted ingest kept: the ``count`` documents of every batch committed
    before it."""
    return (
        f"{db} holds {count:,} documents (every batch committed before the interruption); "
        "run the same command again to add the rest (stored documents are not rewritten)"
    )


def _stored_documents(db: str) -> int:
    """The documents an index file holds; 0 when it is absent or unreadable as an index."""
    try:
        with SQLiteIndex(db, create=False) as index:
            return index.document_count()
    except (SAG2Error, sqlite3.Error):
        return 0
