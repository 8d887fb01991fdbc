"""What a delete tells the contentless FTS5 table: the stored units' tokens, analysed again.

FTS5 forgets a contentless row only when given its tokens, so each deleted unit is
re-analysed from the stored text and checked against the checksum taken at ingest. The
analysis runs before the write transaction (it can take seconds on a large document), and
each document's text is read once, so time and memory stay linear in its size.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from ..._sqlite import json_list
from ...analysis import Profile
from ...errors import IndexSettingsMismatchError
from ..ingest import token_checksum, unit_token_texts

# The units of some documents without their text, grouped by document.
DOOMED_UNITS_SQL = """
    SELECT doc_id, unit_id, heading, char_start, char_end, token_crc FROM units
    WHERE doc_id IN (SELECT value FROM json_each(?)) ORDER BY doc_id, unit_id"""
DOOMED_TEXT_SQL = "SELECT title, text FROM documents WHERE doc_id = ?"
CURRENT_UNIT_IDS_SQL = """
    SELECT unit_id FROM units WHERE doc_id IN (SELECT value FROM json_each(?))
    ORDER BY unit_id"""

FtsRow = tuple[int, str, str, str]


@dataclass(frozen=True)
class DeletedUnits:
    """The units of some documents as FTS5 indexed them: (unit id, title, heading, body)
    token texts, in unit id order."""

    rows: tuple[FtsRow, ...]

    @property
    def unit_ids(self) -> list[int]:
        """The units' ids, ascending."""
        return [row[0] for row in self.rows]


def analyse_deleted(
    connection: sqlite3.Connection, path: Path, doc_ids: list[str], profile: Profile
) -> DeletedUnits:
    """Re-analyse the stored units of the documents, reading each document's text once.

    Refuses (IndexSettingsMismatchError) when a unit no longer analyses to the tokens it
    was indexed with, so a delete can never corrupt the FTS5 index.
    """
    units = connection.execute(DOOMED_UNITS_SQL, (json_list(doc_ids, "document id"),))
    rows: list[FtsRow] = []
    document: tuple[str, str, str] | None = None  # (doc_id, title, text) of the last unit
    for doc_id, unit_id, heading, start, end, checksum in units.fetchall():
        if document is None or document[0] != doc_id:
            document = (doc_id, *connection.execute(DOOMED_TEXT_SQL, (doc_id,)).fetchone())
        tokens = unit_token_texts(document[1], heading, document[2][start:end], profile)
        if token_checksum(*tokens) != checksum:
            raise IndexSettingsMismatchError(
                f"index {str(path)!r}: unit {unit_id} no longer analyses to the tokens it "
                "was indexed with (was jieba or the analyzer changed?); nothing was "
                "deleted. Rebuild the index with this version"
            )
        rows.append((int(unit_id), *tokens))
    return DeletedUnits(tuple(sorted(rows)))


def still_current(
    connection: sqlite3.Connection, doc_ids: list[str], deleted: DeletedUnits
) -> bool:
    """Whether the documents still have exactly the analysed units (ids are never reused,
    so the same ids mean the same rows): no other writer changed them in between."""
    current = connection.execute(CURRENT_UNIT_IDS_SQL, (json_list(doc_ids, "document id"),))
    return [int(row[0]) for row in current] == deleted.unit_ids
