"""The SQLite backend: one file with the text, an FTS5 index and postings segments."""

from .index import SQLiteIndex, remove_index_files

__all__ = ["SQLiteIndex", "remove_index_files"]
