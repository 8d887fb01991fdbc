"""Checks on what callers pass to a search: questions (checked, and cut to the part that is
analysed) and counts."""

from __future__ import annotations

from .errors import InvalidInputError

MAX_QUESTION_CHARS = 100_000
ANALYSED_QUESTION_CHARS = 4_000
MAX_COUNT = 2**63 - 1  # SQLite binds integers as signed 64-bit


def check_question(question: object) -> None:
    """Reject a question that is not a string, is too long, or cannot be encoded as UTF-8."""
    if not isinstance(question, str):
        raise InvalidInputError(f"question must be a string, got {type(question).__name__}")
    if len(question) > MAX_QUESTION_CHARS:
        raise InvalidInputError(
            f"question has {len(question):,} characters, more than the limit of "
            f"{MAX_QUESTION_CHARS:,}; ask a shorter question"
        )
    try:
        question.encode("utf-8")
    except UnicodeEncodeError as error:
        raise InvalidInputError(
            f"question holds a character that is not valid Unicode text (a lone surrogate at "
            f"position {error.start})"
        ) from None


def analysed_question(question: str) -> str:
    """The part of a checked question the analyzer sees: its first `ANALYSED_QUESTION_CHARS`
    characters, NUL read as a space.

    Analysis (jieba for Han text) costs time in proportion to the text, while only the first
    80 distinct tokens are used; cutting first keeps a huge question from costing seconds.
    """
    check_question(question)
    return question[:ANALYSED_QUESTION_CHARS].replace("\x00", " ")


def check_limit(limit: object, name: str = "limit") -> None:
    """Reject a negative, non-integer or beyond-64-bit count (limit, top_k, max_tokens)."""
    if not isinstance(limit, int) or isinstance(limit, bool) or not 0 <= limit <= MAX_COUNT:
        raise InvalidInputError(
            f"{name} must be an integer between 0 and {MAX_COUNT:,}, got {limit!r}"
        )
