"""LexicalBackend: what the SAG2 engine asks of a lexical index, with no SQL in the contract.

A backend stores analysed units (tokens are final when they arrive, ``analysis.final_tokens``)
and answers bounded questions about them: top-k BM25 of an OR of terms, per-term expansion
candidates, document frequencies, and lookups by id. No method returns every match of a query
or every id of a filter, so a server backend (PostgreSQL, issue 14) can implement it with
top-k queries. ``SQLiteIndex`` is the reference implementation.
Question analysis (`query.py`) and settings (`settings.py`) are shared by every backend.

Scores follow FTS5's ``bm25()`` exactly (weights title 2, heading 2, body 1; see
``docs/method.md``): for an OR of phrases it is the sum of each phrase's contribution, each
phrase repeated in the list counting once per repetition.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol, runtime_checkable

from ..analysis import Profile, analyze_body
from ..documents import Document, Unit
from ..filters import Filters as Filters
from ..index_reads import SearchHit as SearchHit
from ..settings import IndexSettings
from .ingest import PreparedBatch, UnitStatistics


@runtime_checkable
class LexicalBackend(Protocol):
    """A lexical index of units: writes, one read snapshot, BM25 top-k, expansion, lookups."""

    # The settings the stored units were analysed with (the analyzer profile among them).
    settings: IndexSettings

    @property
    def unit_statistics(self) -> UnitStatistics[Any]:
        """How this backend derives what it stores from analysed units: run by the ingest
        pipeline in the analysis workers, handed back in `PreparedBatch.statistics`."""
        ...

    # -- writes ----------------------------------------------------------------------------

    def upsert_analysed(self, documents: Sequence[Document], analysed: PreparedBatch[Any]) -> int:
        """Replace (by id) documents with their analysed units in one transaction; units written."""
        ...

    def delete(self, doc_ids: Iterable[str]) -> int:
        """Delete documents and their units by id in one transaction; documents removed."""
        ...

    # -- reads -----------------------------------------------------------------------------

    def snapshot(self) -> AbstractContextManager[None]:
        """Make this thread's reads inside the block see one consistent state (re-entrant)."""
        ...

    def unit_count(self) -> int:
        """N: the number of indexed units."""
        ...

    def document_frequencies(self, terms: Iterable[str]) -> dict[str, int]:
        """Body-level df of tokens and space-joined phrases (0 for an unknown term)."""
        ...

    def document_frequencies_any(self, terms: Iterable[str]) -> dict[str, int]:
        """Units matching each token or phrase in any field (the "matches nothing" test)."""
        ...

    def rank_expression(
        self, terms: Sequence[str], limit: int, *, filters: Filters | None = None
    ) -> list[tuple[int, float]]:
        """Top ``limit`` (unit id, BM25 of the OR of the distinct terms), best first, ties by id."""
        ...

    def score_units(self, terms: Sequence[str], unit_ids: Collection[int]) -> dict[int, float]:
        """BM25 of the OR of the distinct terms for the given units; units matching no term
        are absent (corpus statistics as in `rank_expression`)."""
        ...

    def expand(
        self,
        required_terms: Sequence[str],
        scoring_terms: Sequence[str],
        exclude: Collection[int],
        limit: int,
        *,
        filters: Filters | None = None,
    ) -> dict[str, list[int]]:
        """Per required term: the top ``limit`` units holding it in any field, not excluded,
        passing the filters, ranked by BM25 of the OR of ``scoring_terms`` (repeats count),
        ties by unit id."""
        ...

    def units(self, unit_ids: Iterable[int]) -> dict[int, Unit]:
        """The units with these ids (missing ids are absent)."""
        ...

    def expansion_units(self, unit_ids: Iterable[int]) -> dict[int, list[list[str]]]:
        """Per unit, its sentences' expansion units (names as phrases, then tokens), derived
        from its text by `sentence_expansion_units` (missing ids are absent)."""
        ...

    def metadata(self, doc_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        """The stored metadata of these documents, keyed by id."""
        ...

    def title_aliases(self, folded: Collection[str]) -> dict[str, str]:
        """For each accent-folded title key that is one title's alias, that title's phrase."""
        ...

    def title_phrases(self, phrases: Collection[str]) -> set[str]:
        """The given phrases that are multiword corpus titles."""
        ...

    def word_document_frequencies(self, words: Collection[str]) -> tuple[int, dict[str, int]]:
        """The number of documents, and how many documents' texts hold each given word
        (`analysis.paper.diversity.diversity_words`): the "paper" profile's diversity idf."""
        ...


@runtime_checkable
class DocumentIndex(LexicalBackend, Protocol):
    """A backend the integrations and the CLI drive: document writes and lookups besides
    what the engine asks (`SQLiteIndex` and `PostgresIndex` both are one)."""

    def add_documents(self, documents: Iterable[Document], *, parallel: bool = True) -> int:
        """Insert or replace (by id) documents in one transaction; units written."""
        ...

    def ingest(
        self,
        batches: Iterable[Iterable[Document]],
        *,
        parallel: bool = True,
        on_batch: Callable[[int], None] | None = None,
    ) -> int:
        """Add batches of documents, one transaction each; units written."""
        ...

    def document(self, doc_id: str) -> Document | None:
        """The stored source document with this id, or None."""
        ...

    def search(
        self,
        question: str,
        limit: int = 100,
        *,
        max_tokens: int = 80,
        filters: Filters | None = None,
    ) -> list[SearchHit]:
        """BM25 top ``limit`` units for the question's first ``max_tokens`` distinct tokens."""
        ...

    def document_count(self) -> int:
        """The number of stored source documents."""
        ...

    def document_units(self, doc_ids: Iterable[str]) -> dict[int, Unit]:
        """Every unit of the given documents, keyed by unit id."""
        ...

    def allowed_units(self, filters: Filters) -> set[int]:
        """Every unit whose document passes the filters (maintenance, e.g. deleting a source's
        chunks; retrieval never asks for it)."""
        ...

    def stats(self) -> dict[str, int]:
        """Sizes for reports: documents, units and bytes on disk."""
        ...

    def close(self) -> None:
        """Release connections and workers. Idempotent."""
        ...


def sentence_expansion_units(
    units: Mapping[int, Unit], profile: Profile
) -> dict[int, list[list[str]]]:
    """Per unit, its sentences' expansion units, analysed from its text exactly as at ingest.

    A unit's body is the very slice of its document that ingest analysed, so deriving them
    here gives what storing them would, and keeps them out of the index (issue 10).
    """
    return {
        unit_id: [list(sentence) for sentence in analyze_body(unit.body, profile).sentences]
        for unit_id, unit in units.items()
    }
