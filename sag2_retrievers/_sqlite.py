"""SQLite plumbing shared by the index and the judges' caches: connections and transactions."""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from .errors import IndexBusyError, IndexFullError, InvalidInputError

SQLITE_FULL = 13  # sqlite3.SQLITE_FULL, which Python 3.10 does not name
SQLITE_BUSY = 5

BUSY_TIMEOUT_SECONDS = 30.0
# A cache waits this long for another writer, then skips its write: a query never waits
# out a long write elsewhere, and never fails, for the sake of a cache.
CACHE_BUSY_TIMEOUT_SECONDS = 1.0

logger = logging.getLogger(__name__)


def connect(path: str | Path, *, read_only: bool = False) -> sqlite3.Connection:
    """An autocommit connection in WAL mode with a 30 s busy timeout, usable from any thread.

    ``read_only`` opens the file as immutable (for read-only media, where SQLite could not
    create the WAL's shared-memory file): nothing is ever written, not even a lock.
    The caller serialises its use (one connection per thread, or a lock).
    """
    if read_only:
        uri = Path(path).resolve().as_uri() + "?mode=ro&immutable=1"
        return sqlite3.connect(
            uri,
            uri=True,
            timeout=BUSY_TIMEOUT_SECONDS,
            isolation_level=None,
            check_same_thread=False,
        )
    connection = sqlite3.connect(
        path, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None, check_same_thread=False
    )
    connection.execute("PRAGMA journal_mode = WAL")
    connection.execute("PRAGMA synchronous = NORMAL")
    return connection


def connect_cache(path: str | Path) -> sqlite3.Connection:
    """A connection for a cache table: as `connect`, with the cache's short busy timeout."""
    connection = connect(path)
    connection.execute(f"PRAGMA busy_timeout = {int(CACHE_BUSY_TIMEOUT_SECONDS * 1000)}")
    return connection


def write_cache(
    connection: sqlite3.Connection, statement: str, rows: Sequence[Sequence[Any]], what: str
) -> None:
    """Write cache rows in one transaction, or skip them with a warning when another process
    holds the file's write lock (the rows can be computed again; the query goes on)."""
    try:
        write_many(connection, statement, rows)
    except sqlite3.OperationalError as error:
        if not is_busy(error):
            raise
        logger.warning(
            "skipped caching %d %s: busy: another process is writing to the cache file",
            len(rows),
            what,
        )


def json_list(values: Iterable[Any], what: str) -> str:
    """Values as one JSON array for ``json_each(?)``; strings holding NUL are refused.

    SQLite's json_each ends a string at an escaped NUL, so "a\\u0000b" would match "a".
    """
    items = list(values)
    for item in items:
        if isinstance(item, str) and "\x00" in item:
            raise InvalidInputError(f"{what} {item!r} contains a NUL character")
    return json.dumps(items)


def write_many(
    connection: sqlite3.Connection, statement: str, rows: Iterable[Sequence[Any]]
) -> None:
    """Run one statement for many rows in a single immediate transaction (all or nothing)."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        connection.executemany(statement, rows)
        connection.execute("COMMIT")
    except BaseException as error:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        if isinstance(error, sqlite3.OperationalError):
            raise_if_full(error, connection.execute("PRAGMA database_list").fetchone()[2])
        raise


def raise_if_full(error: sqlite3.OperationalError, path: str | Path) -> None:
    """Turn SQLITE_FULL into an IndexFullError naming the file and what to do; the caller
    has rolled back, so nothing was written."""
    code = getattr(error, "sqlite_errorcode", None)  # Python 3.11+
    if code == SQLITE_FULL or (code is None and "is full" in str(error)):
        raise IndexFullError(
            f"{str(path)!r}: the disk or the file's size limit is full ({error}); nothing was "
            "written and the file is unchanged. Free space (or move the file) and retry"
        ) from error


def is_busy(error: sqlite3.Error) -> bool:
    """Whether SQLite gave up waiting for a lock another connection holds (SQLITE_BUSY)."""
    code = getattr(error, "sqlite_errorcode", None)  # Python 3.11+
    if code is not None:
        return bool(code & 0xFF == SQLITE_BUSY)
    return "database is locked" in str(error)


def raise_if_busy(error: sqlite3.Error, path: str | Path) -> None:
    """Turn SQLITE_BUSY into an IndexBusyError saying that another process is writing."""
    if is_busy(error):
        raise IndexBusyError(
            f"{str(path)!r} is busy: another process is writing to it (waited "
            f"{BUSY_TIMEOUT_SECONDS:g} s for its write lock); nothing was written. Retry "
            "when that write has finished"
        ) from error
