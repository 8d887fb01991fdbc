"""The "paper" profile's rules on the strings where it disagreed with the authors' port
(issue 21, benchmarks/quality/port_agreement.py). Expected values are what the port (zleap-sag2
0.2.0.post1) gives for the same strings; the port itself is not needed here."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from sag2_retrievers import Document, IndexSettings, SAG2Engine, SQLiteIndex
from sag2_retrievers.analysis import tokenize
from sag2_retrievers.analysis.paper.analyzer import (
    alias_key,
    match_phrase,
    paper_words,
    sentence_units,
    sentence_words,
)
from sag2_retrievers.analysis.paper.diversity import paper_dpp_order, word_vectors
from sag2_retrievers.analysis.paper.terms import PhraseTermIndex
from sag2_retrievers.expansion import Seed, select_terms
from sag2_retrievers.judges.fakes import ScriptedJudge


def paper_index(path: Path, documents: list[Document]) -> SQLiteIndex:
    """A new "paper" index holding the documents."""
    index = SQLiteIndex(path, IndexSettings(analyzer_profile="paper"))
    index.add_documents(documents, parallel=False)
    return index


# -- the token pass: words before unicode61, and the stream the index holds


@pytest.mark.parametrize(
    ("text", "words", "stream"),
    [
        # Joined runs stay one word, after their lettered parts of two or more characters.
        (
            "peer-reviewed journal",
            ["peer", "reviewed", "peer-reviewed", "journal"],
            ["peer", "reviewed", "peer", "reviewed", "journal"],
        ),
        ("WNOK 104.7 FM", ["wnok", "104.7", "fm"], ["wnok", "104", "7", "fm"]),
        ("pre-1823 ancestor", ["pre", "pre-1823", "ancestor"], ["pre", "pre", "1823", "ancestor"]),
        ("the 1979-80 season", ["1979-80", "season"], ["1979", "80", "season"]),
        ("x-ray", ["ray", "x-ray"], ["ray", "x", "ray"]),
        ("abc_def", ["abc", "def", "abc_def"], ["abc", "def", "abc", "def"]),
        ("a 50% share", ["50%", "share"], ["50", "share"]),
        # jieba's two dictionary words of ASCII, and accented letters one at a time.
        ("c++ and c# code", ["c++", "c#", "code"], ["c", "c", "code"]),
        ("Beyoncé", ["beyonc", "é"], ["beyonc", "e"]),
        ("Aschenbrödel", ["aschenbr", "ö", "del"], ["aschenbr", "o", "del"]),
        (
            "iPhone手机很好用",
            ["iphone", "手机", "很", "好", "用"],
            ["iphone", "手机", "很", "好", "用"],
        ),
    ],
)
def test_words_and_stream_are_the_ports(text: str, words: list[str], stream: list[str]) -> None:
    assert paper_words(text) == words
    assert tokenize(text, profile="paper") == stream


@pytest.mark.parametrize(
    ("word", "phrase"),
    [
        ("peer-reviewed", "peer reviewed"),
        ("u.s", "u s"),
        ("é", "e"),
        ("++", ""),
        ("jos é", "jos e"),
    ],
)
def test_a_word_matches_as_the_phrase_of_its_indexed_terms(word: str, phrase: str) -> None:
    assert match_phrase(word) == phrase


def test_question_terms_are_its_words_as_phrases(tmp_path: Path) -> None:
    documents = [Document("a", "The all-star game of the U.S. league.", "A")]
    with paper_index(tmp_path / "x.db", documents) as index:
        question = "When is the all-star game in the U.S.?"
        assert index.query_terms(question) == ["all", "star", "all star", "game", "u s"]
        assert [hit.doc_id for hit in index.search(question, 5)] == ["a"]


# -- names and the question-connection test


def test_a_name_ends_where_a_lowercase_part_begins_and_its_rest_stays_a_word() -> None:
    body = "Kim Jong-chul, also Kim Jong Chol, met Ko Yong-hui"
    assert sentence_units(body) == (
        ("chul", "also", "met", "hui", "kim jong", "kim jong chol", "ko yong"),
    )
    # The connection test sees the sentence's own words, "jong-chul" among them.
    assert "jong-chul" in sentence_words(body)[0]


def test_names_take_any_script_capitals() -> None:
    units = sentence_units("Leader Łukasz Ćwik and Ólafur Arnalds")
    assert units[0][-2:] == ("leader ł ukasz ć wik", "ó lafur arnalds")


def test_connection_counts_a_question_word_that_crosses_a_name(tmp_path: Path) -> None:
    documents = [
        Document("s", "Kim Jong-chul met Ri Sol-ju in Pyongyang.", "Seed"),
        Document("o", "Pyongyang is the capital.", "Other"),
    ]
    question_words = frozenset(paper_words("Who did Jong-chul meet?"))
    with paper_index(tmp_path / "x.db", documents) as index:
        unit_id = next(hit.unit_id for hit in index.search("Kim", 5) if hit.doc_id == "s")
        body = index.units([unit_id])[unit_id].body
        units = sentence_units(body)
        with_words = Seed(unit_id, 1.0, units, [frozenset(w) for w in sentence_words(body)])
        without = Seed(unit_id, 1.0, units)
        term_index = PhraseTermIndex(index)
        connected = select_terms(term_index, [with_words], question_words, 20)
        plain = select_terms(term_index, [without], question_words, 20)
    priority = {t.term: t.priority for t in connected}
    assert priority["pyongyang"] > {t.term: t.priority for t in plain}["pyongyang"]


# -- expansion terms keep their words and match as phrases


def test_a_hyphenated_word_is_an_expansion_term_matched_as_its_phrase(tmp_path: Path) -> None:
    documents = [
        Document("s", "It is a peer-reviewed journal.", "Seed"),
        Document("t", "A peer reviewed paper appeared.", "Target"),
        Document("u", "An unrelated text.", "Other"),
    ]
    with paper_index(tmp_path / "x.db", documents) as index:
        term_index = PhraseTermIndex(index)
        assert term_index.document_frequencies(["peer-reviewed", "++"]) == {
            "peer-reviewed": 2,
            "++": 0,
        }
        found = term_index.expand(["peer-reviewed"], ["peer-reviewed"], set(), 5)
        units = index.units(found["peer-reviewed"])
        assert sorted(unit.doc_id for unit in units.values()) == ["s", "t"]


# -- the accent-alias repair


def test_alias_keys_fold_latin_accents_only() -> None:
    assert alias_key("Aschenbrödel") == "aschenbrodel"
    assert alias_key("Łódź") == "łodz"  # ł has no decomposition: it stays
    assert alias_key("Jean-Luc Picard") == ""  # nothing to fold: no alias


def test_a_single_unmatched_word_is_repaired_into_its_titles_words(tmp_path: Path) -> None:
    documents = [Document("a", "Aschenbrödel is an opera by Johann Strauss.", "Aschenbrödel")]
    with paper_index(tmp_path / "x.db", documents) as index:
        question = "Who composed Aschenbrodel?"
        assert index.query_terms(question) == ["composed", "aschenbr", "o", "del"]
        assert [hit.doc_id for hit in index.search(question, 5)] == ["a"]


def test_the_longest_alias_at_a_position_wins(tmp_path: Path) -> None:
    documents = [
        Document("j", "José is a name.", "José"),
        Document("jc", "José Cancela played football.", "José Cancela"),
    ]
    with paper_index(tmp_path / "x.db", documents) as index:
        assert index.query_terms("Jose Cancela club") == ["jos", "e", "cancela", "club"]


# -- the diversity step


def test_diversity_idf_counts_the_corpus_documents(tmp_path: Path) -> None:
    # B shares "river" with A, C shares "mill". Among the three both words are equally
    # common (the old local idf: B, more likely, second); across the corpus "mill" is
    # everywhere, so only B looks like A and C moves up.
    judged = [
        Document("a", "river mill", "A"),
        Document("b", "river bakery", "B"),
        Document("c", "harbour mill", "C"),
    ]
    filler = [Document(f"f{i}", f"mill filler{i}", f"F{i}") for i in range(40)]
    scores = {doc.text: score for doc, score in zip(judged, (0.9, 0.8, 0.7), strict=True)}
    with paper_index(tmp_path / "x.db", [*judged, *filler]) as index:
        engine = SAG2Engine(index, ScriptedJudge(scores))
        result = engine.retrieve("river bakery harbour", 3)
        engine.close()
        documents, df = index.word_document_frequencies(["mill", "river", "absent"])
    assert (documents, df) == (43, {"mill": 42, "river": 2, "absent": 0})
    assert [hit.doc_id for hit in result.hits] == ["a", "c", "b"]


def test_word_vectors_weigh_by_corpus_idf() -> None:
    (vector,) = word_vectors(["Mill mill river"], {"mill": 9, "river": 1}, 9)
    mill = (1 + math.log(2)) * (math.log(10 / 10) + 1)
    river = math.log(10 / 2) + 1
    norm = math.hypot(mill, river)
    assert vector == pytest.approx({"mill": mill / norm, "river": river / norm})


def test_dpp_picks_the_largest_residual_and_stops_at_the_ports_tolerance() -> None:
    same = {"w": 1.0}
    # Two copies of one vector: after the first, the copy's residual is ~0 and the
    # different item wins, though its quality is lower.
    assert paper_dpp_order([0.9, 0.8, 0.5], [same, same, {"v": 1.0}]) == [0, 2, 1]
    assert paper_dpp_order([0.0, 0.0], [same, same]) == [0, 1]
    assert paper_dpp_order([], []) == []


@pytest.mark.parametrize(
    "text",
    [
        "Kamen-Rybolov accounts for 44.2% of the district's total population.",
        "The U.S.-led x-ray of 1979-80 (a_b) cost $5, 3.5 m, e.g. co-op & AT&T.",
        "the 2-d .net node.js --flag -x- ... 100%%",
    ],
)
def test_the_ascii_fast_path_gives_the_general_paths_words(text: str) -> None:
    # A non-ASCII word at the end sends the same text down the general (jieba-block) path.
    assert paper_words(text) == paper_words(f"{text} é")[:-1]
