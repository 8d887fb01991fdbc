"""The PostgreSQL backend: FTS5's BM25 computed in SQL (needs the ``postgres`` extra)."""

from .index import PostgresIndex

__all__ = ["PostgresIndex"]
