"""Tokens as each profile's FTS5 tokenizer indexes them, so every backend stores and matches
the same terms without re-tokenising."""

from __future__ import annotations

import functools
import re
import unicodedata

from .common import Profile

# The FTS5 tokenizer each profile's tokens are final for (fts5_terms reproduces it).
SAG2_FTS_TOKENIZER = "unicode61 remove_diacritics 2 tokenchars '-.'"
PAPER_FTS_TOKENIZER = "unicode61"
_ASCII_WORD = re.compile(r"[0-9a-z]+")
_ASCII_SEPARATORS = re.compile(r"[^0-9a-z]+")


def final_tokens(tokens: list[str], profile: Profile = "sag2") -> list[str]:
    """The analyzer's tokens as the profile's FTS5 tokenizer would index them (see fts5_terms),
    so every backend stores and matches exactly the same terms without re-tokenising."""
    if profile == "paper":
        if all(token.isascii() and _ASCII_WORD.fullmatch(token) for token in tokens):
            return tokens
    elif "".join(tokens).isascii():  # each token is ASCII: one C-level check, not one each
        return tokens
    return [term for token in tokens for term in fts5_terms(token, profile)]


@functools.lru_cache(maxsize=1 << 16)
def fts5_terms(token: str, profile: Profile = "sag2") -> tuple[str, ...]:
    """What the profile's FTS5 tokenizer (`SAG2_FTS_TOKENIZER`, `PAPER_FTS_TOKENIZER`) makes
    of one lowercased token.

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
