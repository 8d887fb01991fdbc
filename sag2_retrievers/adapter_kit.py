"""The adapter kit: what both framework adapters do around the core, written once.

Lifecycle: `open_index` opens the given backend or an SQLite file (a temporary one when no
path is given), `judge_or_local` falls back to the offline local judge, `write_and_prepare`
writes what changed and lets the judge prepare those passages, and `AdapterSession` closes
the engine and the index once, from either adapter's ``close`` or ``aclose``.

Ingest rules, so LlamaIndex and LangChain ingest the same folder the same way:

- **ids**: a document's own id is kept; without one (LangChain's ``None``, LlamaIndex's random
  UUID4) the id is its file path (metadata ``file_path``, else ``source``) with its place in
  the file when its metadata gives one (``report.pdf#page=3``: `LOCATOR_KEYS`), so a page
  keeps its id whichever call brings it; ``_part_<i>`` is appended when one batch holds
  several documents with the same such id (LlamaIndex's ``filename_as_id`` convention); else
  the id is a hash of its text and metadata. Re-running the same ingest therefore upserts in
  place. (A file whose documents carry no place and arrive in several calls is numbered per
  call: give those ids, or one call per file.)
- **empty documents** (blank text) are skipped with one warning naming them, or refused.
- **exact repeats** (same id, text and metadata) in one batch are indexed once.
- **re-runs**: a document the index holds already with the same text, title and metadata
  is not written again (`write_changed`), so re-running an ingest of unchanged files writes
  nothing; metadata a reader refreshes on every read (``last_accessed_date``) is ignored.
- **sources**: a chunk's source document with a random id gets the stable one its file path
  (else its content hash) gives (`stable_source_id`), so re-runs keep the ids they return.
- **titles**: the title metadata, else the file's own first heading (a markdown ``# H1``, a
  reStructuredText title, an HTML ``<title>``; a text without a file name is read as
  markdown), else the file name without its extension, after its folder's name when the name
  is generic (``requests copyright``, ``json init``): see file_titles.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
import warnings
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from tempfile import TemporaryDirectory
from typing import Any

from .backends.base import DocumentIndex
from .backends.sqlite import SQLiteIndex, remove_index_files
from .documents import MAX_TITLE_CHARS, Document, Unit
from .engine import SAG2Engine
from .errors import InvalidInputError, JudgeConfigurationError, SAG2Error
from .file_titles import file_kind, first_heading, name_title
from .judges.base import Candidate, Judge
from .judges.factory import make_judge
from .markdown import find_headings, unit_heading
from .settings import IndexSettings

PATH_KEYS = ("file_path", "source")
# Metadata that places a record inside its file, as the frameworks' loaders and splitters
# write it (PDF pages, CSV rows, JSON records, a chunk's start): with the path, the record's id.
LOCATOR_KEYS = ("page", "page_label", "page_number", "seq_num", "row", "start_index")
MAX_LOCATOR_CHARS = 64
# Metadata LlamaIndex's SimpleDirectoryReader refreshes whenever a file is read (the day it
# was last read): it says nothing about the file, so it alone does not make a rewrite.
VOLATILE_KEYS = frozenset({"last_accessed_date"})
NAMES_IN_WARNING = 10


@dataclass(frozen=True)
class SourceRecord:
    """A framework document as an adapter hands it over: its own id (None when it has none
    worth keeping), its plain text and its metadata."""

    id: str | None
    text: str
    metadata: Mapping[str, Any]


def is_random_id(doc_id: str) -> bool:
    """Whether an id is a random UUID4, LlamaIndex's default, which differs on every run."""
    try:
        return uuid.UUID(doc_id).version == 4
    except ValueError:
        return False


