"""Keeping a SQLite index file: opening or creating it, checking its settings, optimising it."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from ..._sqlite import raise_if_busy
from ...errors import (
    IndexUnavailableError,
)
from ...settings import IndexSettings, reconcile_settings
from . import compaction, postings
from . import schema as sql
from .transactions import SQLiteConnections

# Tables other parts of this package may create in an index file before the index itself.
COMPANION_TABLES = frozenset({"sqlite_sequence", "embedding_cache", "judgment_cache"})


class SQLiteMaintenance(SQLiteConnections):
    """Open or create the file's tables and settings, and merge its segments on request."""

    def _open(self, requested: IndexSettings | None, create: bool) -> IndexSettings:
        """Create the schema or check the stored settings against the requested ones."""
        if self.read_only and not self.path.is_file():
            raise IndexUnavailableError(
                f"cannot create index {str(self.path)!r}: its directory is read-only; "
                "choose a writable path"
            )
        try:
            connection = self._connection()
            with self._write_lock:
                return self._open_in(connection, requested, create)
        except sqlite3.DatabaseError as error:
            raise_if_busy(error, self.path)
            raise IndexUnavailableError(
                f"{str(self.path)!r} is not a SAG2 index or cannot be opened ({error}); "
                "choose another path"
            ) from error

    def _open_in(
        self, connection: sqlite3.Connection, requested: IndexSettings | None, create: bool
    ) -> IndexSettings:
        """Check the stored settings, read in a read transaction (so a writer elsewhere does
        not block opening); a new file gets its tables and settings in a write transaction."""
        connection.execute("BEGIN")
        try:
            stored = _read_meta(self.path, connection)
        finally:
            connection.execute("COMMIT")
        if not stored:
            return self._create_in(connection, requested, create)
        return self._checked(stored, requested, create)

    def _create_in(
        self, connection: sqlite3.Connection, requested: IndexSettings | None, create: bool
    ) -> IndexSettings:
        """Write a new file's tables and settings in one transaction (unless another
        process has just done so: then check those)."""
        connection.execute("BEGIN IMMEDIATE")
        try:
            stored = _read_meta(self.path, connection)
            settings = self._checked(stored, requested, create)
            if not stored:
                _create_tables(connection, settings)
                connection.executemany(sql.PUT_META_SQL, settings.as_meta().items())
            connection.execute("COMMIT")
        except BaseException:
            # A failed BEGIN or COMMIT may leave no transaction; the first error is the news.
            if connection.in_transaction:
                connection.execute("ROLLBACK")
            raise
        return settings

    def _checked(
        self, stored: dict[str, str], requested: IndexSettings | None, create: bool
    ) -> IndexSettings:
        """The settings to use: the stored ones, checked against those requested."""
        if not stored and not create:
            raise IndexUnavailableError(
                f"{str(self.path)!r} holds no SAG2 index; build it first "
                "(open it with create=True, or run `sag2 index`)"
            )
        return reconcile_settings(f"index {str(self.path)!r}", stored, requested)

    def optimize(self) -> None:
        """Merge FTS5's segments and the postings segments (dropping deleted units' postings);
        worthwhile after many small writes or deletes."""
        with self._transaction() as connection:
            connection.execute("INSERT INTO units_fts(units_fts) VALUES ('optimize')")
            compaction.optimize(connection)


def remove_index_files(path: str | os.PathLike[str]) -> None:
    """Delete an index file and its WAL companions (after a failed first ingest, say)."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{os.fspath(path)}{suffix}").unlink(missing_ok=True)


def probe_fts5() -> None:
    """Fail early, with a clear message, when this Python's SQLite lacks FTS5."""
    try:
        probe = sqlite3.connect(":memory:")
        probe.execute("CREATE VIRTUAL TABLE probe USING fts5(body)")
        probe.close()
    except sqlite3.OperationalError as error:
        raise IndexUnavailableError(
            f"this Python's SQLite {sqlite3.sqlite_version} has no FTS5 ({error}); "
            "install a Python built with FTS5 (the official python.org builds have it)"
        ) from error


def check_location(path: Path, create: bool) -> None:
    """Refuse a path whose folder is missing, or a missing file the caller needs to exist."""
    if path.is_file():
        return
    if not create:
        raise IndexUnavailableError(
            f"no index file at {str(path)!r}; check the path, or build the index first "
            "(open it with create=True, or run `sag2 index`)"
        )
    folder = path.parent
    if not folder.is_dir():
        problem = "is not a folder" if folder.exists() else "does not exist"
        raise IndexUnavailableError(
            f"cannot create the index file {str(path)!r}: the folder {str(folder)!r} "
            f"{problem}; create it first or choose another path"
        )


def _read_meta(path: Path, connection: sqlite3.Connection) -> dict[str, str]:
    """The meta table as a dict; empty for a new file; an error for a non-SAG2 database."""
    try:
        tables = {row[0] for row in connection.execute(sql.TABLE_NAMES_SQL)}
    except sqlite3.DatabaseError as error:
        raise IndexUnavailableError(
            f"{str(path)!r} is not a SAG2 index ({error}); choose another path"
        ) from error
    if "meta" not in tables:
        if tables - COMPANION_TABLES:
            raise IndexUnavailableError("the file holds a database that is not a SAG2 index")
        return {}
    return dict(connection.execute(sql.GET_META_SQL).fetchall())


def _create_tables(connection: sqlite3.Connection, settings: IndexSettings) -> None:
    """Create a new file's tables; units_fts gets the analyzer profile's FTS5 tokenizer."""
    for statement in sql.BASE_TABLES:
        connection.execute(statement)
    for statement in postings.TABLES:
        connection.execute(statement)
    if settings.analyzer_profile == "paper":
        connection.execute(sql.PAPER_FTS_TABLE_SQL)
    else:
        connection.execute(sql.SAG2_FTS_TABLE_SQL)
    connection.execute(sql.FTS_AUTOMERGE_SQL)
    connection.execute(sql.FTS_HASHSIZE_SQL)


def writable(path: Path) -> bool:
    """Whether the index file (or, for a new one, its directory) and the directory, where
    SQLite keeps the WAL and shared-memory files, may be written."""
    directory = path.parent
    return os.access(directory, os.W_OK) and (not path.exists() or os.access(path, os.W_OK))
