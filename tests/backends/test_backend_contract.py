"""The LexicalBackend contract, run against every backend (add one with a line in BACKENDS)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from sag2_retrievers import Document, IndexSettings, LexicalBackend, SQLiteIndex
from sag2_retrievers.analysis import PROFILES, Profile, analyze_body, tokenize
from sag2_retrievers.backends.ingest import start_preparing
from sag2_retrievers.query import query_terms

BackendFactory = Callable[[pytest.FixtureRequest, Path, IndexSettings | None], LexicalBackend]


def _postgres(
    request: pytest.FixtureRequest, folder: Path, settings: IndexSettings | None
) -> LexicalBackend:
    """A PostgresIndex in a fresh schema of the session's real server."""
    from sag2_retrievers.backends.postgres import PostgresIndex

    server = request.getfixturevalue("postgres_server")
    schema = request.getfixturevalue("postgres_schema")
    return PostgresIndex(server.dsn, settings, schema=schema)


BACKENDS: dict[str, BackendFactory] = {
    "sqlite": lambda request, folder, settings: SQLiteIndex(folder / "contract.db", settings),
    "postgres": _postgres,
}
ALL = 1_000

# Twins (same title and text) tie on every score; "kiln" is in a title only.
CORPUS = (
    Document("d0", "The river mill ground wheat and barley.", "Mill", {"region": "north"}),
    Document("d1", "Wheat fields line the river near the old mill.", "Fields", {"region": "south"}),
    Document("d2", "A potter fired bowls by the river.", "Kiln Works", {"region": "north"}),
    Document("d3", "Barley and wheat feed the village bakery.", "Bakery", {"region": "south"}),
    Document("d4", "Barley and wheat feed the village bakery.", "Bakery", {"region": "north"}),
    Document("d5", "Lighthouse keepers watched the harbour.", "Harbour Lighthouse", {"n": 1}),
    Document("d6", "Sailors admired the Łódź textile mills.", "Łódź", {"region": "east"}),
)


def load(backend: LexicalBackend, documents: Sequence[Document]) -> int:
    """Write documents through the protocol: analysed here, upserted by the backend."""
    return backend.upsert_analysed(
        documents, start_preparing(documents, backend.settings, backend.unit_statistics, None)()
    )


@pytest.fixture(params=sorted(BACKENDS))
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LexicalBackend]:
    instance = BACKENDS[request.param](request, tmp_path, None)
    load(instance, CORPUS)
    yield instance
    close = getattr(instance, "close", None)
    if close is not None:
        close()


def unit_of(backend: LexicalBackend) -> dict[str, int]:
    """Document id -> unit id (each corpus document is one unit)."""
    doc_of = backend.units(range(1, 100))
    return {unit.doc_id: unit_id for unit_id, unit in doc_of.items()}


def holding(term: str) -> set[str]:
    """The corpus documents holding a token in their title or text (the expected match set)."""
    return {doc.id for doc in CORPUS if term in tokenize(doc.title + " " + doc.text)}


def test_each_backend_is_a_lexical_backend(backend: LexicalBackend) -> None:
    assert isinstance(backend, LexicalBackend)


def test_unit_count_counts_written_units(backend: LexicalBackend) -> None:
    assert backend.unit_count() == len(CORPUS)


def test_search_matches_every_unit_holding_any_term(backend: LexicalBackend) -> None:
    ids = unit_of(backend)
    ranked = backend.rank_expression(["barley", "kiln"], ALL)
    assert {u for u, _ in ranked} == {ids[d] for d in holding("barley") | holding("kiln")}


def test_search_ranks_best_first_and_breaks_ties_by_unit_id(backend: LexicalBackend) -> None:
    ranked = backend.rank_expression(["bakery", "wheat"], ALL)
    keys = [(-score, unit_id) for unit_id, score in ranked]
    assert keys == sorted(keys)
    twins = [unit_of(backend)[d] for d in ("d3", "d4")]
    assert [u for u, _ in ranked[:2]] == sorted(twins)
    assert ranked[0][1] == ranked[1][1] > 0


def test_search_returns_the_top_limit_of_the_full_ranking(backend: LexicalBackend) -> None:
    full = backend.rank_expression(["wheat", "river"], ALL)
    assert backend.rank_expression(["wheat", "river"], 2) == full[:2]
    assert backend.rank_expression(["wheat", "river"], 0) == []
    assert backend.rank_expression([], ALL) == []


def test_search_applies_filters_inside_the_query(backend: LexicalBackend) -> None:
    ids = unit_of(backend)
    south = [u for u, _ in backend.rank_expression(["wheat"], ALL) if u in (ids["d1"], ids["d3"])]
    assert [u for u, _ in backend.rank_expression(["wheat"], 1, filters={"region": "south"})] == (
        south[:1]
    )
    either = backend.rank_expression(["wheat"], ALL, filters={"region": ["north", "east"]})
    assert {u for u, _ in either} == {ids["d0"], ids["d4"]}