def plan_ingest(
    records: Sequence[SourceRecord], *, skip_empty: bool = True
) -> list[tuple[int, str]]:
    """(position, document id) of each record to index, in order, by the module's rules.

    Blank records are skipped with one ``UserWarning`` naming them (``skip_empty``) or refused
    with an InvalidInputError; exact repeats are dropped.
    """
    _handle_empty([(p, r) for p, r in enumerate(records) if not r.text.strip()], skip_empty)
    kept: list[int] = []
    seen: set[str] = set()
    for position, record in enumerate(records):
        fingerprint = _fingerprint(record.id, record)
        if record.text.strip() and fingerprint not in seen:
            seen.add(fingerprint)
            kept.append(position)
    paths = Counter(located_path(records[p].metadata) for p in kept if records[p].id is None)
    parts: Counter[str] = Counter()
    planned = []
    for position in kept:
        record = records[position]
        planned.append((position, record.id or _derived_id(record, paths, parts)))
    return planned


def _derived_id(record: SourceRecord, paths: Counter[str | None], parts: Counter[str]) -> str:
    """The id of a record without one: its located path (numbered when shared), else a
    content hash."""
    path = located_path(record.metadata)
    if path is None:
        return content_id(record.text, record.metadata)
    if paths[path] == 1:
        return path
    parts[path] += 1
    return f"{path}_part_{parts[path] - 1}"


def stable_source_id(source_id: str, metadata: Mapping[str, Any], content_hash: str | None) -> str:
    """A source document's id that a re-run gives again: its own unless random, else its
    located file path (`located_path`: the id the same document gets when indexed whole),
    else its content hash (LlamaIndex's ``hash`` of the source), else its own."""
    if not is_random_id(source_id):
        return source_id
    path = located_path(metadata)
    if path is not None:
        return path
    return content_id(content_hash, {}) if content_hash else source_id


def write_changed(index: DocumentIndex, documents: Sequence[Document]) -> list[Document]:
    """Add the documents the index does not hold already unchanged, in one transaction;
    return those written (a re-run of unchanged files writes none)."""
    unchanged = stored_unchanged(index, documents)
    changed = [document for document, same in zip(documents, unchanged, strict=True) if not same]
    if changed:
        index.add_documents(changed)
    return changed


def stored_unchanged(index: DocumentIndex, documents: Sequence[Document]) -> list[bool]:
    """Per document, whether the index holds it already unchanged: one look-up finds which
    ids are stored at all, one more reads the stored units of those with a heading path, and
    only stored documents are compared in full."""
    stored = index.metadata([document.id for document in documents])
    headed = [d.id for d in documents if d.heading and d.id in stored]
    units: dict[str, list[Unit]] = {}
    for unit in index.document_units(headed).values() if headed else ():
        units.setdefault(unit.doc_id, []).append(unit)
    return [
        document.id in stored and is_stored_unchanged(index, document, units.get(document.id, []))
        for document in documents
    ]


def is_stored_unchanged(index: DocumentIndex, document: Document, units: Sequence[Unit]) -> bool:
    """Whether the index holds this document already with the same text, title and metadata
    (volatile metadata aside) and, for a document with a heading path, stored ``units`` that
    carry the headings that path gives them (the stored document does not keep the path)."""
    stored = index.document(document.id)
    if stored is None or (stored.text, stored.title) != (document.text, document.title):
        return False
    if document.heading and not _same_unit_headings(document, units):
        return False
    if stored.metadata_json == document.metadata_json:
        return True
    return _lasting(stored.metadata) == _lasting(document.metadata)


def _same_unit_headings(document: Document, units: Sequence[Unit]) -> bool:
    """Whether every stored unit of the document has the heading path ingest would give it
    now (its outer heading path, then the markdown headings around and inside its span)."""
    headings = find_headings(document.text)
    return bool(units) and all(
        unit.heading == unit_heading(document.heading, headings, unit.char_start, unit.char_end)
        for unit in units
    )


