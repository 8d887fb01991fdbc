"""What the pool judge reads from a passage, analysed once and kept in a cache bounded by bytes.

A passage's analysis (content tokens and name phrases as ids, title phrase, token text for
phrase tests) is a pure function of its title and text, so it is cached across requests: the
same passages come back round after round and question after question. Tokens and name
phrases are numbered in vocabularies shared by the cached analyses, so a request lays its
passages out as arrays without a dictionary look-up per token or name. The cache is bounded by
the bytes it holds, not by entries, so a few huge passages cannot pin gigabytes; the
vocabularies are bounded by the bytes of what they hold and start afresh (with the cache) when
full. Questions are analysed per request and never cached.
"""

from __future__ import annotations

import re
import sys
import threading
import unicodedata
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ...analysis import STOPWORDS, name_runs, tokenize
from ...query import analysed_question

CACHE_BYTES = 64 * 1024 * 1024  # analyses kept across requests (about 40,000 short passages)
VOCABULARY_BYTES = 64 * 1024 * 1024  # tokens and name phrases numbered before both start afresh
ENTRY_BYTES = 100  # a numbered token's or name's cost beyond its characters (object, slots)
MAX_QUESTION_TERMS = 64  # a question's distinct terms the judge reads, in order of appearance
MAX_PASSAGE_CHARS = 20_000  # a passage's first characters that the judge analyses

Ids = npt.NDArray[np.int64]
_ASCII_WORD = re.compile(r"[0-9a-z]+")
_NO_IDS: Ids = np.zeros(0, dtype=np.int64)


@dataclass(frozen=True)
class PassageTerms:
    """A passage as the judge sees it: token ids (title included), name phrase ids (title
    included), the title's token phrase and ids, and its token text for phrase tests."""

    ids: Ids  # sorted, distinct
    name_ids: Ids  # sorted, distinct, numbered in the cache's name vocabulary
    title: str
    title_ids: Ids  # sorted, distinct
    padded_text: str
    length: int

    @property
    def size(self) -> int:
        """Approximate bytes held, for the cache's bound."""
        arrays = 8 * (len(self.ids) + len(self.name_ids) + len(self.title_ids))
        return 2 * (len(self.padded_text) + len(self.title)) + arrays + 500

    def mentions(self, phrase: str) -> bool:
        """Whether the token phrase occurs in this passage's text."""
        return bool(phrase) and f" {phrase} " in self.padded_text


@dataclass(frozen=True)
class QuestionTerms:
    """The analysed question: its distinct content tokens (at most MAX_QUESTION_TERMS), their
    ids (-1 for a token no analysed passage holds), its token text, and the ids of the
    request's name phrases it contains."""

    tokens: tuple[str, ...]
    ids: Ids
    padded_text: str
    name_ids: Ids  # sorted: the request's name phrases that occur in the question

    def mentions(self, phrase: str) -> bool:
        """Whether the token phrase occurs in the question."""
        return bool(phrase) and f" {phrase} " in self.padded_text


def words(text: str) -> list[str]:
    """The judge's tokens: ASCII text split into lowercase letter-digit runs (a regular
    expression, several times cheaper than the index's analyzer), any other text through the
    analyzer; stopwords removed. Question and passages go through the same function."""
    if text.isascii():
        return [w for w in _ASCII_WORD.findall(text.lower()) if w not in STOPWORDS]
    return tokenize(text)