def test_expand_lists_unseen_units_holding_each_term(backend: LexicalBackend) -> None:
    ids = unit_of(backend)
    excluded = {ids["d0"]}
    ranked = backend.expand(["barley", "river"], ["wheat", "barley", "river"], excluded, ALL)
    assert list(ranked) == ["barley", "river"]
    assert set(ranked["barley"]) == {ids[d] for d in holding("barley")} - excluded
    assert set(ranked["river"]) == {ids[d] for d in holding("river")} - excluded


def test_expand_ranks_by_the_whole_scoring_expression(backend: LexicalBackend) -> None:
    scoring = ["wheat", "barley", "river", "mill"]
    whole = backend.rank_expression(scoring, ALL)
    members = set(backend.expand(["barley"], ["barley"], set(), ALL)["barley"])
    ranked = backend.expand(["barley"], scoring, set(), ALL)["barley"]
    assert ranked == [unit_id for unit_id, _ in whole if unit_id in members]


def test_expand_breaks_ties_by_unit_id_and_stops_at_the_limit(backend: LexicalBackend) -> None:
    twins = sorted(unit_of(backend)[d] for d in ("d3", "d4"))
    assert backend.expand(["bakery"], ["bakery"], set(), 1)["bakery"] == twins[:1]
    assert backend.expand(["bakery"], ["bakery"], set(), ALL)["bakery"] == twins


def test_expand_counts_a_repeated_scoring_term_each_time(backend: LexicalBackend) -> None:
    ids = unit_of(backend)
    # Of the river units, d2 holds the rare "potter" and d1 the less rare "old": counted
    # twice, "old" puts d1 ahead.
    once = backend.expand(["river"], ["river", "old", "potter"], set(), ALL)["river"]
    twice = backend.expand(["river"], ["river", "old", "old", "potter"], set(), ALL)["river"]
    assert once[:2] == [ids["d2"], ids["d1"]]
    assert twice[:1] == [ids["d1"]] and set(twice) == set(once)


def test_expand_applies_filters_inside_the_query(backend: LexicalBackend) -> None:
    ids = unit_of(backend)
    ranked = backend.expand(["wheat"], ["wheat"], {ids["d0"]}, ALL, filters={"region": "north"})
    assert ranked == {"wheat": [ids["d4"]]}


def test_expand_with_nothing_to_find_gives_empty_lists(backend: LexicalBackend) -> None:
    assert backend.expand(["xylophone"], ["xylophone"], set(), ALL) == {"xylophone": []}
    everything = set(unit_of(backend).values())
    assert backend.expand(["wheat"], ["wheat"], everything, ALL) == {"wheat": []}


def test_document_frequencies_count_bodies_for_tokens_and_phrases(
    backend: LexicalBackend,
) -> None:
    df = backend.document_frequencies(["wheat", "kiln", "village bakery", "nothing"])
    assert df == {"wheat": 4, "kiln": 0, "village bakery": 2, "nothing": 0}


def test_any_field_counts_include_titles(backend: LexicalBackend) -> None:
    counts = backend.document_frequencies_any(["kiln", "harbour lighthouse", "nothing"])
    assert counts == {"kiln": 1, "harbour lighthouse": 1, "nothing": 0}


def test_units_expansion_units_and_metadata_by_id(backend: LexicalBackend) -> None:
    ids = unit_of(backend)
    units = backend.units([ids["d2"], 999])
    assert list(units) == [ids["d2"]]
    assert units[ids["d2"]].body == CORPUS[2].text and units[ids["d2"]].title == "Kiln Works"
    sentences = backend.expansion_units([ids["d2"]])[ids["d2"]]
    assert "potter" in {term for sentence in sentences for term in sentence}
    assert backend.metadata(["d1", "missing"]) == {"d1": {"region": "south"}}


def test_units_keep_their_markdown_heading_path(backend: LexicalBackend) -> None:
    text = "# Pottery\n\n## Glazes\n\nAsh glaze on stoneware bowls from the kiln."
    load(backend, [Document("md", text, "Kiln notes")])
    unit_id = backend.expand(["stoneware"], ["stoneware"], set(), 5)["stoneware"][0]
    assert backend.units([unit_id])[unit_id].heading == "Pottery > Glazes"


# Several sentences with names, cut into several units (chunk_chars 60).
NAMED_TEXT = (
    "Marie Curie moved to Paris in 1891. She met Pierre Curie at the Sorbonne.\n"
    "Their daughter Irène Joliot-Curie won the Nobel Prize. Kim Jong-un never saw "
    "the U.S. Army museum, nor did J. R. R. Tolkien."
)


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("name", sorted(BACKENDS))
def test_expansion_units_are_the_ingest_analysis_of_each_unit_text(
    request: pytest.FixtureRequest, tmp_path: Path, name: str, profile: Profile
) -> None:
    """Derived at query time, they equal `analyze_body` of the slice ingest analysed."""
    settings = IndexSettings(chunk_chars=60, analyzer_profile=profile)
    backend = BACKENDS[name](request, tmp_path, settings)
    try:
        load(backend, [Document("named", NAMED_TEXT, "Curie")])
        units = backend.units(range(1, 100))
        expected = {
            unit_id: [
                list(sentence)
                for sentence in analyze_body(
                    NAMED_TEXT[unit.char_start : unit.char_end], profile
                ).sentences
            ]
            for unit_id, unit in units.items()
        }
        derived = backend.expansion_units([*units, 999])
    finally:
        getattr(backend, "close", lambda: None)()
    assert len(units) >= 3 and derived == expected
    terms = {term for sentences in derived.values() for sentence in sentences for term in sentence}
    assert {"marie curie", "nobel prize"} <= terms


