"""The analyzer: normalisation, tokens, stopwords, sentences and capitalised name phrases.

One analyzer serves indexing, questions and expansion terms, so a term always matches the
tokens it was derived from. Han text goes through jieba (HMM on). Latin-script
runs are tokenised by a regular expression: dotted and hyphenated runs stay whole and also
give their parts. On ASCII text this yields exactly jieba's tokens (tests/core/test_text.py proves
it on generated and real text) at a fraction of the cost: jieba's dictionary holds no
lowercase ASCII word but "c++" and "c#". Other scripts (Cyrillic, Greek, Devanagari, kana...)
give runs of letters, digits and marks, where jieba would emit single characters.

Two profiles (``IndexSettings.analyzer_profile``; every function takes it explicitly):
"sag2", the rules above, and "paper", the authors' port's rules (paper_analyzer.py: jieba's
words over the whole text, joined runs kept whole, indexed under plain ``unicode61``, where
hyphens and dots separate terms and single diacritics are removed). docs/method.md compares
them.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import dataclass
from typing import Literal

from ._jieba import tokenizer as jieba_tokenizer

ANALYZER_VERSION = "2"  # 2: tokens pass through the unicode61-equivalent final_tokens

_ENGLISH = "the a an of in on at to for and or is are was were be by with from which what who how"
_ENGLISH += " when where does do did that this it as"
ENGLISH_STOPWORDS = frozenset(_ENGLISH.split(" "))
_CHINESE = "的 了 是 在 和 与 或 哪 什么 哪个 哪些 如何 怎么 为什么 是否 这 那 一个 一种"
_CHINESE += " 请 我 你 他 它 吗 呢 吧 地 得"
CHINESE_STOPWORDS = frozenset(_CHINESE.split(" "))
STOPWORDS = ENGLISH_STOPWORDS | CHINESE_STOPWORDS

Profile = Literal["sag2", "paper"]
PROFILES: tuple[Profile, ...] = ("sag2", "paper")
DEFAULT_PROFILE: Profile = "sag2"
# The FTS5 tokenizer each profile's tokens are final for (fts5_terms reproduces it).
SAG2_FTS_TOKENIZER = "unicode61 remove_diacritics 2 tokenchars '-.'"
PAPER_FTS_TOKENIZER = "unicode61"
FTS_TOKENIZERS: dict[str, str] = {"sag2": SAG2_FTS_TOKENIZER, "paper": PAPER_FTS_TOKENIZER}
# Each profile's analyzer version, recorded in meta. "paper" 3: the port's token pass (issue 21).
ANALYZER_VERSIONS: dict[str, str] = {"sag2": ANALYZER_VERSION, "paper": "3"}

_LATIN = "0-9a-z\u00aa\u00b5\u00ba\u00df-\u00f6\u00f8-\u024f\u1e00-\u1eff"
_LATIN_RUN = re.compile(rf"[{_LATIN}]+(?:[.\-][{_LATIN}]+)*")
_ASCII_PUNCT = re.escape("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_RUN = re.compile(
    rf"(?P<latin>{_LATIN_RUN.pattern})|(?P<han>[{_HAN}]+)|(?P<other>[^\s{_ASCII_PUNCT}{_LATIN}{_HAN}]+)"
)
_JOINERS = re.compile(r"[.\-]")
_ASCII_WORD = re.compile(r"[0-9a-z]+")
_ASCII_SEPARATORS = re.compile(r"[^0-9a-z]+")
_JOINED_RUN = re.compile(rf"[{_LATIN}][.\-][{_LATIN}]")
_NON_LATIN_WORD_CHAR = re.compile(rf"[^\W_{_LATIN}]")
_SENTENCE_BREAK = re.compile(r"[.!?]\s+|\n\s*")
_UPPER = "".join(sorted({ch for ch in map(chr, range(0x250)) if ch.isupper()}))
_CAPITALISED_WORD = rf"(?:(?:[{_UPPER}]\.)+|[{_UPPER}][\w'’\-]*)"
# The first word starts with its capital and only then looks back (the word must not continue
# a longer word): a leading class lets the regex engine skip non-capitals quickly.
_FIRST_CAPITALISED_WORD = rf"[{_UPPER}](?<![\w'’\-.][{_UPPER}])(?:\.(?:[{_UPPER}]\.)*|[\w'’\-]*)"
_NAME_RUN = re.compile(rf"{_FIRST_CAPITALISED_WORD}(?:[ \t]+{_CAPITALISED_WORD})+(?![\w'’\-]|\.\w)")


def normalize(text: str) -> str:
    """NFKC-normalise and lowercase, the form every token is derived from."""
    return unicodedata.normalize("NFKC", text).lower()


def tokenize(text: str, *, profile: Profile = DEFAULT_PROFILE) -> list[str]:
    """The analyzer's tokens of ``text`` in order, stopwords removed."""
    return tokenize_normalized(normalize(text), profile=profile)


