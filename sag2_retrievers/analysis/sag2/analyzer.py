"""The "sag2" profile: the project's analyzer (tokens, sentences, capitalised name phrases).

Han text goes through jieba (HMM on). Latin-script runs are tokenised by a regular
expression: dotted and hyphenated runs stay whole and also give their parts. On ASCII text
this yields exactly jieba's tokens (tests/core/test_text.py proves it on generated and real
text) at a fraction of the cost: jieba's dictionary holds no lowercase ASCII word but "c++"
and "c#". Other scripts (Cyrillic, Greek, Devanagari, kana...) give runs of letters, digits
and marks, where jieba would emit single characters. Tokens are final for
`fts5.SAG2_FTS_TOKENIZER`. docs/method.md compares it with the "paper" profile.
"""

from __future__ import annotations

import re
import unicodedata

from ..._jieba import tokenizer as jieba_tokenizer
from ..common import STOPWORDS, UnitAnalysis, normalize
from ..fts5 import SAG2_FTS_TOKENIZER, final_tokens

FTS_TOKENIZER = SAG2_FTS_TOKENIZER
ANALYZER_VERSION = "2"  # 2: tokens pass through the unicode61-equivalent final_tokens

_LATIN = "0-9a-z\u00aa\u00b5\u00ba\u00df-\u00f6\u00f8-\u024f\u1e00-\u1eff"
_LATIN_RUN = re.compile(rf"[{_LATIN}]+(?:[.\-][{_LATIN}]+)*")
_ASCII_RUN = re.compile(r"[0-9a-z]+(?:[.\-][0-9a-z]+)*")  # _LATIN_RUN on ASCII text
_ASCII_PUNCT = re.escape("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_RUN = re.compile(
    rf"(?P<latin>{_LATIN_RUN.pattern})|(?P<han>[{_HAN}]+)|(?P<other>[^\s{_ASCII_PUNCT}{_LATIN}{_HAN}]+)"
)
_JOINERS = re.compile(r"[.\-]")
_JOINED_RUN = re.compile(rf"[{_LATIN}][.\-][{_LATIN}]")
_NON_LATIN_WORD_CHAR = re.compile(rf"[^\W_{_LATIN}]")
_SENTENCE_BREAK = re.compile(r"[.!?]\s+|\n\s*")
_UPPER = "".join(sorted({ch for ch in map(chr, range(0x250)) if ch.isupper()}))
_CAPITALISED_WORD = rf"(?:(?:[{_UPPER}]\.)+|[{_UPPER}][\w'’\-]*)"
# The first word starts with its capital and only then looks back (the word must not continue
# a longer word): a leading class lets the regex engine skip non-capitals quickly.
_FIRST_CAPITALISED_WORD = rf"[{_UPPER}](?<![\w'’\-.][{_UPPER}])(?:\.(?:[{_UPPER}]\.)*|[\w'’\-]*)"
_NAME_RUN = re.compile(rf"{_FIRST_CAPITALISED_WORD}(?:[ \t]+{_CAPITALISED_WORD})+(?![\w'’\-]|\.\w)")


def tokens(normalized: str, latin_only: bool | None = None) -> list[str]:
    """Tokens of already-normalised text, stopwords removed; Latin-only text skips the
    per-script dispatch (``latin_only`` may be passed when the caller already checked a larger
    enclosing text)."""
    if normalized.isascii():
        # The Latin classes hold no other ASCII than 0-9a-z, and FTS5 keeps ASCII tokens as
        # they are: the same tokens as below, at a fifth less of the cost.
        joined = _JOINED_RUN.search(normalized) is not None
        return _latin_tokens(_ASCII_RUN.findall(normalized), joined)
    if latin_only is None:
        latin_only = is_latin_only(normalized)
    if latin_only:
        joined = _JOINED_RUN.search(normalized) is not None
        return final_tokens(_latin_tokens(_LATIN_RUN.findall(normalized), joined))
    found: list[str] = []
    for match in _RUN.finditer(normalized):
        if match.lastgroup == "han":
            found.extend(_jieba_tokens(match.group()))
        elif match.lastgroup == "other":
            found.extend(_script_words(match.group()))
        else:
            found.extend(_latin_tokens([match.group()]))
    return final_tokens(found)


def question_words(text: str) -> list[str]:
    """The words a question's expansion tests compare with: its tokens."""
    return tokens(normalize(text))


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
    "Jong-un"). (The "paper" profile's names follow the port: paper/analyzer.py.)
    """
    return [match.span() for match in _NAME_RUN.finditer(sentence)]


def analysis(body: str, with_sentences: bool) -> UnitAnalysis:
    """The body's tokens and, when ``with_sentences``, its sentences' expansion units (names as
    phrases); without them the tokens come from one pass over the whole text, the same stream."""
    nfkc = unicodedata.normalize("NFKC", body)
    lowered = nfkc.lower()
    if len(lowered) != len(nfkc):
        lowered = "".join(ch.lower()[:1] or ch for ch in nfkc)
    latin_only = lowered.isascii() or is_latin_only(lowered)
    if not with_sentences:
        # Sentences break only at whitespace after .!? or at newlines, where no token run can
        # go on, so the whole text's tokens are its sentences' tokens in order.
        return UnitAnalysis(tuple(tokens(lowered, latin_only)), ())
    runs = name_runs(nfkc)
    stream: list[str] = []
    sentences: list[tuple[str, ...]] = []
    next_run = 0
    for start, end in split_sentences(nfkc):
        sentence_tokens = tokens(lowered[start:end], latin_only)
        stream.extend(sentence_tokens)
        names = []
        while next_run < len(runs) and runs[next_run][0] < end:
            run_start, run_end = runs[next_run]
            if run_start >= start and run_end <= end:
                names.append(tokens(lowered[run_start:run_end], latin_only))
            next_run += 1
        sentences.append(expansion_units(names, sentence_tokens))
    return UnitAnalysis(tuple(stream), tuple(sentences))


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