class AnalysisCache:
    """Passage analyses by (title, text), least recently used first out, at most ``limit``
    bytes, with the vocabularies their token and name ids come from: those hold their text
    until they reach ``vocabulary_limit`` bytes together, and then all start afresh."""

    def __init__(self, limit: int = CACHE_BYTES, vocabulary_limit: int = VOCABULARY_BYTES) -> None:
        self.limit = limit
        self.vocabulary_limit = vocabulary_limit
        self.bytes = 0
        self.vocabulary_bytes = 0
        self._entries: OrderedDict[tuple[str, str], PassageTerms] = OrderedDict()
        self._vocabulary: dict[str, int] = {}  # token -> id
        self._names: dict[str, int] = {}  # name phrase -> id
        self._name_text: list[str] = []  # id -> name phrase
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def request_terms(
        self, passages: Sequence[tuple[str, str]], question: str
    ) -> tuple[list[PassageTerms], QuestionTerms]:
        """The analyses of a request's passages (title, text) and of its question, all with
        ids from the same vocabularies (held under one lock, so a reset cannot fall between
        them)."""
        with self._lock:
            if self.vocabulary_bytes > self.vocabulary_limit:
                self._entries.clear()
                self._vocabulary.clear()
                self._names.clear()
                self._name_text.clear()
                self.bytes = self.vocabulary_bytes = 0
            analysed = [self._terms(title, text) for title, text in passages]
            return analysed, self._question(question, analysed)

    def _terms(self, title: str, text: str) -> PassageTerms:
        """One passage's analysis, from the cache or computed and remembered."""
        key = (title, text)
        found = self._entries.get(key)
        if found is not None:
            self._entries.move_to_end(key)
            return found
        terms = self._analyse(title, text)
        cost = terms.size + sys.getsizeof(title) + sys.getsizeof(text)
        if cost <= self.limit:
            self._entries[key] = terms
            self.bytes += cost
            while self.bytes > self.limit:
                (old_title, old_text), old = self._entries.popitem(last=False)
                self.bytes -= old.size + sys.getsizeof(old_title) + sys.getsizeof(old_text)
        return terms

    def _analyse(self, title: str, text: str) -> PassageTerms:
        """Tokens, names (the title's phrase among them) and padded token text of a passage."""
        text = text[:MAX_PASSAGE_CHARS]
        body = words(text)
        title_tokens = words(title)
        nfkc = unicodedata.normalize("NFKC", text)
        names = {" ".join(words(nfkc[start:end])) for start, end in name_runs(nfkc)}
        title_phrase = " ".join(title_tokens)
        names.add(title_phrase)
        names.discard("")
        vocabulary = self._vocabulary
        tokens = (*title_tokens, *body)
        distinct = set(tokens)
        fresh = distinct.difference(vocabulary)
        if fresh:  # numbered in order of first appearance
            for token in tokens:
                if token in fresh and token not in vocabulary:
                    vocabulary[token] = len(vocabulary)
            self.vocabulary_bytes += sum(map(len, fresh)) + ENTRY_BYTES * len(fresh)
        ids = set(map(vocabulary.__getitem__, distinct))
        title_ids = set(map(vocabulary.__getitem__, title_tokens))
        return PassageTerms(
            np.array(sorted(ids), dtype=np.int64),
            np.array(sorted(map(self._name_id, names)), dtype=np.int64),
            title_phrase,
            np.array(sorted(title_ids), dtype=np.int64),
            f" {' '.join(body)} ",
            len(body),
        )

    def _name_id(self, name: str) -> int:
        """A name phrase's id in the name vocabulary, numbered when first seen."""
        found = self._names.get(name)
        if found is None:
            found = self._names[name] = len(self._name_text)
            self._name_text.append(name)
            self.vocabulary_bytes += len(name) + ENTRY_BYTES
        return found

    def _question(self, question: str, passages: Sequence[PassageTerms]) -> QuestionTerms:
        """The analysed part of the question (its first MAX_QUESTION_TERMS distinct tokens) and
        which of the passages' name phrases it contains."""
        text = analysed_question(question)
        tokens = words(text)
        distinct = tuple(dict.fromkeys(tokens))[:MAX_QUESTION_TERMS]
        ids = np.array([self._vocabulary.get(t, -1) for t in distinct], dtype=np.int64)
        padded = f" {' '.join(tokens)} "
        names = np.unique(np.concatenate([p.name_ids for p in passages] or [_NO_IDS]))
        mentioned = [n for n in names.tolist() if f" {self._name_text[n]} " in padded]
        return QuestionTerms(distinct, ids, padded, np.array(mentioned, dtype=np.int64))