def question_words(text: str, profile: Profile = DEFAULT_PROFILE) -> list[str]:
    """The words a question's expansion tests compare with: its tokens ("sag2"), or the
    port's words before unicode61 ("paper", matching those of the expansion units)."""
    if profile == "paper":
        from .paper_analyzer import paper_words

        return paper_words(text)
    return tokenize(text, profile=profile)


def distinct_tokens(
    text: str, limit: int | None = None, *, profile: Profile = DEFAULT_PROFILE
) -> list[str]:
    """Distinct tokens in first-occurrence order, optionally the first ``limit`` of them."""
    unique = list(dict.fromkeys(tokenize(text, profile=profile)))
    return unique if limit is None else unique[:limit]


def tokenize_normalized(
    normalized: str, latin_only: bool | None = None, *, profile: Profile = DEFAULT_PROFILE
) -> list[str]:
    """Tokens of already-normalised text; Latin-only text skips the per-script dispatch.

    ``latin_only`` may be passed when the caller already checked a larger enclosing text.
    """
    if profile == "paper":
        return _paper_tokens(normalized)
    if latin_only is None:
        latin_only = is_latin_only(normalized)
    if latin_only:
        joined = _JOINED_RUN.search(normalized) is not None
        return final_tokens(_latin_tokens(_LATIN_RUN.findall(normalized), joined), profile)
    tokens: list[str] = []
    for match in _RUN.finditer(normalized):
        if match.lastgroup == "han":
            tokens.extend(_jieba_tokens(match.group()))
        elif match.lastgroup == "other":
            tokens.extend(_script_words(match.group()))
        else:
            tokens.extend(_latin_tokens([match.group()]))
    return final_tokens(tokens, profile)


def _paper_tokens(normalized: str) -> list[str]:
    """The paper profile's token stream: the port's words (paper_analyzer.py) as plain
    ``unicode61`` indexes them."""
    from .paper_analyzer import words_of_normalized

    return final_tokens(words_of_normalized(normalized), "paper")


def final_tokens(tokens: list[str], profile: Profile = DEFAULT_PROFILE) -> list[str]:
    """The analyzer's tokens as the profile's FTS5 tokenizer would index them (see fts5_terms),
    so every backend stores and matches exactly the same terms without re-tokenising."""
    if profile == "paper":
        if all(token.isascii() and _ASCII_WORD.fullmatch(token) for token in tokens):
            return tokens
    elif all(token.isascii() for token in tokens):
        return tokens
    return [term for token in tokens for term in fts5_terms(token, profile)]


@functools.lru_cache(maxsize=1 << 16)
def fts5_terms(token: str, profile: Profile = DEFAULT_PROFILE) -> tuple[str, ...]:
    """What the profile's FTS5 tokenizer (`FTS_TOKENIZERS`) makes of one lowercased token.

    Latin letters lose diacritics (a base ASCII letter plus FTS5's diacritic marks; under
    plain ``unicode61`` only when there is one mark), a few letters take their case-folded
    form, FTS5's diacritic marks vanish, and other combining marks separate terms (so do
    hyphens and dots under plain ``unicode61``). (FTS5's tables date from Unicode 6.1: it keeps
    inside a token the few marks assigned since, which this pass treats as separators.)
    """
    paper = profile == "paper"
    if token.isascii():
        return tuple(term for term in _ASCII_SEPARATORS.split(token) if term) if paper else (token,)
    terms: list[str] = []
    current: list[str] = []
    for ch in token:
        if (
            ch in _FTS5_SEPARATOR_LETTERS
            or (paper and ch in "-.")
            or (unicodedata.category(ch)[0] == "M" and not _is_fts5_diacritic(ch))
        ):
            terms.append("".join(current))
            current = []
        else:
            current.append(_fts5_fold(ch, complex_marks=not paper))
    terms.append("".join(current))
    return tuple(term for term in terms if term)


def _fts5_fold(ch: str, complex_marks: bool) -> str:
    """One character folded as FTS5 does: diacritics removed from Latin letters, those with
    several marks only when ``complex_marks`` (remove_diacritics 2)."""
    if ch in _FTS5_CASE_FOLDS:
        return _FTS5_CASE_FOLDS[ch]
    decomposed = unicodedata.normalize("NFD", ch)
    if (
        len(decomposed) > 1
        and (complex_marks or len(decomposed) == 2)
        and decomposed[0].isascii()
        and ch not in _FTS5_UNFOLDED
        and all(_is_fts5_diacritic(mark) for mark in decomposed[1:])
    ):
        return decomposed[0].lower()
    return "" if _is_fts5_diacritic(ch) else ch


