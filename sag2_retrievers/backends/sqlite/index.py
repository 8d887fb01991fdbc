"""SQLiteIndex: one SQLite file with the original text, an FTS5 index, and lexical statistics."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from ...errors import InvalidInputError
from ...query import query_terms as backend_query_terms
from ...query import search_hits
from ...settings import IndexSettings
from ..base import Filters, SearchHit
from ..scorer import ArrayScorer
from .maintenance import (
    SQLiteMaintenance,
    check_location,
    probe_fts5,
    remove_index_files,
    writable,
)
from .reading import SQLiteReading
from .writing import SQLiteWriting

__all__ = ["SQLiteIndex", "remove_index_files"]


class SQLiteIndex(SQLiteWriting, SQLiteReading, SQLiteMaintenance):
    """A SAG2 index in one SQLite file: add, delete, upsert, BM25 search, df, title aliases.

    Safe for concurrent readers in several threads and processes (WAL, one connection per
    thread); writes are serialised and each call is one transaction. Writing, reading and
    keeping the file are in `writing`, `reading` and `maintenance`.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        settings: IndexSettings | None = None,
        *,
        create: bool = True,
    ):
        """Open the index file at ``path``; ``create=False`` refuses to make a new one.

        A missing folder is an error either way (an index is never created somewhere the
        caller did not mean), as is a missing file when ``create`` is False.
        """
        if str(path) in ("", ":memory:") or str(path).startswith("file:"):
            raise InvalidInputError(
                f"SQLiteIndex needs a file path, got {str(path)!r}: an in-memory database "
                "would be private to each thread; use a temporary file instead"
            )
        if settings is not None and not isinstance(settings, IndexSettings):
            raise InvalidInputError(
                f"settings must be an IndexSettings, got {type(settings).__name__}"
            )
        self.path = Path(path)
        check_location(self.path, create)
        # Files nobody may write (read-only media, permissions) are opened for search only.
        self.read_only = not writable(self.path)
        self._local = threading.local()
        self._connections = []
        self._registry_lock = threading.Lock()
        self._closed = False
        self._write_lock = threading.Lock()
        self._executor = None
        self._catalog = None
        self._word_df = None
        self._statistics = None
        self._unit_count = None
        self._phrase_df = None
        self._scorer = ArrayScorer()
        probe_fts5()
        try:
            self.settings = self._open(settings, create)
        except BaseException:
            self.close()
            raise

    def __repr__(self) -> str:
        return f"SQLiteIndex({str(self.path)!r}, settings={self.settings!r})"

    def __enter__(self) -> SQLiteIndex:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def search(
        self,
        question: str,
        limit: int = 100,
        *,
        max_tokens: int = 80,
        filters: Filters | None = None,
    ) -> list[SearchHit]:
        """BM25 top ``limit`` units for the question's first ``max_tokens`` distinct tokens."""
        return search_hits(self, question, limit, max_tokens=max_tokens, filters=filters)

    def query_terms(self, question: str, max_tokens: int = 80) -> list[str]:
        """The question's distinct tokens, each repaired by a title alias if it matches nothing."""
        return backend_query_terms(self, question, max_tokens)
