"""What both analyzer profiles share: the profile names, normalisation, stopwords, a unit's
analysis record."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Literal

Profile = Literal["sag2", "paper"]

_ENGLISH = "the a an of in on at to for and or is are was were be by with from which what who how"
_ENGLISH += " when where does do did that this it as"
ENGLISH_STOPWORDS = frozenset(_ENGLISH.split(" "))
_CHINESE = "的 了 是 在 和 与 或 哪 什么 哪个 哪些 如何 怎么 为什么 是否 这 那 一个 一种"
_CHINESE += " 请 我 你 他 它 吗 呢 吧 地 得"
CHINESE_STOPWORDS = frozenset(_CHINESE.split(" "))
STOPWORDS = ENGLISH_STOPWORDS | CHINESE_STOPWORDS


def normalize(text: str) -> str:
    """NFKC-normalise and lowercase, the form every token is derived from."""
    return unicodedata.normalize("NFKC", text).lower()


@dataclass(frozen=True)
class UnitAnalysis:
    """What indexing and term selection need from one unit's body.

    ``tokens`` is the body's token stream (for FTS5). ``sentences`` holds, per sentence, its
    expansion units: each name phrase once (its tokens joined by spaces) and the remaining
    single tokens, with repetitions.
    """

    tokens: tuple[str, ...]
    sentences: tuple[tuple[str, ...], ...]