def test_title_lookups_are_answered_for_the_keys_asked(backend: LexicalBackend) -> None:
    assert backend.title_aliases({"lodz", "mill"}) == {"lodz": "łodz"}
    assert backend.title_phrases({"harbour lighthouse", "river mill"}) == {"harbour lighthouse"}
    assert query_terms(backend, "Textile mills of Lodz?", 80) == ["textile", "mills", "łodz"]


def test_word_document_frequencies_count_documents_and_follow_writes(
    backend: LexicalBackend,
) -> None:
    # Casefolded letter-digit words of the texts, stopwords included ("the").
    assert backend.word_document_frequencies({"wheat", "the", "łódź", "kiln"}) == (
        len(CORPUS),
        {"wheat": 4, "the": 7, "łódź": 1, "kiln": 0},
    )
    load(backend, [Document("d2", "Kiln and wheat.", "Kiln Works")])
    assert backend.word_document_frequencies({"wheat", "kiln"}) == (
        len(CORPUS),
        {"wheat": 5, "kiln": 1},
    )


@pytest.mark.parametrize("name", sorted(BACKENDS))
def test_paper_title_aliases_are_the_ports(
    request: pytest.FixtureRequest, tmp_path: Path, name: str
) -> None:
    settings = IndexSettings(analyzer_profile="paper")
    instance = BACKENDS[name](request, tmp_path, settings)
    try:
        load(instance, CORPUS)
        # "Łódź" folds to "łodz" (ł has no decomposition); an unaccented title is no alias.
        assert instance.title_aliases({"łodz", "lodz", "mill"}) == {"łodz": "ł o d z"}
        assert query_terms(instance, "Textile mills of łodz?", 80) == [
            "textile",
            "mills",
            "ł",
            "o",
            "d",
            "z",
        ]
    finally:
        getattr(instance, "close", lambda: None)()


def test_upsert_replaces_and_delete_removes_everywhere(backend: LexicalBackend) -> None:
    load(backend, [Document("d2", "A potter fired jugs.", "Kiln Works")])
    assert backend.document_frequencies(["bowls", "jugs"]) == {"bowls": 0, "jugs": 1}
    assert backend.delete(["d2", "missing"]) == 1
    assert backend.unit_count() == len(CORPUS) - 1
    assert backend.rank_expression(["jugs", "potter"], ALL) == []
    assert backend.document_frequencies(["jugs"]) == {"jugs": 0}


def test_a_snapshot_keeps_one_state_while_another_thread_writes(
    backend: LexicalBackend,
) -> None:
    def rewrite() -> None:
        backend.delete(["d0", "d1"])
        load(backend, [Document("d9", "Wheat and more wheat.", "Granary")])

    with backend.snapshot():
        before = backend.rank_expression(["wheat"], ALL)
        count = backend.unit_count()
        writer = threading.Thread(target=rewrite)
        writer.start()
        writer.join()
        assert backend.rank_expression(["wheat"], ALL) == before
        assert backend.unit_count() == count
        assert backend.expand(["wheat"], ["wheat"], set(), ALL)["wheat"] == [u for u, _ in before]
    after = backend.rank_expression(["wheat"], ALL)
    assert after != before and backend.unit_count() == count - 1


def test_score_units_equals_the_ranking_scores_of_those_units(backend: LexicalBackend) -> None:
    """Scoring chosen units gives their scores in the full ranking; non-matching are absent."""
    terms = ["wheat", "river", "kiln", "river mill", "wheat"]
    full = dict(backend.rank_expression(terms, ALL))
    units = unit_of(backend)
    chosen = {units["d0"], units["d2"], units["d5"]}
    scored = backend.score_units(terms, chosen)
    assert set(scored) == chosen & set(full)
    for unit_id, score in scored.items():
        assert score == pytest.approx(full[unit_id], abs=1e-12)
    assert backend.score_units(["wheat"], set()) == {}


def test_score_units_works_from_any_thread(backend: LexicalBackend) -> None:
    """Each thread has its own connection; scoring from a second thread needs nothing the
    first thread's connection created."""
    units = unit_of(backend)
    first = backend.score_units(["wheat"], {units["d0"]})
    box: list[dict[int, float]] = []
    worker = threading.Thread(
        target=lambda: box.append(backend.score_units(["wheat"], {units["d0"]}))
    )
    worker.start()
    worker.join()
    assert box == [first] and first
