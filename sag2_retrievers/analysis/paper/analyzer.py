"""The "paper" profile's text rules, as the authors' port (zleap-sag2 0.2.0.post1) applies them.

Words: jieba over the whole lowercased NFKC text, its Han-block pattern deciding what reaches
the segmenter (Han, ASCII letters and digits, ``+#&._%-``) and every other character coming
out alone ("beyoncé" -> "beyonc", "é"). Inside a block, runs of letters and digits joined by
``.``, ``_`` or ``-`` stay one word ("co-creator", "u.s", "104.7", "50%"). Each word is
preceded by its joined parts of >= 2 characters holding a Latin letter and by its 2- and
3-character dictionary sub-words. The index stores the words' unicode61 terms
(`fts5.fts5_terms`); a query or expansion term is one word, or a name's words joined by
spaces, and matches as the phrase of its terms (`match_phrase`). docs/method.md cites the
port's rules.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

import regex

from ..._jieba import tokenizer as jieba_tokenizer
from ..common import STOPWORDS, UnitAnalysis, normalize
from ..fts5 import PAPER_FTS_TOKENIZER, final_tokens, fts5_terms

FTS_TOKENIZER = PAPER_FTS_TOKENIZER
ANALYZER_VERSION = "3"  # 3: the port's token pass (issue 21)

# jieba's default block pattern (re_han_default) and whitespace pattern (re_skip_default).
_JIEBA_BLOCK = re.compile(r"([\u4e00-\u9fd5a-zA-Z0-9+#&._%\-]+)")
_JIEBA_SPACE = re.compile(r"(\r\n|\s)")
_JIEBA_HAN = re.compile(r"([\u4e00-\u9fd5]+)")
# The port widens jieba's out-of-dictionary ASCII pattern to keep joined runs whole.
_JOINED_WORD = re.compile(r"([a-zA-Z0-9]+(?:[._-][a-zA-Z0-9]+)*%?)")
# jieba's only dictionary words of lowercase ASCII: cut out of any ASCII run.
_ASCII_DICTIONARY_WORD = re.compile(r"(c\+\+|c#)")
_JOINERS = re.compile(r"[._-]")
_LATIN_LETTER = re.compile(r"[a-z]")
_ASCII_CONTENT = re.compile(r"[0-9A-Za-z]")
# The port's sentence break: after .!? and whitespace unless a lone capital precedes, or
# at newlines; and its name pattern (capitalised words, an initial "X." counting as one).
_SENTENCE_BREAK = re.compile(r"(?<!\b[A-Z])[.!?]\s+|\n+")
_NAME_WORD = r"(?:\p{Lu}\.|\p{Lu}[\p{L}\p{M}]*(?:[-’']\p{Lu}[\p{L}\p{M}]*)*)"
_NAMES = regex.compile(
    rf"(?<![\p{{L}}\p{{N}}]){_NAME_WORD}(?:[ \t]+{_NAME_WORD})+(?![\p{{L}}\p{{N}}])"
)


def paper_words(text: str) -> list[str]:
    """The words of ``text`` (NFKC, lowercased) in stream order, stopwords removed."""
    return words_of_normalized(normalize(text))


def tokens(normalized: str, latin_only: bool | None = None) -> list[str]:
    """The token stream of already-normalised text: the port's words as plain ``unicode61``
    indexes them (``latin_only`` is the "sag2" profile's shortcut and changes nothing here)."""
    return final_tokens(words_of_normalized(normalized), "paper")


def question_words(text: str) -> list[str]:
    """The words a question's expansion tests compare with: the port's words before
    unicode61, matching those of the expansion units."""
    return paper_words(text)


def analysis(body: str, with_sentences: bool) -> UnitAnalysis:
    """The body's token stream in one pass (jieba sees Han text across sentence breaks, as
    the port does), and its sentences' expansion units when ``with_sentences``."""
    stream = tuple(tokens(normalize(body)))
    return UnitAnalysis(stream, sentence_units(body) if with_sentences else ())


def words_of_normalized(normalized: str) -> list[str]:
    """`paper_words` of already-normalised text."""
    if normalized.isascii() and "c+" not in normalized and "c#" not in normalized:
        return _plain_ascii_words(normalized)
    words: list[str] = []
    for word in _jieba_words(normalized):
        words.extend(_with_parts(word))
    return words


def _plain_ascii_words(normalized: str) -> list[str]:
    """`words_of_normalized` of ASCII text without jieba's two ASCII dictionary words: its
    joined-word runs (every block is cut into them; what lies between holds no letter or
    digit), each after its lettered parts, stopwords removed."""
    words: list[str] = []
    for word in _JOINED_WORD.findall(normalized):
        if "-" in word or "." in word or "_" in word:
            words.extend(
                part
                for part in _JOINERS.split(word)
                if len(part) >= 2 and _LATIN_LETTER.search(part) and part not in STOPWORDS
            )
        if word not in STOPWORDS:
            words.append(word)
    return words


def _jieba_words(normalized: str) -> list[str]:
    """What jieba's default cut (HMM on) gives, with the port's out-of-dictionary pattern.

    Between blocks, whitespace comes out as one word and any other character alone; in
    ASCII text those are punctuation, never a word, so only the blocks are cut there.
    """
    if normalized.isascii():
        return [w for block in _JIEBA_BLOCK.findall(normalized) for w in _ascii_block(block)]
    words: list[str] = []
    for block in _JIEBA_BLOCK.split(normalized):
        if not block:
            continue
        if _JIEBA_BLOCK.fullmatch(block):
            words.extend(_ascii_block(block) if block.isascii() else _han_block(block))
        else:
            for piece in _JIEBA_SPACE.split(block):
                words.extend([piece] if _JIEBA_SPACE.fullmatch(piece) else list(piece))
    return words


def _ascii_block(block: str) -> list[str]:
    """An ASCII block: its dictionary words, and the rest as out-of-dictionary runs."""
    if "c+" not in block and "c#" not in block:
        return [piece for piece in _JOINED_WORD.split(block) if piece]
    words: list[str] = []
    for position, piece in enumerate(_ASCII_DICTIONARY_WORD.split(block)):
        if position % 2:
            words.append(piece)
        elif piece:
            words.extend(p for p in _JOINED_WORD.split(piece) if p)
    return words


def _han_block(block: str) -> list[str]:
    """A block holding Han characters: jieba's dictionary route, with runs of single
    characters handed on as jieba does (alone, per character, or to its HMM)."""
    tokenizer = jieba_tokenizer()
    route: dict[int, Any] = {}
    tokenizer.calc(block, tokenizer.get_DAG(block), route)
    words: list[str] = []
    pending = ""
    position = 0
    while position < len(block):
        end = route[position][1] + 1
        if end - position == 1:
            pending += block[position]
        else:
            words.extend(_single_characters(pending, tokenizer))
            pending = ""
            words.append(block[position:end])
        position = end
    return words + _single_characters(pending, tokenizer)


def _single_characters(pending: str, tokenizer: Any) -> list[str]:
    """A run of characters the route left single (jieba's ``buf``)."""
    if len(pending) <= 1:
        return [pending] if pending else []
    if tokenizer.FREQ.get(pending):
        return list(pending)
    return _unknown_run(pending)


def _unknown_run(run: str) -> list[str]:
    """An out-of-dictionary run: Han parts through jieba's HMM, the rest split by the
    port's joined-word pattern (its separators kept as words)."""
    import jieba.finalseg

    words: list[str] = []
    for part in _JIEBA_HAN.split(run):
        if not part:
            continue
        if _JIEBA_HAN.fullmatch(part):
            words.extend(jieba.finalseg.cut(part))
        else:
            words.extend(piece for piece in _JOINED_WORD.split(part) if piece)
    return words


def _with_parts(word: str) -> list[str]:
    """A word preceded by its joined parts and dictionary sub-words, minus stopwords and
    words without a letter or digit."""
    words: list[str] = []
    if _JOINERS.search(word):
        words.extend(p for p in _JOINERS.split(word) if len(p) >= 2 and _LATIN_LETTER.search(p))
    # Sub-words exist only in the dictionary's non-ASCII words, which only Han blocks give.
    if len(word) > 2 and not word.isascii():
        freq = jieba_tokenizer().FREQ
        for size in (2, 3):
            if len(word) > size:
                subwords = (word[i : i + size] for i in range(len(word) - size + 1))
                words.extend(sub for sub in subwords if freq.get(sub, 0) > 0)
    words.append(word)
    return [w for w in words if w not in STOPWORDS and _has_content(w)]


def _has_content(word: str) -> bool:
    """True when the word holds a letter or a number."""
    if word.isascii():
        return _ASCII_CONTENT.search(word) is not None
    return any(unicodedata.category(ch)[0] in "LN" for ch in word)


def match_phrase(term: str) -> str:
    """The indexed terms a word or space-joined name matches, as one space-joined phrase."""
    return " ".join(t for word in term.split(" ") for t in fts5_terms(word, "paper"))


def sentence_units(body: str) -> tuple[tuple[str, ...], ...]:
    """Per sentence of a unit's body, its expansion units: the words outside its names, then
    each name's words joined by spaces (one unit per name)."""
    sentences = []
    for sentence in _SENTENCE_BREAK.split(body):
        outside, end, names = [], 0, []
        for match in _NAMES.finditer(sentence):
            outside.append(sentence[end : match.start()] + " ")
            end = match.end()
            names.append(" ".join(paper_words(match.group())))
        words = paper_words("".join(outside) + sentence[end:])
        sentences.append((*words, *names))
    return tuple(sentences)


def sentence_words(body: str) -> list[list[str]]:
    """Per sentence of a unit's body (as `sentence_units` cuts them), all its words."""
    return [paper_words(sentence) for sentence in _SENTENCE_BREAK.split(body)]


def fold_latin_accents(text: str) -> str:
    """The port's alias form of a title: combining marks dropped after Latin letters only."""
    kept: list[str] = []
    latin = False
    for ch in unicodedata.normalize("NFKD", text):
        if not unicodedata.combining(ch):
            kept.append(ch)
            latin = "LATIN" in unicodedata.name(ch, "")
        elif not latin:
            kept.append(ch)
    return unicodedata.normalize("NFKC", "".join(kept))


def alias_key(title: str) -> str:
    """The key a title is an accent alias under: its casefolded form with Latin accents
    folded, or "" when folding changes nothing (the title is then no one's alias)."""
    name = unicodedata.normalize("NFKC", title).casefold()
    folded = fold_latin_accents(name)
    return "" if folded == name else folded


def alias_spans(question: str, longest: int = 200) -> list[tuple[int, int]]:
    """Every span of the question from a word's start to a word's end (at most ``longest``
    characters): where a title's alias may stand (not inside a word)."""
    inside = [_has_content(ch) for ch in question]
    starts = [i for i, word in enumerate(inside) if word and (i == 0 or not inside[i - 1])]
    ends = [
        i + 1
        for i, word in enumerate(inside)
        if word and (i + 1 == len(inside) or not inside[i + 1])
    ]
    return [(s, e) for s in starts for e in ends if s < e <= s + longest]
