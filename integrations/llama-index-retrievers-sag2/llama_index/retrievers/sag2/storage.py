"""Persisting a retriever: a copy of the SQLite index, and a JSON file of its other settings.

The index file carries its own settings (chunk size, analyzer, BM25 weights). The JSON file
carries the rest of what changes results: the SAG2Config, ``similarity_top_k``, the
retriever's filters and the title key, plus the judge's identity, which cannot be restored
(a judge holds clients and keys) but is compared on load.
"""

from __future__ import annotations

import json
import os
import sqlite3
from contextlib import closing
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from llama_index.core.vector_stores.types import MetadataFilters

from sag2_retrievers import IndexSettingsMismatchError, InvalidInputError, SAG2Config
from sag2_retrievers.input_files import read_text

INDEX_FILE = "sag2_index.sqlite"
SETTINGS_FILE = "sag2_retriever.json"
FORMAT_VERSION = 1
BUSY_TIMEOUT_SECONDS = 30.0


@dataclass(frozen=True)
class RetrieverSettings:
    """The retriever settings stored next to the index file."""

    config: SAG2Config
    similarity_top_k: int
    filters: MetadataFilters | None
    title_key: str | None
    judge_identity: str

    def as_json(self) -> dict[str, Any]:
        """A JSON-serialisable form, tagged with the format version."""
        return {
            "format": FORMAT_VERSION,
            "config": asdict(self.config),
            "similarity_top_k": self.similarity_top_k,
            "filters": None if self.filters is None else self.filters.model_dump(mode="json"),
            "title_key": self.title_key,
            "judge_identity": self.judge_identity,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], origin: Path) -> RetrieverSettings:
        """Read settings written by `as_json`, rejecting other formats with a clear error."""
        if data.get("format") != FORMAT_VERSION:
            raise InvalidInputError(
                f"{origin} has settings format {data.get('format')!r}, this version reads "
                f"format {FORMAT_VERSION}; persist the retriever again with this version"
            )
        try:
            config = SAG2Config(**data["config"])
        except TypeError as error:
            raise InvalidInputError(
                f"{origin} holds a SAG2Config this version does not understand ({error}); "
                "upgrade sag2-retrievers or persist the retriever again"
            ) from error
        filters = data["filters"]
        return cls(
            config,
            int(data["similarity_top_k"]),
            None if filters is None else MetadataFilters.model_validate(filters),
            data["title_key"],
            str(data["judge_identity"]),
        )


def write_settings(directory: Path, settings: RetrieverSettings) -> None:
    """Write the settings file atomically (a reader never sees half of it)."""
    target = directory / SETTINGS_FILE
    partial = target.with_name(target.name + ".partial")
    partial.write_text(json.dumps(settings.as_json(), indent=2, sort_keys=True), "utf-8")
    os.replace(partial, target)


def read_settings(directory: Path) -> RetrieverSettings:
    """Read the settings file of a persisted retriever."""
    path = directory / SETTINGS_FILE
    if not path.is_file():
        raise InvalidInputError(
            f"{directory} holds no {SETTINGS_FILE}; it was not written by SAG2Retriever.persist "
            "(open a bare index file with SAG2Retriever.from_persist_path)"
        )
    return RetrieverSettings.from_json(json.loads(read_text(path)), path)


def copy_index(source: Path, target: Path) -> None:
    """Copy a live index file into ``target`` with SQLite's online backup API, in place.

    The backup is a consistent snapshot even while other connections write, and includes
    changes still in the write-ahead log. It writes through SQLite's locks into the target
    database itself, never replacing the file: a retriever that has the target open sees the
    new contents and its later writes land in that same file. Copying a file onto itself
    does nothing.
    """
    if target.exists() and source.resolve() == target.resolve():
        return
    if target.exists():
        _check_same_settings(source, target)
    with (
        closing(sqlite3.connect(source, timeout=BUSY_TIMEOUT_SECONDS)) as origin,
        closing(sqlite3.connect(target, timeout=BUSY_TIMEOUT_SECONDS)) as copy,
    ):
        origin.backup(copy)


def _check_same_settings(source: Path, target: Path) -> None:
    """Refuse to overwrite an index built with other settings: a retriever holding it open
    would go on writing with its own settings into a file whose meta says otherwise."""
    stored = [_meta(path) for path in (source, target)]
    if stored[1] is not None and stored[0] != stored[1]:
        raise IndexSettingsMismatchError(
            f"{target} holds an index built with other settings; persist to another directory, "
            "or delete that one first (after closing every retriever that has it open)"
        )


def _meta(path: Path) -> dict[str, str] | None:
    """An index file's meta rows without the write counter, or None for a non-index file."""
    with closing(sqlite3.connect(path, timeout=BUSY_TIMEOUT_SECONDS)) as connection:
        try:
            rows = connection.execute("SELECT key, value FROM meta").fetchall()
        except sqlite3.DatabaseError:
            return None
    return {key: value for key, value in rows if key != "generation"}