def _is_fts5_diacritic(ch: str) -> bool:
    """FTS5's 25 removable diacritic marks (its sqlite3Fts5UnicodeIsdiacritic bit masks)."""
    code = ord(ch) - 0x300
    if not 0 <= code < 50:
        return False
    return bool((0x08029FDF >> code) & 1) if code < 32 else bool((0x000361F8 >> (code - 32)) & 1)


# Folds that differ from str.lower: FTS5 uses the case-folded letter.
_FTS5_CASE_FOLDS = {
    "ς": "σ",
    "ϐ": "β",
    "ϑ": "θ",
    "ϕ": "φ",
    "ϖ": "π",
    "ϰ": "κ",
    "ϱ": "ρ",
    "ϵ": "ε",
    "µ": "μ",
    "ſ": "s",
    "ẛ": "s",
    "\u1fbe": "ι",
}
# Latin letters with only diacritic marks that FTS5's fold table nevertheless keeps.
_FTS5_UNFOLDED = frozenset("ǡ")
# Letters today that were spacing marks in Unicode 6.1 (New Tai Lue vowels, a Vedic sign).
_FTS5_SEPARATOR_LETTERS = frozenset(
    [*map(chr, range(0x19B0, 0x19C1)), "\u19c8", "\u19c9", "\u1cf2", "\u1cf3"]
)


def is_latin_only(normalized: str) -> bool:
    """True when every letter and digit of the text is Latin (no jieba or script handling)."""
    return _NON_LATIN_WORD_CHAR.search(normalized) is None


def _latin_tokens(runs: list[str], joined: bool = True) -> list[str]:
    """Latin runs minus stopwords; a dotted or hyphenated run also gives its lettered parts.

    ``joined=False`` promises that no run is dotted or hyphenated (checked by the caller on
    the whole text, faster than looking at every run).
    """
    if not joined:
        return [run for run in runs if run not in STOPWORDS]
    tokens: list[str] = []
    for run in runs:
        if run not in STOPWORDS:
            tokens.append(run)
        if "." in run or "-" in run:
            tokens.extend(
                part
                for part in _JOINERS.split(run)
                if len(part) >= 2 and part not in STOPWORDS and _has_letter(part)
            )
    return tokens


def _script_words(segment: str) -> list[str]:
    """Words of other scripts (Cyrillic, Greek, Devanagari...): runs of letters, digits, marks."""
    words: list[str] = []
    start = None
    for position, ch in enumerate(segment + " "):
        if unicodedata.category(ch)[0] in "LNM":
            start = position if start is None else start
        elif start is not None:
            word = segment[start:position]
            if _is_token(word):
                words.append(word)
            start = None
    return words


def _jieba_tokens(segment: str) -> list[str]:
    """Segment a run of Han characters with jieba, adding dictionary sub-words of long words."""
    tokens: list[str] = []
    for word in jieba_tokenizer().cut(segment, HMM=True):
        if _is_token(word):
            tokens.append(word)
        if len(word) > 2:
            tokens.extend(_cjk_subwords(word))
    return tokens


def _cjk_subwords(word: str) -> list[str]:
    """2-character (3-character) dictionary sub-words of a CJK word longer than 2 (3)."""
    freq = jieba_tokenizer().FREQ
    subs = [word[i : i + 2] for i in range(len(word) - 1) if freq.get(word[i : i + 2])]
    if len(word) > 3:
        subs += [word[i : i + 3] for i in range(len(word) - 2) if freq.get(word[i : i + 3])]
    return [sub for sub in subs if sub not in STOPWORDS]


def _is_token(piece: str) -> bool:
    """A token holds a letter or digit and is not a stopword."""
    return any(ch.isalnum() for ch in piece) and piece not in STOPWORDS


def _has_letter(text: str) -> bool:
    """True when the text holds at least one letter."""
    return any(ch.isalpha() for ch in text)


def split_sentences(text: str) -> list[tuple[int, int]]:
    """Sentence ranges: a break after ``.!?`` and whitespace (not after an initial), or newlines."""
    ranges: list[tuple[int, int]] = []
    start = 0
    for match in _SENTENCE_BREAK.finditer(text):
        mark = match.start()
        if text[mark] == "." and _follows_initial(text, mark):
            continue
        end = mark if text[mark] == "\n" else mark + 1
        if text[start:end].strip():
            ranges.append((start, end))
        start = match.end()
    if text[start:].strip():
        ranges.append((start, len(text)))
    return ranges


def _follows_initial(text: str, dot: int) -> bool:
    """True when the period at ``dot`` ends a single capital initial such as "J." or "U.S."."""
    before = text[dot - 2] if dot >= 2 else " "
    return dot >= 1 and "A" <= text[dot - 1] <= "Z" and not before.isalpha()


