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
    """Each id's first claim in a run, the count of exact repeats and the conflicting claims in
    the order they were met. A claim is kept as two integers, a digest of the id and one of
    the content with the number of its source (measured: 144 bytes and 3.3 us a record, so
    150 MB and 3 s for a million records), not the record or its id."""

    first: dict[int, int] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)
    repeats: int = 0
    conflicts: list[Conflict] = field(default_factory=list)

    def kept(self, documents: Iterable[Document], source: str) -> Iterator[Document]:
        """The documents of one source whose id no earlier record of the run claimed."""
        self.sources.append(source)
        for document in documents:
            if self._first_claim(document, len(self.sources) - 1):
                yield document

    def _first_claim(self, document: Document, source: int) -> bool:
        """Record a claim; whether it is the id's first."""
        content = _digest(document.title, document.text, document.metadata_json, document.heading)
        claim = content << _SOURCE_BITS | source
        key = _digest(document.id)
        earlier = self.first.get(key)
        if earlier is None:
            self.first[key] = claim
            return True
        if earlier >> _SOURCE_BITS == content:
            self.repeats += 1
        else:
            first_source = self.sources[earlier & _SOURCE_MASK]
            self.conflicts.append(Conflict(document.id, self.sources[source], first_source))
        return False


# A claim holds its source's number in its low bits (2**32 sources: far more than files).
_SOURCE_BITS = 32
_SOURCE_MASK = (1 << _SOURCE_BITS) - 1


def _digest(*parts: str) -> int:
    """A 128-bit digest of strings (each ended by a NUL, which no stored string holds), so
    two different ids or contents share one with negligible odds."""
    digest = hashlib.blake2b(digest_size=16)
    for part in parts:
        digest.update(part.encode("utf-8") + b"\x00")
    return int.from_bytes(digest.digest(), "big")
