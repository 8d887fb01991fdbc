"""Connections per thread, read snapshots and serialised write transactions of a SQLite index."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Iterator
from concurrent.futures import Executor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..._sqlite import connect, raise_if_busy, raise_if_full
from ...errors import (
    IndexUnavailableError,
    InvalidInputError,
)
from ...settings import IndexSettings
from . import schema as sql


class SQLiteConnections:
    """What every part of `SQLiteIndex` shares: the file, its settings, a connection per
    thread (WAL, busy timeout), read snapshots and one write transaction at a time."""

    path: Path
    settings: IndexSettings
    read_only: bool
    _local: threading.local
    _connections: list[tuple[threading.Thread, sqlite3.Connection]]
    _registry_lock: threading.Lock
    _closed: bool
    _write_lock: threading.Lock
    _executor: Executor | None

    def _connection(self) -> sqlite3.Connection:
        """This thread's connection (created on first use), in WAL mode with a busy timeout."""
        connection: sqlite3.Connection | None = getattr(self._local, "connection", None)
        if self._closed:
            # A read still inside snapshot() closes its connection after its COMMIT.
            if connection is not None and not connection.in_transaction:
                connection.close()
                self._local.connection = None
            raise IndexUnavailableError(f"index {str(self.path)!r} is closed; open it again")
        if connection is None:
            connection = connect(self.path, read_only=self.read_only)
            connection.execute("PRAGMA foreign_keys = ON")
            connection.execute(sql.WAL_CHECKPOINT_SQL)
            self._local.connection = connection
            with self._registry_lock:
                self._close_finished_threads()
                self._connections.append((threading.current_thread(), connection))
        return connection

    def _close_finished_threads(self) -> None:
        """Close the connections of threads that have ended (call with the registry lock)."""
        alive = []
        for thread, connection in self._connections:
            if thread.is_alive():
                alive.append((thread, connection))
            else:
                connection.close()
        self._connections = alive

    def close(self) -> None:
        """Close the index: this thread's connection and those of finished threads now;
        any other thread's on its next use (which then raises). Idempotent."""
        current = threading.current_thread()
        with self._registry_lock:
            self._closed = True
            self._close_finished_threads()
            still_open = []
            for thread, connection in self._connections:
                if thread is current:
                    connection.close()
                else:
                    still_open.append((thread, connection))
            self._connections = still_open
            self._local.connection = None
        if self._executor is not None:
            self._executor.shutdown()
            self._executor = None

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """Run this thread's reads inside one read transaction, so they see one state."""
        connection = self._connection()
        if connection.in_transaction:
            yield
            return
        connection.execute("BEGIN")
        try:
            yield
        finally:
            connection.execute("COMMIT")
            if self._closed:
                connection.close()
                self._local.connection = None

    def _transaction(self) -> WriteTransaction:
        """A write transaction (BEGIN IMMEDIATE) that bumps the index generation on commit."""
        if self.read_only:
            raise IndexUnavailableError(
                f"index {str(self.path)!r} is read-only (the file or its directory cannot be "
                "written); it can be searched but not changed"
            )
        return WriteTransaction(self._connection(), self._write_lock, self.path)

    def _generation(self) -> str:
        """A counter in meta that every committed write increments."""
        row = self._connection().execute(sql.GENERATION_SQL).fetchone()
        return "0" if row is None else str(row[0])


class WriteTransaction:
    """Context manager for one serialised write transaction on a connection.

    A full disk (SQLITE_FULL) anywhere in the transaction, its COMMIT included, rolls it back
    and becomes an IndexFullError naming the file: the index stays as it was.
    """

    def __init__(self, connection: sqlite3.Connection, lock: threading.Lock, path: Path):
        self.connection, self.lock, self.path = connection, lock, path

    def __enter__(self) -> sqlite3.Connection:
        self.lock.acquire()
        try:
            self.connection.execute("BEGIN IMMEDIATE")
        except BaseException as error:
            self.lock.release()
            if isinstance(error, sqlite3.OperationalError):
                raise_if_busy(error, self.path)
            raise
        return self.connection

    def __exit__(self, exc_type: object, error: BaseException | None, *rest: object) -> None:
        try:
            if error is None:
                try:
                    self.connection.execute(sql.BUMP_GENERATION_SQL)
                    self.connection.execute("COMMIT")
                except sqlite3.OperationalError as failure:
                    self._roll_back()
                    raise_if_full(failure, self.path)
                    raise
            else:
                self._roll_back()
                if isinstance(error, sqlite3.OperationalError):
                    raise_if_full(error, self.path)
        finally:
            self.lock.release()

    def _roll_back(self) -> None:
        """Roll back, unless SQLite already did (it may, after SQLITE_FULL)."""
        if self.connection.in_transaction:
            self.connection.execute("ROLLBACK")


def id_collection(ids: Iterable[Any], name: str) -> Iterable[Any]:
    """Refuse a bare string or bytes where a collection of ids is expected."""
    if isinstance(ids, (str, bytes)):
        raise InvalidInputError(
            f"{name} must be a collection of ids, not a single {type(ids).__name__}"
        )
    return ids