def name_runs(sentence: str) -> list[tuple[int, int]]:
    """Ranges of maximal runs of >= 2 capitalised words (initials count; Jean-Luc is one word).

    Words may hold digits and continue past a hyphen or apostrophe ("Elmo's", "B-52",
    "Jong-un"). (The "paper" profile's names follow the port: paper_analyzer.py.)
    """
    return [match.span() for match in _NAME_RUN.finditer(sentence)]


@dataclass(frozen=True)
class UnitAnalysis:
    """What indexing and term selection need from one unit's body.

    ``tokens`` is the body's token stream (for FTS5). ``sentences`` holds, per sentence, its
    expansion units: each name phrase once (its tokens joined by spaces) and the remaining
    single tokens, with repetitions.
    """

    tokens: tuple[str, ...]
    sentences: tuple[tuple[str, ...], ...]


def analyze_body(body: str, profile: Profile = DEFAULT_PROFILE) -> UnitAnalysis:
    """Tokenise a unit's body and derive each sentence's expansion units (names as phrases).

    "sag2" builds the token stream sentence by sentence; "paper" tokenises the body in one
    pass (jieba then sees Han text across sentence breaks), as the port does.
    """
    return _analysis(body, profile, with_sentences=True)


def body_tokens(body: str, profile: Profile = DEFAULT_PROFILE) -> tuple[str, ...]:
    """``analyze_body(body, profile).tokens`` without the name and sentence work, which only
    expansion needs (ingest stores tokens; expansion derives its units at query time)."""
    return _analysis(body, profile, with_sentences=False).tokens


def _analysis(body: str, profile: Profile, with_sentences: bool) -> UnitAnalysis:
    """The body's tokens, and its sentences' expansion units when ``with_sentences``
    (otherwise none); the token stream is built the same way either way."""
    if profile == "paper":
        return _paper_analysis(body, with_sentences)
    nfkc = unicodedata.normalize("NFKC", body)
    lowered = nfkc.lower()
    if len(lowered) != len(nfkc):
        lowered = "".join(ch.lower()[:1] or ch for ch in nfkc)
    latin_only = is_latin_only(lowered)
    runs = name_runs(nfkc) if with_sentences else []
    tokens: list[str] = []
    sentences: list[tuple[str, ...]] = []
    next_run = 0
    for start, end in split_sentences(nfkc):
        sentence_tokens = tokenize_normalized(lowered[start:end], latin_only, profile=profile)
        tokens.extend(sentence_tokens)
        if not with_sentences:
            continue
        names = []
        while next_run < len(runs) and runs[next_run][0] < end:
            run_start, run_end = runs[next_run]
            if run_start >= start and run_end <= end:
                names.append(
                    tokenize_normalized(lowered[run_start:run_end], latin_only, profile=profile)
                )
            next_run += 1
        sentences.append(expansion_units(names, sentence_tokens))
    return UnitAnalysis(tuple(tokens), tuple(sentences))


def _paper_analysis(body: str, with_sentences: bool) -> UnitAnalysis:
    """The "paper" profile's analysis: the body's stream in one pass, and its sentences'
    expansion units by the port's rules (words before unicode61, names after them)."""
    from .paper_analyzer import sentence_units

    tokens = tuple(_paper_tokens(normalize(body)))
    return UnitAnalysis(tokens, sentence_units(body) if with_sentences else ())


def expansion_units(names: list[list[str]], sentence_tokens: list[str]) -> tuple[str, ...]:
    """A sentence's name phrases (one unit each) and the tokens left outside those names.

    ``names`` holds the tokens of each capitalised run in the sentence. Runs begin and end at
    word boundaries, so a run's tokens are exactly the sentence tokens it covers; removing
    them once each leaves the tokens outside the names.
    """
    phrases: list[str] = []
    rest = sentence_tokens
    for words in names:
        remaining = _without(rest, words) if len(words) >= 2 else None
        if remaining is not None:
            phrases.append(" ".join(words))
            rest = remaining
    return (*phrases, *rest)


def _without(tokens: list[str], words: list[str]) -> list[str] | None:
    """``tokens`` with one occurrence of each word removed, or None if some word is missing."""
    remaining = list(tokens)
    for word in words:
        try:
            remaining.remove(word)
        except ValueError:
            return None
    return remaining


def fold_accents(text: str) -> str:
    """Casefold and strip diacritics, the form title aliases are compared in."""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    stripped = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    return stripped.translate(_UNDECOMPOSABLE)


_UNDECOMPOSABLE = str.maketrans(
    {"ł": "l", "ø": "o", "đ": "d", "ß": "ss", "æ": "ae", "œ": "oe", "ı": "i", "þ": "th"}
)