def _lasting(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """Metadata without the keys a reader refreshes on every read."""
    return {key: value for key, value in metadata.items() if key not in VOLATILE_KEYS}


def content_id(text: str, metadata: Mapping[str, Any]) -> str:
    """A stable id from content alone: the first 32 hex digits of SHA-256 of text and metadata."""
    digest = hashlib.sha256(_canonical([text, metadata]).encode("utf-8", "surrogatepass"))
    return digest.hexdigest()[:32]


def _fingerprint(doc_id: str | None, record: SourceRecord) -> str:
    """What makes two records exact repeats of each other."""
    return _canonical([doc_id, record.text, record.metadata])


def _canonical(value: object) -> str:
    """JSON with sorted keys; values JSON cannot hold are written as their repr."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=repr)


def _path(metadata: Mapping[str, Any]) -> str | None:
    """The record's file path (or LangChain ``source``) when metadata holds a non-blank one."""
    for key in PATH_KEYS:
        value = metadata.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return None


def located_path(metadata: Mapping[str, Any]) -> str | None:
    """The record's file path with its place in the file (``report.pdf#page=3``) when the
    metadata gives one (`LOCATOR_KEYS`), else the path alone; None without a path."""
    path = _path(metadata)
    if path is None:
        return None
    places = [f"{key}={metadata[key]}" for key in LOCATOR_KEYS if _is_place(metadata.get(key))]
    return f"{path}#{','.join(places)}" if places else path


def _is_place(value: object) -> bool:
    """A page, row or offset: an int (not a bool), or a short non-blank string."""
    if isinstance(value, int) and not isinstance(value, bool):
        return True
    return isinstance(value, str) and bool(value.strip()) and len(value) <= MAX_LOCATOR_CHARS


def _handle_empty(empty: Sequence[tuple[int, SourceRecord]], skip_empty: bool) -> None:
    """Warn once about blank records (given with their positions), naming them, or refuse."""
    if not empty:
        return
    names = [display_name(record, position) for position, record in empty]
    shown = ", ".join(names[:NAMES_IN_WARNING]) + (" ..." if len(names) > NAMES_IN_WARNING else "")
    if not skip_empty:
        raise InvalidInputError(
            f"{len(empty)} document(s) have no text: {shown}; remove them, or pass "
            "skip_empty=True to skip them with a warning"
        )
    warnings.warn(
        f"skipped {len(empty)} document(s) with no text: {shown}", UserWarning, stacklevel=3
    )


def display_name(record: SourceRecord, position: int) -> str:
    """How a message names a record: its file path, file name or title, else its id/position."""
    for key in (*PATH_KEYS, "file_name", "title"):
        value = record.metadata.get(key)
        if isinstance(value, str) and value.strip():
            return repr(value)
    return repr(record.id) if record.id else f"document at position {position}"


def document_title(text: str, metadata: Mapping[str, Any], title_key: str | None) -> str:
    """The title to index: metadata ``title_key``, else the file's own first heading, else
    its name (after its folder's name when the name is generic)."""
    given = metadata.get(title_key) if title_key else None
    if isinstance(given, str) and given.strip():
        return given
    name = _file_name(metadata)
    heading = first_heading(text, file_kind(name))
    if heading:
        return heading[:MAX_TITLE_CHARS]
    if name is None:
        return ""
    return name_title(name, _folder_name(metadata))[:MAX_TITLE_CHARS]


def _folder_name(metadata: Mapping[str, Any]) -> str | None:
    """The name of the folder holding the record's file, when its path is a local one."""
    path = _path(metadata)
    if path is None or "://" in path:
        return None
    return PurePath(path).parent.name or None


def _file_name(metadata: Mapping[str, Any]) -> str | None:
    """The file name from ``file_name``, else from a path (URLs have no file name)."""
    name = metadata.get("file_name")
    if isinstance(name, str) and name.strip():
        return name
    path = _path(metadata)
    if path is None or "://" in path:
        return None
    return PurePath(path).name or None


def precompute_judge(
    index: DocumentIndex, judge: Judge, doc_ids: Sequence[str], *, progress: bool = True
) -> int:
    """Let the judge prepare the passages it will be shown for these documents' units.

    Returns how many passages the judge prepared (0 for judges with nothing to prepare).
    """
    units = index.document_units(doc_ids)
    candidates = [Candidate(unit.title, unit.body) for _, unit in sorted(units.items())]
    return judge.precompute(candidates, progress=progress) if candidates else 0


@dataclass
class AdapterIndex:
    """The index an adapter searches, and what releasing it must undo."""

    index: DocumentIndex
    # The SQLite file this adapter opened (None for a backend it was given), whether this
    # opening created it, and the temporary folder holding it when no path was given.
    path: Path | None = None
    created: bool = False
    scratch: TemporaryDirectory[str] | None = field(default=None, repr=False)

    def release(self) -> None:
        """Close the index and remove the temporary folder, if any. Idempotent."""
        self.index.close()
        if self.scratch is not None:
            self.scratch.cleanup()
            self.scratch = None

    def remove_if_created(self) -> None:
        """Delete the index file when this opening created it (after a failed first ingest)."""
        if self.path is not None and self.created:
            remove_index_files(self.path)


def open_index(
    backend: DocumentIndex | None,
    path: str | os.PathLike[str] | None,
    settings: IndexSettings | None,
    *,
    create: bool = True,
    path_argument: str,
    file_name: str,
) -> AdapterIndex:
    """The given backend, else the SQLite file at ``path`` (in a temporary folder if None).

    ``path_argument`` names the adapter's path argument in the error for passing both.
    """
    if backend is not None:
        if path is not None or settings is not None:
            raise InvalidInputError(
                f"pass either backend= (an open index) or {path_argument}=/index_settings="
            )
        return AdapterIndex(backend)
    scratch = None
    if path is None:
        scratch = TemporaryDirectory(prefix="sag2-", ignore_cleanup_errors=True)
        path = Path(scratch.name) / file_name
    location = Path(path)
    existed = location.exists()
    try:
        index = SQLiteIndex(location, settings, create=create)
    except BaseException:
        if scratch is not None:
            scratch.cleanup()
        raise
    return AdapterIndex(index, location, not existed, scratch)


def write_and_prepare(
    index: DocumentIndex, judge: Judge, batch: Sequence[Document], *, prepare: bool
) -> list[Document]:
    """Write the documents the index does not hold unchanged, then (with ``prepare``) let
    the judge prepare their passages; return those written."""
    written = write_changed(index, batch)
    if prepare and written:
        precompute_judge(index, judge, [document.id for document in written])
    return written


@dataclass
class AdapterSession:
    """What a retriever runs on, the engine and the index it opened, closed once whichever
    of ``close`` and ``aclose`` comes first; ``reopen`` says how to open the index again."""

    opened: AdapterIndex
    engine: SAG2Engine
    reopen: str
    closed: bool = False

    def close(self) -> None:
        """Close the engine (and its judge), then release the index."""
        if not self.closed:
            self.closed = True
            self.engine.close()
            self.opened.release()

    async def aclose(self) -> None:
        """Async `close`: the judge is closed on the running event loop."""
        if not self.closed:
            self.closed = True
            await self.engine.aclose()
            self.opened.release()

    def open_engine(self) -> SAG2Engine:
        """The engine, or an error saying how to open the index again once closed."""
        if self.closed:
            raise SAG2Error(f"this retriever is closed; {self.reopen}")
        return self.engine


def judge_or_local(judge: Judge | None) -> Judge:
    """The given judge, else the default offline judge (the pool judge)."""
    if judge is not None:
        return judge
    try:
        return make_judge("local")
    except JudgeConfigurationError as error:
        raise JudgeConfigurationError(
            f"{error}; or pass judge= explicitly (for example a JEVJudge, or OverlapJudge in tests)"
        ) from error
