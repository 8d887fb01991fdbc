"""Reading a PostgreSQL index: BM25 on the client from posting blocks; units, df and titles."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ...analysis.paper.diversity import word_document_frequencies
from ...documents import Document, Unit
from ...filters import parse_filters
from ...query import check_limit
from ..base import Filters, sentence_expansion_units
from ..scorer import ArrayScorer, Statistics
from . import schema as pg
from .blocks import length_table, read_segment
from .filters import compile_postgres
from .scorer import BlockPostings, Generation, PhraseFrequencies
from .transactions import PostgresConnections, string_ids

_FILTER_CHUNK = 2_000  # ranked candidates checked against a filter per round trip
Ints = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]


class PostgresReading(PostgresConnections):
    """Search, score, expand and look up units, df and titles; the per-generation state
    (N, |D|, segment headers) is read once per generation."""

    _state: Generation | None
    _scorer: ArrayScorer
    _phrase_df: PhraseFrequencies

    def unit_count(self) -> int:
        """N: the number of indexed units."""
        return int(self._fetch(self._sql(pg.UNIT_COUNT))[0][0])

    def document_count(self) -> int:
        """The number of stored source documents."""
        return int(self._fetch(self._sql(pg.DOCUMENT_COUNT))[0][0])

    def rank_expression(
        self, terms: Sequence[str], limit: int, *, filters: Filters | None = None
    ) -> list[tuple[int, float]]:
        """Top ``limit`` (unit id, BM25 of the OR of the distinct terms), best first, ties by
        document id and offset."""
        check_limit(limit)
        phrases = _phrases(term for term in terms if term)
        if not phrases or limit == 0:
            return []
        with self.snapshot():
            source, stats = self._source()
            if parse_filters(filters) is None:
                return self._scorer.search(source, stats, phrases, limit)
            parts = self._scorer.ranking(source, stats, phrases, max(_FILTER_CHUNK, 4 * limit))
            return self._passing(parts, filters, limit)

    def _passing(
        self, parts: Iterable[tuple[Ints, Floats]], filters: Filters | None, limit: int
    ) -> list[tuple[int, float]]:
        """The first ``limit`` (unit, score) of a ranking given in parts whose documents pass
        the filters, one round trip per part."""
        condition, values = _filter_condition(self.schema, filters)
        statement = pg.compose(pg.PASSING_UNITS, self.schema, filters=condition)
        kept: list[tuple[int, float]] = []
        for units, scores in parts:
            candidates = units.tolist()
            rows = self._fetch(statement, {"candidates": candidates, **values})
            passing = {int(row[0]) for row in rows}
            pairs = zip(candidates, scores.tolist(), strict=True)
            kept.extend(pair for pair in pairs if pair[0] in passing)
            if len(kept) >= limit:
                break
        return kept[:limit]

    def score_units(self, terms: Sequence[str], unit_ids: Collection[int]) -> dict[int, float]:
        """BM25 of the OR of the distinct terms for the given units; units matching no term
        are absent (corpus statistics as in `rank_expression`)."""
        phrases = _phrases(term for term in terms if term)
        if not phrases or not unit_ids:
            return {}
        with self.snapshot():
            return self._scorer.score_units(*self._source(), phrases, unit_ids)

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
        ties by unit id. A filter excludes the members whose documents fail it."""
        check_limit(limit)
        required = list(dict.fromkeys(required_terms))
        ranked: dict[str, list[int]] = {term: [] for term in required}
        if not required or limit == 0:
            return ranked
        asked = dict(zip(required, _phrases(required), strict=True))
        scoring = _phrases(term for term in scoring_terms if term)
        with self.snapshot():
            source, stats = self._source()
            blocked = set(exclude)
            if parse_filters(filters) is not None:
                blocked |= self._failing(source, stats, list(asked.values()), filters)
            phrases = list(asked.values())
            found = self._scorer.expand(source, stats, phrases, scoring, blocked, limit)
        return {term: found[phrase] for term, phrase in asked.items()}

    def _failing(
        self, source: BlockPostings, stats: Statistics, terms: list[str], filters: Filters | None
    ) -> set[int]:
        """The units holding any of ``terms`` whose documents fail the filters."""
        members = self._scorer.contributions(source, stats, terms)
        slots = np.unique(np.concatenate([slots for slots, _ in members.values()]))
        candidates = stats.ids[slots]
        chunks = np.split(candidates, range(_FILTER_CHUNK, len(candidates), _FILTER_CHUNK))
        parts = ((chunk, np.zeros(len(chunk))) for chunk in chunks)
        passing = {unit for unit, _ in self._passing(parts, filters, len(candidates))}
        return set(candidates.tolist()) - passing

    def document_frequencies(self, terms: Iterable[str]) -> dict[str, int]:
        """Body-level df: tokens from the df table kept at ingest, phrases by their instances."""
        return self._frequencies(terms, pg.BODY_TOKEN_DF, body=True)

    def document_frequencies_any(self, terms: Iterable[str]) -> dict[str, int]:
        """Units matching each term in any field (the "matches nothing" test)."""
        return self._frequencies(terms, pg.ANY_TOKEN_DF, body=False)

    def _frequencies(self, terms: Iterable[str], token_df: str, *, body: bool) -> dict[str, int]:
        """Per term, a df: a token's from the ``token_df`` table, a phrase's from its
        instances (units holding it in the body, or in any field)."""
        unique = list(dict.fromkeys(terms))
        forms = dict(zip(unique, _phrases(unique), strict=True))
        tokens = [form for form in dict.fromkeys(forms.values()) if form and " " not in form]
        phrases = [form for form in dict.fromkeys(forms.values()) if " " in form]
        counts: dict[str, Any] = {}
        with self.snapshot():
            if tokens:
                counts.update(self._fetch(self._sql(token_df), (tokens,)))
            if phrases:
                found = self._source()[0].phrase_frequencies(phrases)
                counts.update({phrase: pair[body] for phrase, pair in found.items()})
        return {term: int(counts.get(form, 0)) for term, form in forms.items()}

    def _source(self) -> tuple[BlockPostings, Statistics]:
        """The scorer's postings source and statistics at this generation (in a snapshot)."""
        state = self._generation()
        source = BlockPostings(self._read_blocks, state, self._phrase_df, self._content_keys)
        return source, state.stats

    def _content_keys(self, unit_ids: list[int]) -> list[tuple[str, int]]:
        """(document id, character offset) of each unit, in the order given (ties' order)."""
        rows = self._fetch(self._sql(pg.CONTENT_KEYS), (unit_ids,))
        found = {int(unit): (str(doc_id), int(start)) for unit, doc_id, start in rows}
        return [found[unit] for unit in unit_ids]

    def _generation(self) -> Generation:
        """N, avgdl, every unit's |D| and the segment headers at this generation (read once
        per generation; call inside a snapshot)."""
        generation, rows = self._fetch(self._sql(pg.GENERATION))[0]
        state = self._state
        if state is None or state.stats.generation != str(generation):
            segments = [
                read_segment(row) for row in self._fetch_binary(self._sql(pg.SEGMENT_HEADERS))
            ]
            lengths = length_table(segments)
            ids = np.arange(len(lengths), dtype=np.int64)
            stats = Statistics.of_units(str(generation), int(rows), ids, lengths)
            state = Generation(stats, {segment.segment: segment for segment in segments})
            self._state = state
        return state

    def _read_blocks(self, terms: list[str], positional: list[str]) -> list[tuple[Any, ...]]:
        """The block rows of ``terms`` (term, segment, gaps, F, then position counts and
        positions for the ``positional`` terms, else NULL), in one statement."""
        params = {"terms": terms, "positional": positional}
        return self._fetch_binary(self._sql(pg.BLOCKS), params)

    def units(self, unit_ids: Iterable[int]) -> dict[int, Unit]:
        """The units with these ids (missing ids are absent)."""
        ids = [int(unit_id) for unit_id in unit_ids]
        rows = self._fetch(self._sql(pg.UNITS), (ids,))
        return {
            int(unit_id): Unit(int(unit_id), doc_id, title, heading, body, start, end)
            for unit_id, doc_id, title, heading, start, end, body in rows
        }

    def document_units(self, doc_ids: Iterable[str]) -> dict[int, Unit]:
        """Every unit of the given documents, keyed by unit id (unknown ids have none)."""
        with self.snapshot():
            rows = self._fetch(self._sql(pg.UNITS_OF_DOCUMENTS), (string_ids(doc_ids),))
            return self.units(int(row[0]) for row in rows)

    def allowed_units(self, filters: Filters) -> set[int]:
        """Every unit whose document passes the filters (maintenance, not retrieval)."""
        expr = parse_filters(filters)
        condition: Any = pg.sql_fragment("true")
        values: dict[str, Any] = {}
        if expr is not None:
            condition, values = compile_postgres(expr)
        statement = pg.compose(pg.FILTERED_UNITS, self.schema, filters=condition)
        return {int(row[0]) for row in self._fetch(statement, values)}

    def stats(self) -> dict[str, int]:
        """Sizes for reports: documents, units, and the schema's bytes on disk."""
        size = self._fetch(pg.SCHEMA_BYTES, (self.schema,))[0][0]
        return {
            "documents": self.document_count(),
            "units": self.unit_count(),
            "bytes": int(size or 0),
        }

    def expansion_units(self, unit_ids: Iterable[int]) -> dict[int, list[list[str]]]:
        """Per unit, its sentences' expansion units (names as phrases, then tokens), analysed
        from its text (missing ids are absent)."""
        return sentence_expansion_units(self.units(unit_ids), self.settings.analyzer_profile)

    def metadata(self, doc_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        """The stored metadata of these documents, keyed by id."""
        rows = self._fetch(self._sql(pg.METADATA), (list(string_ids(doc_ids)),))
        return {doc_id: dict(metadata) for doc_id, metadata in rows}

    def document(self, doc_id: str) -> Document | None:
        """The stored document with this id, or None."""
        rows = self._fetch(self._sql(pg.DOCUMENT), (doc_id,))
        if not rows:
            return None
        stored_id, text, title, metadata = rows[0]
        return Document(stored_id, text, title, metadata)

    def title_aliases(self, folded: Collection[str]) -> dict[str, str]:
        """For each accent-folded title key that is one title's alias, that title's phrase."""
        if not folded:
            return {}
        return dict(self._fetch(self._sql(pg.TITLE_ALIASES), (list(folded),)))

    def word_document_frequencies(self, words: Collection[str]) -> tuple[int, dict[str, int]]:
        """The number of documents and each word's document frequency over their texts
        (read from every document on each call: only the "paper" profile asks)."""
        texts = [row[0] for row in self._fetch(self._sql(pg.ALL_DOCUMENT_TEXTS))]
        df = word_document_frequencies(texts)
        return len(texts), {word: df.get(word, 0) for word in words}

    def title_phrases(self, phrases: Collection[str]) -> set[str]:
        """The given phrases that are multiword corpus titles."""
        if not phrases:
            return set()
        return {row[0] for row in self._fetch(self._sql(pg.TITLE_PHRASES), (list(phrases),))}


def _phrases(terms: Iterable[str]) -> list[str]:
    """Each term as its tokens joined by single spaces (the form postings are keyed by; the
    analyzer's tokens are final, `text.final_tokens`)."""
    return [" ".join(term.split()) for term in terms]


def _filter_condition(schema: str, filters: Filters | None) -> tuple[Any, dict[str, Any]]:
    """A bound SQL condition on hit ``h``: its unit's document metadata passes the filters."""
    from psycopg import sql

    expr = parse_filters(filters)
    if expr is None:
        return sql.SQL("true"), {}
    condition, values = compile_postgres(expr)
    exists = sql.SQL(
        "EXISTS (SELECT 1 FROM {s}.units u JOIN {s}.documents d ON d.doc_id = u.doc_id"
        " WHERE u.unit_id = h.unit_id AND {condition})"
    ).format(s=sql.Identifier(schema), condition=condition)
    return exists, values
