"""The analyzer (ARCHITECTURE §4.1): tokens, stopwords, sentences, name runs, expansion units."""

from __future__ import annotations

import logging
import re
import string
import unicodedata

import jieba
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from sag2_retrievers._jieba import tokenizer as analyzer_jieba
from sag2_retrievers.analysis import (
    CHINESE_STOPWORDS,
    ENGLISH_STOPWORDS,
    PROFILES,
    STOPWORDS,
    Profile,
    analyze_body,
    body_tokens,
    distinct_tokens,
    fold_accents,
    name_runs,
    split_sentences,
    tokenize,
)

jieba.setLogLevel(logging.WARNING)

SPEC_ENGLISH_STOPWORDS = (
    "the", "a", "an", "of", "in", "on", "at", "to", "for", "and", "or", "is", "are", "was", "were",
    "be", "by", "with", "from", "which", "what", "who", "how", "when", "where", "does", "do",
    "did", "that", "this", "it", "as",
)  # fmt: skip
SPEC_CHINESE_STOPWORDS = (
    "的", "了", "是", "在", "和", "与", "或", "哪", "什么", "哪个", "哪些", "如何", "怎么",
    "为什么", "是否", "这", "那", "一个", "一种", "请", "我", "你", "他", "它", "吗", "呢", "吧",
    "地", "得",
)  # fmt: skip


def sentences(text: str) -> list[str]:
    """The sentences of ``text`` as strings."""
    return [text[start:end] for start, end in split_sentences(text)]


def names(sentence: str) -> list[str]:
    """The name runs of ``sentence`` as strings."""
    return [sentence[start:end] for start, end in name_runs(sentence)]


# -- tokens ----------------------------------------------------------------------------------


def test_latin_words_become_lowercase_tokens() -> None:
    assert tokenize("Hobbits Live under Hills") == ["hobbits", "live", "under", "hills"]


def test_english_stopword_list_is_the_specified_one() -> None:
    assert set(SPEC_ENGLISH_STOPWORDS) == ENGLISH_STOPWORDS


def test_chinese_stopword_list_is_the_specified_one() -> None:
    assert set(SPEC_CHINESE_STOPWORDS) == CHINESE_STOPWORDS


def test_english_stopwords_are_removed() -> None:
    assert tokenize("The cat of the hat was in it") == ["cat", "hat"]


def test_chinese_stopwords_are_removed() -> None:
    assert tokenize("我的朋友在北京") == ["朋友", "北京"]


def test_hyphenated_run_is_kept_whole_and_gives_its_parts() -> None:
    assert tokenize("half-ounce") == ["half-ounce", "half", "ounce"]


def test_hyphen_parts_need_two_characters_a_letter_and_no_stopword() -> None:
    assert tokenize("x-ray") == ["x-ray", "ray"]
    assert tokenize("state-of-the-art") == ["state-of-the-art", "state", "art"]
    assert tokenize("1-2-3") == ["1-2-3"]


def test_decimal_number_is_one_token_without_parts() -> None:
    assert tokenize("3.14") == ["3.14"]


def test_dotted_abbreviation_is_one_token_without_trailing_dot() -> None:
    assert tokenize("u.s.") == ["u.s"]


def test_nfkc_folds_fullwidth_characters() -> None:
    assert tokenize("ＡＢＣ１２３") == ["abc123"]


def test_nfkc_expands_ligatures() -> None:
    assert tokenize("ﬁnance") == ["finance"]


def test_cjk_word_gives_its_dictionary_subwords() -> None:
    assert tokenize("北京大学") == ["北京大学", "北京", "大学"]


def test_cyrillic_words_are_kept_whole() -> None:
    assert tokenize("Привет мир") == ["привет", "мир"]


def test_greek_word_is_kept_whole() -> None:
    assert tokenize("Ελληνικά") == ["ελληνικά"]


def test_devanagari_words_split_at_combining_marks_as_fts5_indexes_them() -> None:
    assert tokenize("हिन्दी भाषा") == ["ह", "न", "द", "भ", "ष"]


def test_accented_latin_word_loses_its_diacritics_as_fts5_indexes_it() -> None:
    assert tokenize("Beyoncé") == ["beyonce"]


def test_mixed_latin_and_han_text_is_tokenised_per_script() -> None:
    assert tokenize("Python 和 北京") == ["python", "北京"]


def test_distinct_tokens_keep_first_occurrence_order_and_limit() -> None:
    assert distinct_tokens("b a b c a d") == ["b", "c", "d"]
    assert distinct_tokens("b a b c a d", 2) == ["b", "c"]


# -- equivalence with jieba on ASCII text ----------------------------------------------------

