"""Reading a SQLite index: BM25 from the postings arrays, units, df and title repair tables."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..._sqlite import json_list
from ...analysis import Profile, tokenize
from ...analysis.paper.diversity import word_document_frequencies
from ...documents import Document, Unit
from ...errors import (
    InvalidInputError,
)
from ...query import alias_key, check_limit
from ..base import Filters, sentence_expansion_units
from ..scorer import ArrayScorer, Statistics
from . import postings
from . import schema as sql
from .filters import NO_FILTER, filter_sql
from .fts import body_expression, or_expression, quote_term
from .postings import SQLitePostings
from .transactions import SQLiteConnections, id_collection

_COMPOUND_LIMIT = 400
# A document's units beyond this many are cut from its text read once: SQLite's substr()
# reads the whole text for each unit it cuts.
_CUT_IN_SQL_UNITS = 8
_MAX_PARAMETERS = 32_000  # SQLite's smallest default limit on bound parameters is 32,766
# Phrase document frequencies remembered per generation (each costs an FTS5 count).
_PHRASE_DF_CACHE = 100_000


@dataclass(frozen=True)
class TitleCatalog:
    """Corpus titles as lexical-repair tables: accent aliases and multiword title phrases."""

    aliases: Mapping[str, str]
    phrases: frozenset[str]


class SQLiteReading(SQLiteConnections):
    """Search, score, expand and look up units, df and titles, each in one snapshot; the
    per-generation caches are replaced whole, so threads never see a half-built one."""

    _catalog: tuple[str, TitleCatalog] | None
    _word_df: tuple[str, int, Counter[str]] | None
    _statistics: Statistics | None
    _unit_count: tuple[str, int] | None
    _phrase_df: tuple[str, dict[str, int]] | None
    _scorer: ArrayScorer

    def unit_count(self) -> int:
        """N: the number of indexed units (counted once per generation)."""
        with self.snapshot():
            generation = self._generation()
            # Each shared cache is read once: another thread may replace it at any moment.
            cached = self._unit_count
            if cached is None or cached[0] != generation:
                count = int(self._connection().execute(sql.UNIT_COUNT_SQL).fetchone()[0])
                cached = self._unit_count = (generation, count)
            return cached[1]

    def document_count(self) -> int:
        """The number of stored source documents."""
        return int(self._connection().execute(sql.DOC_COUNT_SQL).fetchone()[0])

    def rank_expression(
        self, terms: Sequence[str], limit: int, *, filters: Filters | None = None
    ) -> list[tuple[int, float]]:
        """Top ``limit`` (unit id, BM25 of the OR of the distinct terms), best first, ties by id."""
        check_limit(limit)
        conditions, values = filter_sql(filters)
        expression = or_expression(terms)
        if not expression or limit == 0:
            return []
        if conditions == NO_FILTER:
            with self.snapshot():
                source = SQLitePostings(self._connection())
                return self._scorer.search(source, self._stats(), terms, limit)
        statement = sql.SEARCH_FILTERED_SQL.format(conditions=conditions)
        params = (expression, *values, limit)
        rows = self._connection().execute(statement, params)
        return [(int(rowid), float(score)) for rowid, score in rows]

    def score_units(self, terms: Sequence[str], unit_ids: Collection[int]) -> dict[int, float]:
        """BM25 of the OR of the distinct terms for the given units; units matching no term
        are absent (FTS5's statistics cover the whole table, as in `rank_expression`)."""
        phrases = [term for term in dict.fromkeys(terms) if term]
        if not phrases or not unit_ids:
            return {}
        with self.snapshot():
            source = SQLitePostings(self._connection())
            return self._scorer.score_units(source, self._stats(), phrases, unit_ids)

    def _stats(self) -> Statistics:
        """N, avgdl and every unit's |D| at this generation (read once per generation).

        FTS5's token total is the sum of the live units' |D|, so avgdl needs no other read.
        """
        generation = self._generation()
        stats = self._statistics
        if stats is None or stats.generation != generation:
            ids, lengths = postings.unit_lengths(self._connection())
            stats = Statistics.of_units(generation, self.unit_count(), ids, lengths)
            self._statistics = stats
        return stats

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
        ties by unit id.

        Without filters the postings arrays rank them (`ArrayScorer.expand`). With filters,
        one statement per 400 terms (fewer for wide filters) finds the members, scores the
        whole OR expression on them only, and ranks them in SQLite, so only the top ``limit``
        of each comes back.
        """
        check_limit(limit)
        terms = list(dict.fromkeys(required_terms))
        ranked: dict[str, list[int]] = {term: [] for term in terms}
        scoring_terms = [term for term in scoring_terms if term]
        if not terms or not scoring_terms or limit == 0:
            return ranked
        connection = self._connection()
        conditions, values = filter_sql(filters)
        if conditions == NO_FILTER:
            with self.snapshot():
                return self._scorer.expand(
                    SQLitePostings(connection), self._stats(), terms, scoring_terms, exclude, limit
                )
        statement = sql.MEMBERS_FILTERED_SQL.format(conditions=conditions)
        scoring = " OR ".join(quote_term(term) for term in scoring_terms)
        excluded = json_list(sorted(exclude), "excluded unit ids")
        # Each term's part binds the filter's values again: bound the parameters per statement.
        step = max(1, min(_COMPOUND_LIMIT, _MAX_PARAMETERS // (len(values) + 3)))
        with self.snapshot():
            for start in range(0, len(terms), step):
                chunk = terms[start : start + step]
                members = " UNION ALL ".join([statement] * len(chunk))
                compound = "".join([sql.EXPAND_HEAD_SQL, members, sql.EXPAND_TAIL_SQL])
                params = [
                    value
                    for position, term in enumerate(chunk)
                    for value in (position, quote_term(term), *values, excluded)
                ]
                for position, unit_id in connection.execute(compound, (*params, scoring, limit)):
                    ranked[chunk[position]].append(int(unit_id))
        return ranked

    def term_members(self, terms: Sequence[str]) -> dict[str, list[int]]:
        """For each term, the ids of units matching it in any field (one round trip per 400)."""
        members: dict[str, list[int]] = {term: [] for term in terms}
        pairs = [(term, quote_term(term)) for term in members]
        for term, rowid in self._compound(sql.MATCH_ROWIDS_SQL, pairs):
            members[term].append(int(rowid))
        return members

    def document_frequencies(self, terms: Iterable[str]) -> dict[str, int]:
        """Body-level df: tokens from the df table kept at ingest, phrases by an FTS5 match."""
        unique = list(dict.fromkeys(terms))
        tokens = [t for t in unique if " " not in t]
        df = dict.fromkeys(unique, 0)
        with self.snapshot():
            stored = self._connection().execute(sql.TOKEN_DF_SQL, (json_list(tokens, "term"),))
            df.update(stored.fetchall())
            df.update(self._phrase_frequencies([t for t in unique if " " in t]))
        return {term: int(count) for term, count in df.items()}

    def _phrase_frequencies(self, phrases: Sequence[str]) -> dict[str, int]:
        """Body df of multiword phrases, each counted by FTS5 once per generation."""
        generation = self._generation()
        cached = self._phrase_df
        if cached is None or cached[0] != generation or len(cached[1]) > _PHRASE_DF_CACHE:
            cached = self._phrase_df = (generation, {})
        known = cached[1]
        missing = [(t, body_expression(t)) for t in phrases if t not in known]
        known.update((t, int(n)) for t, n in self._compound(sql.MATCH_COUNT_SQL, missing))
        return {t: known[t] for t in phrases}

    def _compound(
        self, statement: str, parameters: Sequence[Sequence[Any]]
    ) -> list[tuple[Any, ...]]:
        """Run one SELECT for many parameter tuples as UNION ALL statements of up to 400 parts
        (one round trip instead of hundreds)."""
        rows: list[tuple[Any, ...]] = []
        connection = self._connection()
        for start in range(0, len(parameters), _COMPOUND_LIMIT):
            chunk = parameters[start : start + _COMPOUND_LIMIT]
            compound = " UNION ALL ".join([statement] * len(chunk))
            params = [value for part in chunk for value in part]
            rows.extend(connection.execute(compound, params).fetchall())
        return rows

    def units(self, unit_ids: Iterable[int]) -> dict[int, Unit]:
        """The units with the given ids, keyed by id (missing ids are absent)."""
        return self._unit_rows(id_collection(unit_ids, "unit_ids"))

    def document_units(self, doc_ids: Iterable[str]) -> dict[int, Unit]:
        """Every unit of the given documents, keyed by unit id (unknown ids have none)."""
        ids = json_list(id_collection(doc_ids, "doc_ids"), "document id")
        with self.snapshot():
            rows = self._connection().execute(sql.UNIT_IDS_OF_DOCS_SQL, (ids,)).fetchall()
            return self._unit_rows(row[0] for row in rows)

    def expansion_units(self, unit_ids: Iterable[int]) -> dict[int, list[list[str]]]:
        """Per unit, its sentences' expansion units (names as phrases, then tokens), analysed
        from its text (missing ids are absent)."""
        return sentence_expansion_units(self.units(unit_ids), self.settings.analyzer_profile)

    def _unit_rows(self, unit_ids: Iterable[int]) -> dict[int, Unit]:
        """Fetch units (one snapshot): SQLite cuts the text of a document's few units, and
        a document with many is read once and cut here."""
        with self.snapshot():
            connection = self._connection()
            rows = connection.execute(sql.UNITS_SQL, (json_list(unit_ids, "unit id"),)).fetchall()
            per_document = Counter(row[1] for row in rows)
            few = [row[0] for row in rows if per_document[row[1]] <= _CUT_IN_SQL_UNITS]
            pieces = dict(connection.execute(sql.UNIT_TEXTS_SQL, (json_list(few, "unit id"),)))
            many = [doc for doc, count in per_document.items() if count > _CUT_IN_SQL_UNITS]
            texts = dict(
                connection.execute(sql.DOCUMENT_TEXTS_SQL, (json_list(many, "document id"),))
            )
        return {
            int(unit_id): Unit(
                int(unit_id),
                doc_id,
                title,
                heading,
                pieces[unit_id] if unit_id in pieces else texts[doc_id][start:end],
                start,
                end,
            )
            for unit_id, doc_id, title, heading, start, end in rows
        }

    def allowed_units(self, filters: Filters) -> set[int]:
        """Ids of the units whose document metadata satisfies every filter (evaluated in SQLite)."""
        conditions, values = filter_sql(filters)
        statement = sql.FILTERED_UNIT_IDS_SQL.format(conditions=conditions)
        return {int(row[0]) for row in self._connection().execute(statement, values)}

    def document(self, doc_id: str) -> Document | None:
        """The stored source document with this id, or None."""
        if not isinstance(doc_id, str):
            raise InvalidInputError(f"doc_id must be a string, got {type(doc_id).__name__}")
        row = self._connection().execute(sql.DOCUMENT_SQL, (doc_id,)).fetchone()
        if row is None:
            return None
        return Document(row[0], row[1], row[2], json.loads(row[3]))

    def metadata(self, doc_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        """The stored metadata of the given documents, keyed by id."""
        ids = list(id_collection(doc_ids, "doc_ids"))
        rows = self._connection().execute(sql.METADATA_SQL, (json_list(ids, "document id"),))
        return {doc_id: json.loads(metadata) for doc_id, metadata in rows}

    def document_frequencies_any(self, terms: Iterable[str]) -> dict[str, int]:
        """Number of units matching each term in any field (used for "matches nothing")."""
        unique = list(dict.fromkeys(terms))
        counts = self._compound(sql.MATCH_COUNT_SQL, [(t, quote_term(t)) for t in unique])
        result = {term: 0 for term in unique}
        result.update({term: int(count) for term, count in counts})
        return result

    def title_aliases(self, folded: Collection[str]) -> dict[str, str]:
        """For each accent-folded title key that is one title's alias, that title's phrase."""
        aliases = self._title_catalog().aliases
        return {key: aliases[key] for key in folded if key in aliases}

    def title_phrases(self, phrases: Collection[str]) -> set[str]:
        """The given phrases that are multiword corpus titles."""
        return set(phrases) & self._title_catalog().phrases

    def word_document_frequencies(self, words: Collection[str]) -> tuple[int, dict[str, int]]:
        """The number of documents and each word's document frequency over their texts
        (counted once per generation, on first use: only the "paper" profile asks)."""
        generation = self._generation()
        cached = self._word_df
        if cached is None or cached[0] != generation:
            with self.snapshot():
                rows = self._connection().execute(sql.ALL_DOCUMENT_TEXTS_SQL).fetchall()
            cached = (generation, len(rows), word_document_frequencies(row[0] for row in rows))
            self._word_df = cached
        return cached[1], {word: cached[2].get(word, 0) for word in words}

    def _title_catalog(self) -> TitleCatalog:
        """Accent aliases and title phrases of the corpus, rebuilt only after a write."""
        generation = self._generation()
        catalog = self._catalog
        if catalog is None or catalog[0] != generation:
            titles = [row[0] for row in self._connection().execute(sql.TITLES_SQL)]
            catalog = (generation, _build_catalog(titles, self.settings.analyzer_profile))
            self._catalog = catalog
        return catalog[1]

    def stats(self) -> dict[str, int]:
        """Sizes for reports: documents, units, and the file's bytes (with its WAL)."""
        wal = Path(str(self.path) + "-wal")
        size = self.path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)
        return {"documents": self.document_count(), "units": self.unit_count(), "bytes": size}


def _build_catalog(titles: Sequence[str], profile: Profile) -> TitleCatalog:
    """Aliases from unique accent-folded titles, and the set of multiword title phrases."""
    folded: dict[str, list[str]] = {}
    phrases: set[str] = set()
    for title in titles:
        tokens = tokenize(title, profile=profile)
        phrase = " ".join(tokens)
        if len(tokens) >= 2:
            phrases.add(phrase)
        alias = alias_key(title, profile)
        if alias and alias != phrase:
            folded.setdefault(alias, []).append(phrase)
    aliases = {alias: options[0] for alias, options in folded.items() if len(set(options)) == 1}
    return TitleCatalog(aliases, frozenset(phrases))
