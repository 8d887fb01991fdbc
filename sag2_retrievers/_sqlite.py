"""SQLite plumbing shared by the index and the judges' caches: connections and transactions."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

BUSY_TIMEOUT_SECONDS = 30.0


def connect(path: str | Path) -> sqlite3.Connection:
    """An autocommit connection in WAL mode with a 30 s busy timeout, usable from any thread.

    The caller serialises its use (one connection per thread, or a lock).
    """
    connection = sqlite3.connect(
        path, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None, check_same_thread=False
    )
    connection.execute("PRAGMA journal_mode = WAL")
    connection.execute("PRAGMA synchronous = NORMAL")
    return connection


def write_many(
    connection: sqlite3.Connection, statement: str, rows: Iterable[Sequence[Any]]
) -> None:
    """Run one statement for many rows in a single immediate transaction (all or nothing)."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        connection.executemany(statement, rows)
        connection.execute("COMMIT")
    except BaseException:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        raise