_JOINED_RUN = re.compile(r"[a-z0-9]+(?:[.\-][a-z0-9]+)+")
_NOT_FTS_ATOMIC = re.compile(r"[^0-9a-z.\-]+")
_JOINER = re.compile(r"[.\-]")
_GLUED_DICTIONARY_WORD = re.compile(r"[a-z0-9](?:c\+\+|c#)")
_ASCII_CHARS = string.ascii_letters + string.digits + " \t\n.-%+#&_'\"!?,:;()/"
_ASCII_FRAGMENTS = (
    "the", "of", "It", "c++", "C#", "AT&T", "u.s.", "3.14", "50%", "half-ounce", "x.y.z",
    "a.5", "1.2.3", "re-", "-ed", "don't", " ", "-", ".", "--", "..", "_", "10.5%", "e-mail",
)  # fmt: skip


def jieba_reference(text: str) -> list[str]:
    """What the analyzer must yield on ASCII text, built from jieba itself (§4.1)."""
    normalized = unicodedata.normalize("NFKC", text).lower()
    tokens: list[str] = []
    position = 0
    for match in _JOINED_RUN.finditer(normalized):
        tokens += _jieba_atoms(normalized[position : match.start()])
        run = match.group()
        tokens += [run, *(p for p in _JOINER.split(run) if len(p) >= 2 and _has_letter(p))]
        position = match.end()
    tokens += _jieba_atoms(normalized[position:])
    return [token for token in tokens if token not in STOPWORDS]


def _jieba_atoms(piece: str) -> list[str]:
    """jieba's words of a piece, split into FTS-atomic parts that hold a letter or digit."""
    words = jieba.cut(piece, HMM=True)
    atoms = [atom for word in words for atom in _NOT_FTS_ATOMIC.split(word)]
    return [atom for atom in atoms if any(ch.isalnum() for ch in atom)]


def _has_letter(text: str) -> bool:
    """True when the text holds a letter."""
    return any(ch.isalpha() for ch in text)


ascii_texts = (
    st.lists(
        st.one_of(st.sampled_from(_ASCII_FRAGMENTS), st.text(alphabet=_ASCII_CHARS, max_size=8)),
        max_size=40,
    )
    .map("".join)
    .filter(lambda text: len(text) <= 200)
)


def test_jieba_holds_no_lowercase_ascii_word_but_c_plus_plus_and_c_sharp() -> None:
    """The premise of the equivalence below and of its one exclusion."""
    frequencies = analyzer_jieba().FREQ
    ascii_words = {word for word, count in frequencies.items() if count and word.isascii()}
    assert {word for word in ascii_words if word == word.lower()} == {"c++", "c#"}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ascii_texts)
def test_ascii_text_yields_exactly_the_jieba_reference_tokens(text: str) -> None:
    """On ASCII text the analyzer equals jieba plus joined runs, atomised, minus stopwords.

    Excluded: texts where jieba's only lowercase ASCII dictionary words, "c++" and "c#", are
    glued to a preceding letter or digit ("abc++"): jieba splits off the dictionary word
    ("ab", "c++"), while the analyzer keeps the alphanumeric run whole ("abc").
    """
    assume(_GLUED_DICTIONARY_WORD.search(text.lower()) is None)
    assert tokenize(text) == jieba_reference(text)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ascii_texts)
def test_ascii_text_has_the_tokens_of_the_general_latin_path(text: str) -> None:
    """ASCII text takes a faster path; after a non-ASCII word it takes the general Latin one,
    and its tokens must be the same there."""
    assert tokenize(text + " café") == [*tokenize(text), "cafe"]


def test_glued_dictionary_word_is_the_known_difference_from_jieba() -> None:
    """Pins the exclusion above: it is real, and it is the only reason for it."""
    assert tokenize("abc++") == ["abc"]
    assert jieba_reference("abc++") == ["ab", "c"]


def test_musique_ascii_passages_yield_exactly_the_jieba_reference_tokens(
    musique_passages: list[dict[str, str]],
) -> None:
    texts = [
        text
        for passage in musique_passages
        for text in (passage["title"], passage["text"])
        if text.isascii()
    ]
    mismatches = [text for text in texts if tokenize(text) != jieba_reference(text)]
    assert len(texts) > 1000
    assert mismatches == []


# -- sentences -------------------------------------------------------------------------------


def test_sentences_end_at_terminal_punctuation_before_whitespace() -> None:
    assert sentences("It rained. Did it? Yes! Fine") == ["It rained.", "Did it?", "Yes!", "Fine"]


def test_newline_ends_a_sentence() -> None:
    assert sentences("first line\nsecond line") == ["first line", "second line"]


