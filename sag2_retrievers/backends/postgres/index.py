"""PostgresIndex: the SAG2 lexical backend on PostgreSQL, with FTS5's BM25 from posting blocks.

Same documents in, same rankings out as `SQLiteIndex` (same match sets, same scores, same
order): the analysed tokens that SQLite hands to FTS5 are stored here as per-term posting
blocks (written with COPY, merged like SQLite's segments) and token arrays; a round's terms
are read in one statement and scored on the client by SQLite's scorer functions. Needs the
``postgres`` extra (psycopg 3).
"""

from __future__ import annotations

import re
import threading
from concurrent.futures import Executor
from typing import Any

from ...errors import InvalidInputError
from ...query import query_terms as backend_query_terms
from ...query import search_hits
from ...settings import IndexSettings
from ..base import Filters, SearchHit
from ..scorer import ArrayScorer
from .connect import ConnectionString
from .maintenance import PostgresMaintenance
from .reading import PostgresReading
from .scorer import Generation, PhraseFrequencies
from .writing import PostgresWriting

_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")


class PostgresIndex(PostgresWriting, PostgresReading, PostgresMaintenance):
    """A SAG2 index in a PostgreSQL schema: add, delete, upsert, BM25 search, df, aliases.

    ``dsn`` is a libpq connection string or URL (it is never shown: passwords stay out of
    reprs and errors). ``create=False`` refuses a schema that holds no index. Each thread has
    its own connection; reads inside `snapshot` share one REPEATABLE READ transaction, and
    writers are serialised by an advisory lock, each call one transaction. Writing, reading
    and keeping the schema are in `writing`, `reading` and `maintenance`.
    """

    def __init__(
        self,
        dsn: str,
        settings: IndexSettings | None = None,
        *,
        schema: str = "sag2",
        create: bool = True,
    ) -> None:
        if not isinstance(schema, str) or not _SCHEMA_NAME.fullmatch(schema):
            raise InvalidInputError(
                f"schema must be a lowercase SQL name (letters, digits, _), got {schema!r}"
            )
        self._dsn = ConnectionString(dsn)
        self.schema = schema
        self._local = threading.local()
        self._connections: list[Any] = []
        self._registry_lock = threading.Lock()
        self._closed = False
        self._executor: Executor | None = None
        self._state: Generation | None = None
        self._scorer = ArrayScorer()
        self._phrase_df = PhraseFrequencies()
        self.settings = self._open(settings, create)

    def __repr__(self) -> str:
        return f"PostgresIndex(schema={self.schema!r}, settings={self.settings!r})"

    def __enter__(self) -> PostgresIndex:
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
