"""The PostgreSQL backend: FTS5's BM25 from posting blocks (needs the ``postgres`` extra)."""

from .index import PostgresIndex

__all__ = ["PostgresIndex"]