def test_punctuation_without_following_whitespace_does_not_end_a_sentence() -> None:
    assert sentences("Pi is 3.14 or so?Maybe") == ["Pi is 3.14 or so?Maybe"]


def test_single_capital_initials_do_not_end_a_sentence() -> None:
    text = "J. R. R. Tolkien wrote books. He died in 1973."
    assert sentences(text) == ["J. R. R. Tolkien wrote books.", "He died in 1973."]


def test_dotted_abbreviation_before_a_name_does_not_end_a_sentence() -> None:
    text = "He served in the U.S. Army for years. Then he left."
    assert sentences(text) == ["He served in the U.S. Army for years.", "Then he left."]


def test_blank_lines_give_no_sentences() -> None:
    assert sentences("\n\n  \nText here\n \n") == ["Text here"]


# -- name runs -------------------------------------------------------------------------------


def test_two_capitalised_words_form_a_name_run() -> None:
    assert names("They met Barack Obama today") == ["Barack Obama"]


def test_one_capitalised_word_is_not_a_name_run() -> None:
    assert names("Paris is nice") == []


def test_initials_count_as_capitalised_words() -> None:
    assert names("J. R. R. Tolkien wrote it") == ["J. R. R. Tolkien"]


def test_hyphenated_given_name_is_one_word() -> None:
    assert names("Jean-Luc arrived") == []
    assert names("Jean-Luc Picard arrived") == ["Jean-Luc Picard"]


def test_comma_ends_a_name_run() -> None:
    assert names("Barack Obama, Michelle Obama") == ["Barack Obama", "Michelle Obama"]


def test_designation_with_digits_gives_no_bogus_name() -> None:
    """'The Short S.16 Scion': only 'short' is a name word, so no phrase is formed."""
    analysis = analyze_body("The Short S.16 Scion was built.")
    assert analysis.sentences == (("short", "s.16", "scion", "built"),)


# -- expansion units -------------------------------------------------------------------------


def test_name_is_one_phrase_and_its_words_are_not_counted_again() -> None:
    analysis = analyze_body("Marie Curie won. Curie won twice.")
    assert analysis.sentences == (("marie curie", "won"), ("curie", "won", "twice"))


def test_each_occurrence_of_a_name_counts_once() -> None:
    analysis = analyze_body("John Smith met John Smith.")
    assert analysis.sentences == (("john smith", "john smith", "met"),)


def test_body_tokens_are_the_analyzer_tokens_of_the_body() -> None:
    body = "Marie Curie won the ﬁrst prize. She worked in Paris.\nThe U.S. Army came later!"
    assert list(analyze_body(body).tokens) == tokenize(body)


# Pieces that exercise sentence breaks, name runs, initials, joiners, Han and other scripts.
_BODY_PIECES = [
    "Marie Curie", "won", "the", "Nobel Prize", ". ", "! ", "? ", "\n", " ", "J. R. R.",
    "U.S.", "Jong-un", "Elmo's", "B-52", "Łódź", "ﬁrst", "中华人民共和国", "北京大学。",
    "Жан Поль", "1891", "co-creator", "-", "'", "e.g.", "İstanbul", "\u00a0", "αβγ.δ",
    "x.y", "…", "ＡＢ", "!?", "\t", "A.", "ǅemal", "Ǉ", "3.14", "n\u0303",
]  # fmt: skip


@pytest.mark.parametrize("profile", PROFILES)
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pieces=st.lists(st.sampled_from(_BODY_PIECES), max_size=30),
    glue=st.sampled_from(["", " ", "\n", ". "]),
)
def test_ingest_tokens_are_the_token_stream_of_the_full_analysis(
    profile: Profile, pieces: list[str], glue: str
) -> None:
    """Ingest skips the name and sentence work (the sag2 profile tokenises the whole text at
    once); its tokens must still be exactly `analyze_body`'s, built sentence by sentence."""
    body = glue.join(pieces)
    assert body_tokens(body, profile) == analyze_body(body, profile).tokens


def test_initials_name_becomes_a_phrase_of_its_tokens() -> None:
    analysis = analyze_body("J. R. R. Tolkien wrote books.")
    assert analysis.sentences == (("j r r tolkien", "wrote", "books"),)


# -- accent folding --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "folded"),
    [
        ("Beyoncé", "beyonce"),
        ("Łódź", "lodz"),
        ("Straße", "strasse"),
        ("Ørsted", "orsted"),
        ("ÆON Œuvre", "aeon oeuvre"),
    ],
)
def test_fold_accents_casefolds_and_strips_diacritics(text: str, folded: str) -> None:
    assert fold_accents(text) == folded
