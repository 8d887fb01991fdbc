"""The two analyzer profiles: "sag2" (the project's rules) and "paper" (the authors' port's
rules, issues 13 and 21), each pinned on the issues' examples."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import jieba
import pytest

from sag2_retrievers import (
    Document,
    IndexSettings,
    IndexSettingsMismatchError,
    InvalidInputError,
    SAG2Engine,
    SQLiteIndex,
)
from sag2_retrievers.analysis import (
    STOPWORDS,
    Profile,
    analyze_body,
    final_tokens,
    name_runs,
    tokenize,
)
from sag2_retrievers.analysis.paper import analyzer as paper_analyzer
from sag2_retrievers.cli import main
from sag2_retrievers.judges.fakes import ScriptedJudge


def open_index(path: Path, profile: Profile, documents: list[Document]) -> SQLiteIndex:
    """A new index with the given profile holding the documents."""
    index = SQLiteIndex(path, IndexSettings(analyzer_profile=profile))
    index.add_documents(documents, parallel=False)
    return index


# -- the setting


def test_the_default_profile_is_sag2_and_unknown_profiles_are_refused() -> None:
    assert IndexSettings().analyzer_profile == "sag2"
    with pytest.raises(InvalidInputError, match="analyzer_profile must be one of"):
        IndexSettings(analyzer_profile="bm25")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("profile", "tokenizer"),
    [("sag2", "unicode61 remove_diacritics 2 tokenchars '-.'"), ("paper", "unicode61")],
)
def test_the_profile_and_its_fts5_tokenizer_are_recorded(
    tmp_path: Path, profile: Profile, tokenizer: str
) -> None:
    with open_index(tmp_path / "x.db", profile, []):
        pass
    connection = sqlite3.connect(tmp_path / "x.db")
    meta = dict(connection.execute("SELECT key, value FROM meta"))
    (create,) = connection.execute("SELECT sql FROM sqlite_master WHERE name = 'units_fts'")
    assert meta["analyzer_profile"] == profile and meta["fts_tokenizer"] == tokenizer
    assert f'tokenize = "{tokenizer}"' in create[0]


def test_an_index_refuses_the_other_profile_on_reopen(tmp_path: Path) -> None:
    with open_index(tmp_path / "x.db", "paper", [Document("d", "text")]):
        pass
    with pytest.raises(IndexSettingsMismatchError, match="analyzer_profile"):
        SQLiteIndex(tmp_path / "x.db", IndexSettings())
    with SQLiteIndex(tmp_path / "x.db") as reopened:  # no request: the file's own settings
        assert reopened.settings.analyzer_profile == "paper"


def test_a_file_from_before_the_setting_reads_as_sag2(tmp_path: Path) -> None:
    with open_index(tmp_path / "x.db", "sag2", [Document("d", "The co-creator spoke.")]):
        pass
    with sqlite3.connect(tmp_path / "x.db") as connection:
        connection.execute("DELETE FROM meta WHERE key = 'analyzer_profile'")
    with SQLiteIndex(tmp_path / "x.db", IndexSettings()) as index:
        assert index.settings.analyzer_profile == "sag2"
        assert index.search("co-creator", 1)[0].doc_id == "d"
    with pytest.raises(IndexSettingsMismatchError, match="analyzer_profile"):
        SQLiteIndex(tmp_path / "x.db", IndexSettings(analyzer_profile="paper"))


def test_a_corrupt_profile_row_is_a_settings_mismatch(tmp_path: Path) -> None:
    with open_index(tmp_path / "x.db", "sag2", []):
        pass
    with sqlite3.connect(tmp_path / "x.db") as connection:
        connection.execute("UPDATE meta SET value = 'nope' WHERE key = 'analyzer_profile'")
    with pytest.raises(IndexSettingsMismatchError, match="analyzer_profile='nope'"):
        SQLiteIndex(tmp_path / "x.db")


# -- rule A: token streams


@pytest.mark.parametrize(
    ("text", "sag2", "paper"),
    [
        ("co-creator", ["co-creator", "co", "creator"], ["co", "creator", "co", "creator"]),
        ("the u.s. army", ["u.s", "army"], ["u", "s", "army"]),
        ("Beyoncé", ["beyonce"], ["beyonc", "e"]),
        # ứ carries two marks: plain unicode61 (remove_diacritics 1) keeps it.
        ("Châu Đức", ["chau", "đuc"], ["ch", "a", "u", "đ", "ứ", "c"]),
        ("수도이다", ["수도이다"], ["수", "도", "이", "다"]),
        ("北京是中国的首都", ["北京", "中国", "首都"], ["北京", "中国", "首都"]),
    ],
)
def test_token_streams_of_both_profiles(text: str, sag2: list[str], paper: list[str]) -> None:
    assert tokenize(text, profile="sag2") == sag2
    assert tokenize(text, profile="paper") == paper


@pytest.mark.parametrize(
    "text",
    [
        "Beyoncé sang in Châu Đức, Москва and Αθήνα",
        "서울은 한국의 수도이다; 東京タワー",
        "tiếng Việt: Hà Nội, Huế, Đà Lạt; naïve résumé ǖ ł",
    ],
)
def test_paper_tokens_are_jiebas_tokens_through_plain_unicode61(text: str) -> None:
    normalized = text.lower()
    words = [w for w in jieba.cut(normalized, HMM=True) if w.strip() and w not in STOPWORDS]
    expected = final_tokens([w for w in words if any(ch.isalnum() for ch in w)], "paper")
    assert tokenize(text, profile="paper") == expected


@pytest.mark.parametrize(("profile", "tf"), [("sag2", 1), ("paper", 2)])
def test_fts5_indexes_a_hyphenated_word_as_the_profile_says(
    tmp_path: Path, profile: Profile, tf: int
) -> None:
    with open_index(tmp_path / "x.db", profile, [Document("d", "The co-creator spoke.")]):
        pass
    connection = sqlite3.connect(tmp_path / "x.db")
    connection.execute("CREATE VIRTUAL TABLE temp.v USING fts5vocab(main, units_fts, row)")
    counts = dict(connection.execute("SELECT term, cnt FROM temp.v"))
    assert counts["creator"] == tf and counts["co"] == tf
    assert ("co-creator" in counts) is (profile == "sag2")


def test_paper_tokenises_a_body_in_one_pass() -> None:
    body = "Arvid Lind wrote it.\nHe lived in Uppsala."
    paper, sag2 = analyze_body(body, "paper"), analyze_body(body, "sag2")
    assert paper.tokens == tuple(tokenize(body, profile="paper"))
    assert paper.tokens == sag2.tokens  # no Han text: the same stream either way


# -- rule B: name phrases


@pytest.mark.parametrize(
    ("sentence", "sag2", "paper"),
    [
        ("He loved Elmo's World a lot", ["Elmo's World"], []),
        # "The B" gives one token ("the" is a stopword), so no phrase term comes of it.
        ("The B-52 Stratofortress flew", ["The B-52 Stratofortress"], ["The B"]),
        ("Kim Jong-un spoke", ["Kim Jong-un"], ["Kim Jong"]),
        ("A Nobel Prize-winning poet", ["A Nobel Prize-winning"], ["A Nobel Prize"]),
        ("Films of Jean-Luc Godard", ["Jean-Luc Godard"], ["Jean-Luc Godard"]),
        # The port's pattern: a capital followed by a dot is an initial, a capital alone a word.
        ("The U.S. Army marched", ["The U.S. Army"], ["The U", "S. Army"]),
    ],
)
def test_name_phrases_of_both_profiles(sentence: str, sag2: list[str], paper: list[str]) -> None:
    assert [sentence[a:b] for a, b in name_runs(sentence)] == sag2
    assert [match.group() for match in paper_analyzer._NAMES.finditer(sentence)] == paper


def test_name_phrases_become_expansion_units_per_profile() -> None:
    body = "Kim Jong-un visited the Nobel Prize museum."
    assert analyze_body(body, "sag2").sentences[0][:2] == (
        "kim jong-un jong un",
        "nobel prize",
    )
    # The port's units: the words outside the names first, then each name.
    assert analyze_body(body, "paper").sentences[0] == (
        "un",
        "visited",
        "museum",
        "kim jong",
        "nobel prize",
    )


# -- rule C: diversity vectors

# A shares only stopwords with C and only content words with B; the judge ranks A, B, C.
DIVERSITY_DOCS = [
    Document("a", "The river of the mill, by the river of the mill.", "A"),
    Document("b", "River mill bakery.", "B"),
    Document("c", "The harbour of the bay, by the harbour of the bay.", "C"),
]


@pytest.mark.parametrize(("profile", "order"), [("sag2", "acb"), ("paper", "abc")])
def test_diversity_order_follows_the_profiles_vectors(
    tmp_path: Path, profile: Profile, order: str
) -> None:
    scores = {doc.text: score for doc, score in zip(DIVERSITY_DOCS, (0.9, 0.8, 0.7), strict=True)}
    with open_index(tmp_path / "x.db", profile, DIVERSITY_DOCS) as index:
        engine = SAG2Engine(index, ScriptedJudge(scores))
        result = engine.retrieve("river harbour", 3)
        engine.close()
    by_score = sorted(result.units, key=lambda unit: -unit.score)
    assert [unit.doc_id for unit in by_score] == list("abc")  # the judge's order, before DPP
    assert "".join(hit.doc_id for hit in result.hits) == order


# -- rule D: accent-alias repair

CANCELA = [
    Document("jc", "José Cancela is a Uruguayan footballer born in Montevideo.", "José Cancela"),
    Document("mv", "Montevideo is the capital of Uruguay.", "Montevideo"),
    Document("lz", "Łódź is a city in Poland with textile mills.", "Łódź"),
]


def test_paper_repairs_an_unmatched_name_span_into_the_titles_tokens(tmp_path: Path) -> None:
    with open_index(tmp_path / "x.db", "paper", CANCELA) as index:
        terms = index.query_terms("Where was Jose Cancela born?")
        assert terms == ["jos", "e", "cancela", "born"]
        assert index.search("Where was Jose Cancela born?", 1)[0].doc_id == "jc"
        # A single word is no name span: the paper repairs spans only.
        assert index.query_terms("Mills in Lodz") == ["mills", "lodz"]


def test_sag2_repairs_single_tokens_and_leaves_a_name_span(tmp_path: Path) -> None:
    with open_index(tmp_path / "x.db", "sag2", CANCELA) as index:
        assert index.query_terms("Where was Jose Cancela born?") == ["jose", "cancela", "born"]
        assert index.query_terms("Mills in Lodz") == ["mills", "łodz"]


def test_paper_keeps_a_name_span_that_matches(tmp_path: Path) -> None:
    documents = [*CANCELA, Document("j2", "Jose Cancela is also a painter.", "Painters")]
    with open_index(tmp_path / "x.db", "paper", documents) as index:
        assert index.query_terms("Where was Jose Cancela born?") == ["jose", "cancela", "born"]


# -- where the profiles differ outside Latin script


def test_a_korean_particle_defeats_sag2_and_paper_matches_by_syllables(tmp_path: Path) -> None:
    documents = [
        Document("seoul", "서울은 한국의 수도이다.", "서울"),
        Document("busan", "부산은 항구 도시이다.", "부산"),
    ]
    # "paper" finds the capital first, and also the port city through its syllable 도.
    for profile, found in (("sag2", []), ("paper", ["seoul", "busan"])):
        path = tmp_path / f"{profile}.db"
        with open_index(path, profile, documents) as index:  # type: ignore[arg-type]
            assert [hit.doc_id for hit in index.search("수도", 5)] == found


def test_paper_matches_vietnamese_by_letters_where_sag2_matches_words(tmp_path: Path) -> None:
    documents = [
        Document("chau-duc", "Châu Đức là một huyện của tỉnh Bà Rịa.", "Châu Đức"),
        Document("hue", "Huế là cố đô của Việt Nam, bên sông Hương.", "Huế"),
    ]
    for profile, found in (("sag2", ["chau-duc"]), ("paper", ["chau-duc", "hue"])):
        path = tmp_path / f"{profile}.db"
        with open_index(path, profile, documents) as index:  # type: ignore[arg-type]
            assert [hit.doc_id for hit in index.search("Châu Đức", 5)] == found


# -- selection from the command line


def test_sag2_index_profile_builds_and_then_guards_the_profile(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = tmp_path / "corpus.json"
    corpus.write_text(json.dumps([{"title": "Châu Đức", "text": "Châu Đức là một huyện."}]))
    db = str(tmp_path / "x.db")
    assert main(["index", str(corpus), "--db", db, "--profile", "paper", "--quiet"]) == 0
    assert main(["index", str(corpus), "--db", db, "--quiet"]) == 0  # adopts the file's own
    with SQLiteIndex(db) as index:
        assert index.settings == IndexSettings(analyzer_profile="paper")
    capsys.readouterr()
    assert main(["index", str(corpus), "--db", db, "--profile", "sag2", "--quiet"]) == 1
    assert "analyzer_profile" in capsys.readouterr().err
