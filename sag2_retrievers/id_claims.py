"""The ids of one ingest run: the first record claiming an id is kept, and every later claim is
counted (the same document again) or listed (another document), so no record is lost unsaid."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from .documents import Document


@dataclass(frozen=True)
class Conflict:
    """A record dropped because an earlier record of the run, with other content, has its id."""

    id: str
    source: str
    first_source: str

    def sentence(self) -> str:
        """What happened, for a warning: the id, where each claim came from, which was kept."""
        return (
            f"duplicate id {self.id!r} in {self.source!r} differs from the record of "
            f"{self.first_source!r} with that id; the first was kept, this one not indexed"
        )


@dataclass
class IdClaims:
    """Each id's first claim in a run (a digest of its content, and where it came from), the
    count of exact repeats and the conflicting claims, in the order they were met."""

    first: dict[str, tuple[bytes, str]] = field(default_factory=dict)
    repeats: int = 0
    conflicts: list[Conflict] = field(default_factory=list)

    def kept(self, documents: Iterable[Document], source: str) -> Iterator[Document]:
        """The documents of one source whose id no earlier record of the run claimed."""
        for document in documents:
            if self._first_claim(document, source):
                yield document

    def _first_claim(self, document: Document, source: str) -> bool:
        """Record a claim; whether it is the id's first."""
        digest = _content_digest(document)
        claimed = self.first.get(document.id)
        if claimed is None:
            self.first[document.id] = (digest, source)
            return True
        if claimed[0] == digest:
            self.repeats += 1
        else:
            self.conflicts.append(Conflict(document.id, source, claimed[1]))
        return False


def _content_digest(document: Document) -> bytes:
    """A digest of what is stored of a document besides its id: title, text and metadata."""
    content = hashlib.blake2b(digest_size=16)
    for part in (document.title, document.text, document.metadata_json, document.heading):
        content.update(part.encode("utf-8") + b"\x00")
    return content.digest()
