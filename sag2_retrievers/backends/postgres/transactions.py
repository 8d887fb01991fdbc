"""Connections per thread, read snapshots and locked write transactions of a PostgreSQL index."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Iterator
from concurrent.futures import Executor
from contextlib import contextmanager
from typing import Any

from ...errors import IndexUnavailableError, InvalidInputError
from ...settings import IndexSettings
from . import schema as pg
from .connect import ConnectionString

logger = logging.getLogger(__name__)


class PostgresConnections:
    """What every part of `PostgresIndex` shares: the schema, its settings, a connection per
    thread, REPEATABLE READ snapshots, and write transactions under the index's advisory
    lock; server errors become one `IndexUnavailableError`."""

    schema: str
    settings: IndexSettings
    _dsn: ConnectionString
    _local: threading.local
    _connections: list[Any]
    _registry_lock: threading.Lock
    _closed: bool
    _executor: Executor | None

    def _connection(self) -> Any:
        """This thread's connection (autocommit; transactions are explicit)."""
        if self._closed:
            raise IndexUnavailableError(f"PostgresIndex {self.schema!r} is closed; open it again")
        connection = getattr(self._local, "connection", None)
        if connection is None:
            connection = self._dsn.connect()
            self._local.connection = connection
            with self._registry_lock:
                self._connections.append(connection)
        return connection

    def _sql(self, statement: str, **identifiers: str) -> Any:
        """A statement composed for this index's schema."""
        return pg.compose(statement, self.schema, **identifiers)

    def _on_standby(self) -> bool:
        """True when this connection's server is a hot standby (in recovery, read-only)."""
        return bool(self._fetch(pg.IN_RECOVERY)[0][0])

    def _log_replay_lag(self) -> None:
        """Say in the debug log how far the standby this index reads is behind."""
        behind, paused, age = self._fetch(pg.REPLAY_LAG)[0]
        state = "paused" if paused else "running"
        since = "no transaction replayed yet" if age is None else f"last one {age:.1f} s ago"
        if behind > 0:
            logger.debug(
                "PostgreSQL schema %r is read from a hot standby that is behind: %d bytes of "
                "received WAL not replayed yet (replay %s; %s)",
                self.schema,
                int(behind),
                state,
                since,
            )
        else:
            logger.debug(
                "PostgreSQL schema %r is read from a hot standby, replay caught up with the "
                "WAL received (replay %s; %s)",
                self.schema,
                state,
                since,
            )

    def close(self) -> None:
        """Close every connection this index opened. Idempotent."""
        with self._registry_lock:
            self._closed = True
            for connection in self._connections:
                connection.close()
            self._connections = []
        self._local.connection = None
        if self._executor is not None:
            self._executor.shutdown()
            self._executor = None

    @contextmanager
    def _write(self) -> Iterator[Any]:
        """One write transaction holding the index's advisory lock, as a cursor."""
        connection = self._connection()
        if connection.info.transaction_status != 0:
            raise InvalidInputError("cannot write to the index inside a read snapshot")
        if self._on_standby():
            server = f"{connection.info.host}:{connection.info.port}"
            raise IndexUnavailableError(
                f"PostgreSQL schema {self.schema!r} is on a hot standby at {server} (a read-only"
                " replica): it can be searched but not changed; write to the primary server"
            )
        with self._server_errors(), connection.transaction(), connection.cursor() as cursor:
            cursor.execute(pg.WRITE_LOCK, (f"sag2:{self.schema}",))
            yield cursor

    @contextmanager
    def _server_errors(self) -> Iterator[None]:
        """psycopg's errors as the one IndexUnavailableError, naming the schema."""
        import psycopg

        try:
            yield
        except psycopg.Error as error:
            first_line = (str(error).splitlines() or [""])[0]
            raise IndexUnavailableError(
                f"PostgreSQL index {self.schema!r}: the server failed the request "
                f"({error.__class__.__name__}: {first_line}); a write was rolled back. "
                "Check the server, then retry"
            ) from error

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """Make this thread's reads inside the block see one state (REPEATABLE READ, re-entrant)."""
        connection = self._connection()
        if connection.info.transaction_status != 0:
            yield
            return
        connection.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        try:
            yield
        finally:
            connection.execute("COMMIT")

    def _fetch(self, statement: Any, params: Any = None) -> list[tuple[Any, ...]]:
        """Run one read statement and fetch its rows."""
        with self._server_errors(), self._connection().cursor() as cursor:
            cursor.execute(statement, params)
            return list(cursor.fetchall())

    def _fetch_binary(self, statement: Any, params: Any = None) -> list[tuple[Any, ...]]:
        """Run one read statement with binary results (bytea arrives as bytes, undecoded)."""
        with self._server_errors(), self._connection().cursor(binary=True) as cursor:
            cursor.execute(statement, params)
            return list(cursor.fetchall())


def string_ids(doc_ids: Iterable[str]) -> list[str]:
    """Document ids as a list of strings, or a clear error."""
    if isinstance(doc_ids, (str, bytes)):
        raise InvalidInputError("doc_ids must be a collection of ids, not a single string")
    ids = list(doc_ids)
    for doc_id in ids:
        if not isinstance(doc_id, str):
            raise InvalidInputError(f"document ids must be strings, got {doc_id!r}")
        if "\x00" in doc_id:  # as SQLite's json_list: no stored id holds one
            raise InvalidInputError(f"document id {doc_id!r} contains a NUL character")
    return ids
